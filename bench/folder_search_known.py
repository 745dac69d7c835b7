"""Known-item search on the CPython standard library: does the file a query is about come up, and how high?

Each of the stdlib bench queries has the module(s) that answer it. The measure is the reciprocal rank of the
first passage from one of those files among the first ten passages of ``search_content`` (0 when none), and
how many queries find one at all; the ranking with the repeated-passage factor is compared with the same
ranking without it (``repeat_factor = 1.0``), on one index, in one run.

Run: nice -n 10 python bench/folder_search_known.py
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from folder_search import copy_stdlib, index_once  # noqa: E402

KNOWN = {
    "parse command line arguments": ["argparse.py", "getopt.py", "optparse.py"],
    "open a zip archive and list its members": ["zipfile.py", "zipfile/__init__.py"],
    "compute a hash of a file": ["hashlib.py"],
    "format a date as ISO 8601": ["datetime.py", "_pydatetime.py"],
    "send an email over SMTP": ["smtplib.py"],
    "read a CSV file into rows": ["csv.py"],
    "thread pool executor": ["concurrent/futures/thread.py"],
    "regular expression named groups": ["re/__init__.py", "re/_parser.py", "re/_compiler.py", "sre_parse.py"],
    "decode JSON from a string": ["json/__init__.py", "json/decoder.py"],
    "temporary directory cleanup": ["tempfile.py"],
    "asynchronous sleep in event loop": ["asyncio/tasks.py"],
    "random sample without replacement": ["random.py"],
    "deep copy of nested objects": ["copy.py"],
    "logging handler that rotates files": ["logging/handlers.py"],
    "http server request handler": ["http/server.py", "socketserver.py"],
    "socket timeout configuration": ["socket.py"],
    "pickle protocol version": ["pickle.py"],
    "decimal rounding modes": ["decimal.py", "_pydecimal.py"],
    "heap queue priority": ["heapq.py", "queue.py"],
}


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="fs-known-"))
    stdlib = work / "stdlib"
    copy_stdlib(stdlib)
    svc, _secs, _rep = index_once(stdlib, work / "data", "wordllama")
    st = next(iter(svc.folders.values()))
    out: dict[str, object] = {}
    for label, factor in (("without (factor 1.0)", 1.0), ("with (factor 0.7)", 0.7)):
        st.engine.repeat_factor = factor
        rr, found, rows = [], 0, {}
        for q, files in KNOWN.items():
            svc._cache.clear()
            res = svc.search_content(None, q, [], 10, None)["results"]
            rank = next((i + 1 for i, r in enumerate(res) if any(r["path"] == f or r["path"].endswith("/" + f)
                                                                for f in files)), None)
            rr.append(1 / rank if rank else 0.0)
            found += rank is not None
            rows[q] = rank
        out[label] = {"mrr@10": round(sum(rr) / len(rr), 4), "found in top 10": f"{found}/{len(KNOWN)}", "ranks": rows}
        print(json.dumps(out[label]), file=sys.stderr, flush=True)
    svc.stop()
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
