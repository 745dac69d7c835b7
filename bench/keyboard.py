"""Keyboard plugin benchmark: in-process lookup latency beside naive anchors.

Run: ``python bench/keyboard.py`` (needs plexor and plexor-keyboard installed).

Rows (each measured call by call, p50 and p95 in microseconds):

* exact lookup — ``Catalog.lookup`` over names, aliases, glyphs, constants and codes,
  beside the anchor the original server used: a plain ``dict.get(name.lower())``.
* fuzzy lookup — a miss with ``fuzzy=True`` (Damerau-Levenshtein over every alias,
  RapidFuzz), beside ``difflib.get_close_matches`` over the same aliases; the table
  also shows how many typos each puts first correctly.
* shortcut parse — ``parse_shortcut`` beside splitting on '+' and probing a dict.
* tool call — ``Kernel.call_tool`` in process (argument validation, context, result
  conversion) beside calling the catalog directly.

Targets (issue 4): exact p50 < 50 µs, fuzzy p50 < 1 ms.
"""

from __future__ import annotations

import asyncio
import difflib
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

EXACT_QUERIES = [
    "escape", "esc", "Return", "enter", "del", "⌘", "right command", "numpad enter", "keypad 5", "~",
    "pgdn", "globe", "kVK_Space", "49", "0x31", "code 0", "F4+", "a", "Page Down", "fwd delete",
]
TYPOS = {  # typo -> the key it should find
    "escpae": "kVK_Escape", "retrun": "kVK_Return", "esscape": "kVK_Escape", "escapr": "kVK_Escape",
    "retun": "kVK_Return", "backspcae": "kVK_Delete", "comand": "kVK_Command", "pgae down": "kVK_PageDown",
    "rigth shift": "kVK_RightShift", "captial lock": "kVK_CapsLock", "spcae": "kVK_Space",
    "contorl": "kVK_Control", "optoin": "kVK_Option", "tabb": "kVK_Tab", "hoem": "kVK_Home",
    "volme up": "kVK_VolumeUp", "forwrad delete": "kVK_ForwardDelete", "pagup": "kVK_PageUp",
    # short names, where one edit is a large share of the word
    "ecs": "kVK_Escape", "tba": "kVK_Tab", "contrl": "kVK_Control", "hmoe": "kVK_Home", "edn": "kVK_End",
    "retrn": "kVK_Return", "shfit": "kVK_Shift", "otpion": "kVK_Option", "dleete": "kVK_Delete",
}
SHORTCUTS = ["cmd+shift+4", "⌘⇧4", "ctrl-alt-delete", "Command + Option + Esc", "cmd shift page down", "^C"]


def measure(func: Callable[[Any], Any], inputs: list[Any], rounds: int) -> list[float]:
    """Per-call times in microseconds, cycling through ``inputs``."""
    for item in inputs:  # warm up caches and lazy imports
        func(item)
    times: list[float] = []
    clock = time.perf_counter_ns
    for _ in range(rounds):
        for item in inputs:
            t0 = clock()
            func(item)
            times.append((clock() - t0) / 1000)
    return times


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def row(label: str, plexor_us: list[float], anchor_label: str, anchor_us: list[float]) -> dict[str, Any]:
    p, a = statistics.median(plexor_us), statistics.median(anchor_us)
    return {"what": label, "plexor_p50": p, "plexor_p95": pct(plexor_us, 0.95), "anchor": anchor_label,
            "anchor_p50": a, "anchor_p95": pct(anchor_us, 0.95), "ratio": p / a if a else float("inf")}


def main() -> int:
    from plexor.log import configure

    configure("warning")  # kernel logs: stderr, warnings only
    t0 = time.perf_counter()
    from plexor_keyboard.catalog import build, get_catalog, norm

    catalog = get_catalog()
    build_ms = (time.perf_counter() - t0) * 1000
    t1 = time.perf_counter()
    catalog.suggest("warm")
    fuzzy_init_ms = (time.perf_counter() - t1) * 1000
    t2 = time.perf_counter()
    build()
    rebuild_ms = (time.perf_counter() - t2) * 1000

    from plexor_keyboard.shortcuts import parse_shortcut

    rows = []
    # exact: plexor vs the original's plain dict of lower-cased names
    naive = {k.name.lower(): k.code for k in catalog.keys}
    naive.update({a.lower(): catalog.index[n].key.code for n, e in catalog.index.items() for a in [e.alias]})
    rows.append(row("exact lookup", measure(lambda q: catalog.lookup(q), EXACT_QUERIES, 2000),
                    "dict.get(name.lower())", measure(lambda q: naive.get(q.lower().strip()), EXACT_QUERIES, 2000)))

    # fuzzy: plexor (RapidFuzz Damerau-Levenshtein) vs difflib over the same normalised aliases
    choices = list(catalog.index)
    typos = list(TYPOS)
    rows.append(row("fuzzy lookup (miss)", measure(lambda q: catalog.lookup(q, fuzzy=True), typos, 100),
                    "difflib.get_close_matches", measure(
                        lambda q: difflib.get_close_matches(norm(q), choices, n=5, cutoff=0.5), typos, 20)))
    plexor_hits = 0
    for t, want in TYPOS.items():
        answer = catalog.lookup(t, fuzzy=True)
        assert answer["found"] is False, f"{t!r} is not a typo: it names {answer['key']['constant']}"
        plexor_hits += bool(answer["suggestions"]) and answer["suggestions"][0]["key"]["constant"] == want
    difflib_hits = 0
    for t, want in TYPOS.items():
        best = difflib.get_close_matches(norm(t), choices, n=1, cutoff=0.5)
        difflib_hits += bool(best) and catalog.index[best[0]].key.constant == want

    # shortcuts: plexor vs split on '+' and probe the naive dict
    def naive_combo(s: str) -> list[Any]:
        return [naive.get(p.strip().lower()) for p in s.split("+")]

    rows.append(row("shortcut parse", measure(lambda s: parse_shortcut(s, catalog), SHORTCUTS, 1000),
                    "split('+') + dict.get", measure(naive_combo, SHORTCUTS, 1000)))

    # the whole in-process tool call through the kernel, beside the bare catalog call
    rows.append(tool_call_row(catalog))

    print(f"plexor-keyboard bench  (python {sys.version.split()[0]}, {os.cpu_count()} CPUs)")
    print(f"first use: catalog build {build_ms:.1f} ms (a rebuild alone {rebuild_ms:.1f} ms); "
          f"first fuzzy miss incl. RapidFuzz import {fuzzy_init_ms:.1f} ms")
    print()
    header = f"{'what':<22} {'plexor p50':>11} {'p95':>9}   {'anchor':<28} {'anchor p50':>11} {'p95':>9} {'ratio':>8}"
    print(header)
    print("-" * len(header))
    for r in rows:
        print(f"{r['what']:<22} {r['plexor_p50']:>9.2f}µs {r['plexor_p95']:>7.2f}µs   {r['anchor']:<28} "
              f"{r['anchor_p50']:>9.2f}µs {r['anchor_p95']:>7.2f}µs {r['ratio']:>7.2f}×")
    print()
    print(f"typos ranked first correctly: plexor {plexor_hits}/{len(TYPOS)}, difflib {difflib_hits}/{len(TYPOS)}")
    exact_ok = rows[0]["plexor_p50"] < 50
    fuzzy_ok = rows[1]["plexor_p50"] < 1000
    print(f"targets: exact p50 < 50 µs: {'PASS' if exact_ok else 'FAIL'} ({rows[0]['plexor_p50']:.2f} µs); "
          f"fuzzy p50 < 1 ms: {'PASS' if fuzzy_ok else 'FAIL'} ({rows[1]['plexor_p50']:.1f} µs)")
    return 0 if exact_ok and fuzzy_ok else 1


def tool_call_row(catalog: Any) -> dict[str, Any]:
    from plexor.core.kernel import Kernel

    async def run() -> tuple[list[float], list[float]]:
        with tempfile.TemporaryDirectory() as home:
            env = {k: v for k, v in os.environ.items() if not k.startswith("PLEXOR_")}
            env.update({"PLEXOR_HOME": home, "PLEXOR_PLUGINS": "keyboard", "PLEXOR_LOG_LEVEL": "warning"})
            kernel = Kernel(environ=env)
            await kernel.start()
            try:
                times: list[float] = []
                for _ in range(3):  # warm up
                    await kernel.call_tool("keyboard_lookup_keycode", {"key_name": "esc"})
                for _ in range(300):
                    for q in EXACT_QUERIES:
                        t0 = time.perf_counter_ns()
                        outcome = await kernel.call_tool("keyboard_lookup_keycode", {"key_name": q})
                        times.append((time.perf_counter_ns() - t0) / 1000)
                        assert not outcome.is_error, outcome.text
            finally:
                await kernel.stop()
        return times, measure(lambda q: catalog.lookup(q), EXACT_QUERIES, 300)

    plexor_us, bare_us = asyncio.run(run())
    return row("tool call (in process)", plexor_us, "catalog.lookup (no kernel)", bare_us)


if __name__ == "__main__":
    sys.exit(main())
