"""The read side of the service: finding a folder, searching it, listing and reading its documents.

:class:`FolderQueries` is the half of :class:`~plexor_folder_search.service.FolderService` that the
read-only tools call; the service (the other half) opens, indexes and watches the folders it reads.
"""

from __future__ import annotations

import collections
import datetime
import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from plexor import InvalidArgument, NotFound, PlexorError
from plexor_folder_search import tokens
from plexor_folder_search.embed import Embedder
from plexor_folder_search.folders import plain_text, real_path, resolve_inside
from plexor_folder_search.search import make_snippet
from plexor_folder_search.state import FolderState

__all__ = ["MAX_TEXT_PAGE", "RESULT_CAP", "FolderQueries"]

RESULT_CAP = 1000
T = TypeVar("T")
MAX_TEXT_PAGE = 100_000


class FolderQueries:
    """Search, list and read the indexed folders (the service opens and fills them)."""

    folders: dict[str, FolderState]
    embedder: Embedder | None
    embedder_error: tuple[str, str] | None
    _cache: collections.OrderedDict[str, tuple[Any, Any]]
    _cache_lock: threading.Lock

    def wait_open(self, timeout: float = 20.0) -> None:
        raise NotImplementedError

    def folder(self, name: str | None) -> FolderState:
        self.wait_open()
        if not self.folders:
            raise NotFound(
                "no folders are configured for folder-search",
                "Ask the user to add one: `plexor folder-search add PATH`, or folders = [\"~/notes\"] under "
                "[folder-search] in plexor.toml; then restart the server.",
            )
        if name is None or not str(name).strip():
            if len(self.folders) == 1:
                return next(iter(self.folders.values()))
            raise InvalidArgument(
                "several folders are configured; say which one",
                f"Pass folder as one of: {', '.join(sorted(self.folders))}.",
            )
        key = plain_text(str(name).strip(), "folder")
        st = self.folders.get(key) or self._folder_at(key)
        if st.state == "error" or st.store is None:
            raise PlexorError(f"the folder {st.name!r} cannot be searched: {st.error}",
                              "Check the server log; `plexor folder-search status` shows the folder's index.")
        return st

    def _folder_at(self, key: str) -> FolderState:
        """The folder whose path is ``key``, or a not-found error with the nearest name."""
        wanted = real_path(Path(key).expanduser())
        for cand in self.folders.values():
            if cand.spec.root == wanted:
                return cand
        import difflib

        near = difflib.get_close_matches(key, list(self.folders), n=1)
        hint = f"Did you mean {near[0]!r}? " if near else ""
        raise NotFound(
            f"no folder named {key!r}",
            f"{hint}Folders: {', '.join(sorted(self.folders))}. Folders are chosen by the user "
            "(`plexor folder-search add PATH`); call list_folders to see them.",
        )

    def _status(self, st: FolderState) -> dict[str, Any]:
        # Partial only while the index does not cover the folder yet (its first scan, a forced rebuild) or the
        # folder cannot be checked; a complete index being re-checked at startup answers in full.
        partial = not st.complete or st.state == "unavailable"
        out: dict[str, Any] = {"partial": partial}
        if partial and st.state != "ready":
            out["indexing"] = st.progress()
        return out

    def _notes(self) -> list[str]:
        if self.embedder is None and self.embedder_error:
            return [f"semantic search is unavailable ({self.embedder_error[0]}); results are keyword-only. "
                    f"To enable it: {self.embedder_error[1]}."]
        return []

    def _cached(self, key: str, st: FolderState, compute: Callable[[], T]) -> T:
        gen = (st.store.generation if st.store else 0, len(st.vectors) if st.vectors is not None else 0)
        with self._cache_lock:
            hit = self._cache.get(key)
            if hit is not None and hit[0] == gen:
                self._cache.move_to_end(key)
                cached: T = hit[1]
                return cached
        value = compute()
        with self._cache_lock:
            self._cache[key] = (gen, value)
            while len(self._cache) > 64:
                self._cache.popitem(last=False)
        return value

    # ------------------------------------------------------------------ tools
    def search_content(self, folder: str | None, concepts: str | None, exact: list[str], limit: int,
                       token: str | None) -> dict[str, Any]:
        st = self.folder(folder)
        for text in [concepts or "", *exact]:
            plain_text(text, "the query")
        if not (concepts and concepts.strip()) and not exact:
            raise InvalidArgument(
                "give semantic_concepts, exact_terms, or both",
                "semantic_concepts finds passages by meaning (\"how retries are configured\"); exact_terms lists "
                "phrases that must appear verbatim (case-insensitive), e.g. [\"max_retries\"].",
            )
        if not 1 <= limit <= 100:
            raise InvalidArgument(f"limit must be between 1 and 100, got {limit}", "Use a limit such as 10 and page with continuation_token.")
        key = tokens.query_key("search_content", st.name, concepts, exact)
        offset = tokens.decode(token, key)
        engine = st.engine
        assert engine is not None and st.store is not None
        hits = self._cached(key, st, lambda: engine.rank(concepts, exact, cap=RESULT_CAP))
        page = hits[offset : offset + limit]
        rows = self._chunk_rows(st, [h.chunk_id for h in page])
        results = []
        for h in page:
            row = rows.get(h.chunk_id)
            if row is None:
                continue
            snippet, matched = make_snippet(row["body"], exact, concepts)
            results.append({
                "path": row["path"], "chunk_id": row["seq"], "lines": [row["start_line"], row["end_line"]],
                "heading": row["heading"] or None, "title": row["title"], "kind": row["kind"],
                "snippet": snippet, "matched": matched, "score": round(h.score, 4),
                "score_parts": {"keyword": round(h.keyword, 4),
                                "semantic": None if h.semantic is None else round(h.semantic, 4)},
            })
        nxt = offset + limit if offset + limit < len(hits) else None
        data: dict[str, Any] = {
            "folder": st.name,
            "mode": "hybrid" if (engine.semantic_available and (concepts or exact)) else "keyword-only",
            "results": results, "total": len(hits), "offset": offset,
            "has_more": nxt is not None,
            "continuation_token": tokens.encode(key, nxt) if nxt is not None else None,
            **self._status(st),
        }
        notes = self._notes()
        if len(hits) >= RESULT_CAP:
            notes.append(f"only the best {RESULT_CAP} matches are ranked; narrow the query to see others")
        elif not hits and concepts and not exact:
            notes.append("no passage contains a word of the query or is close enough to it in meaning; "
                         "try other words, or exact_terms for a phrase that must appear")
        if notes:
            data["notes"] = notes
        return data

    def find_documents(self, folder: str | None, query: str, limit: int, token: str | None) -> dict[str, Any]:
        st = self.folder(folder)
        plain_text(query or "", "the query")
        if not query or not query.strip():
            raise InvalidArgument("query is empty", "Describe what the documents are about, e.g. \"quarterly budget\".")
        if not 1 <= limit <= 100:
            raise InvalidArgument(f"limit must be between 1 and 100, got {limit}", "Use a limit such as 20 and page with continuation_token.")
        key = tokens.query_key("find_documents", st.name, query)
        offset = tokens.decode(token, key)
        engine = st.engine
        assert engine is not None
        ranked = self._cached(key, st, lambda: engine.rank_documents(query, cap=RESULT_CAP))
        page = ranked[offset : offset + limit]
        rows = self._chunk_rows(st, [h.chunk_id for _fid, h in page])
        results = []
        for _fid, h in page:
            row = rows.get(h.chunk_id)
            if row is None:
                continue
            snippet, _ = make_snippet(row["body"], [], query, width=240)
            results.append({
                "path": row["path"], "title": row["title"], "kind": row["kind"], "score": round(h.score, 4),
                "score_parts": {"keyword": round(h.keyword, 4),
                                "semantic": None if h.semantic is None else round(h.semantic, 4)},
                "best_chunk": {"chunk_id": row["seq"], "lines": [row["start_line"], row["end_line"]], "snippet": snippet},
            })
        nxt = offset + limit if offset + limit < len(ranked) else None
        data: dict[str, Any] = {
            "folder": st.name, "results": results, "total": len(ranked), "offset": offset,
            "has_more": nxt is not None, "continuation_token": tokens.encode(key, nxt) if nxt is not None else None,
            "mode": "hybrid" if engine.semantic_available else "keyword-only", **self._status(st),
        }
        if self._notes():
            data["notes"] = self._notes()
        return data

    def _chunk_rows(self, st: FolderState, ids: list[int]) -> dict[int, dict[str, Any]]:
        if not ids:
            return {}
        assert st.store is not None
        with st.store.reader() as conn:
            conn.row_factory = _dict_row
            try:
                rows = conn.execute(
                    "SELECT c.id, c.seq, c.start_line, c.end_line, c.heading, c.body, f.path, f.kind, f.title "
                    "FROM chunks c JOIN files f ON f.id = c.file_id WHERE c.id IN (SELECT value FROM json_each(?))",
                    (json.dumps(ids),),
                ).fetchall()
            finally:
                conn.row_factory = None
        return {r["id"]: r for r in rows}

    def list_documents(self, folder: str | None, sub_path: str | None, recursive: bool, limit: int,
                       token: str | None) -> dict[str, Any]:
        st = self.folder(folder)
        if not 1 <= limit <= 500:
            raise InvalidArgument(f"limit must be between 1 and 500, got {limit}", "Use a limit such as 50 and page with continuation_token.")
        _full, clean = resolve_inside(st.spec.root, sub_path, must_exist=False)
        prefix = clean + "/" if clean else ""
        key = tokens.query_key("list_documents", st.name, clean, recursive)
        offset = tokens.decode(token, key)
        assert st.store is not None
        where = "substr(path, 1, ?) = ?"
        args: list[Any] = [len(prefix), prefix]
        if not recursive:
            where += " AND instr(substr(path, ?), '/') = 0"
            args.append(len(prefix) + 1)
        with st.store.reader() as conn:
            total = conn.execute(f"SELECT count(*) FROM files WHERE {where}", args).fetchone()[0]
            rows = conn.execute(
                f"SELECT path, kind, size, mtime_ns, chunk_count, title FROM files WHERE {where} ORDER BY path LIMIT ? OFFSET ?",
                [*args, limit, offset],
            ).fetchall()
        docs = [{"path": r[0], "kind": r[1], "size": r[2], "modified": _iso(r[3]), "chunks": r[4], "title": r[5]} for r in rows]
        nxt = offset + limit if offset + limit < total else None
        data: dict[str, Any] = {"folder": st.name, "sub_path": clean, "recursive": recursive, "documents": docs,
                                "total": total, "offset": offset, "has_more": nxt is not None,
                                "continuation_token": tokens.encode(key, nxt) if nxt is not None else None,
                                **self._status(st)}
        if total == 0 and clean and not (st.spec.root / clean).is_dir():
            raise NotFound(f"no directory {clean!r} in the folder {st.name!r}", "Call explore to see the folder's directories.")
        return data

    def explore(self, folder: str | None, sub_path: str | None, max_entries: int = 200) -> dict[str, Any]:
        st = self.folder(folder)
        full, clean = resolve_inside(st.spec.root, sub_path, must_exist=False)
        prefix = clean + "/" if clean else ""
        assert st.store is not None
        with st.store.reader() as conn:
            paths = [r[0] for r in conn.execute("SELECT path FROM files WHERE substr(path, 1, ?) = ? ORDER BY path",
                                                (len(prefix), prefix))]
            skipped = conn.execute("SELECT reason, count(*) FROM skipped WHERE substr(path, 1, ?) = ? GROUP BY reason",
                                   (len(prefix), prefix)).fetchall()
        if not paths and clean and not full.is_dir():
            raise NotFound(f"no directory {clean!r} in the folder {st.name!r}", "Call explore without sub_path to see the top level.")
        dirs: dict[str, int] = {}
        files: list[str] = []
        for p in paths:
            rest = p[len(prefix):]
            if "/" in rest:
                d = rest.split("/", 1)[0]
                dirs[d] = dirs.get(d, 0) + 1
            else:
                files.append(rest)
        entries = [{"name": d + "/", "type": "directory", "documents": n} for d, n in sorted(dirs.items())]
        entries += [{"name": f, "type": "file"} for f in files]
        truncated = len(entries) > max_entries
        data: dict[str, Any] = {
            "folder": st.name, "sub_path": clean, "documents": len(paths), "directories": len(dirs),
            "files_here": len(files), "entries": entries[:max_entries], "truncated": truncated,
            "skipped": {r[0]: r[1] for r in skipped}, **self._status(st),
        }
        return data

    def _file_row(self, st: FolderState, path: str) -> tuple[dict[str, Any] | None, str]:
        full, clean = resolve_inside(st.spec.root, path, must_exist=False)
        if not clean:
            raise InvalidArgument("path is empty", "Pass a document path relative to the folder, e.g. 'docs/intro.md'.")
        assert st.store is not None
        with st.store.reader() as conn:
            conn.row_factory = _dict_row
            try:
                row = conn.execute("SELECT * FROM files WHERE path=?", (clean,)).fetchone()
                skip = None if row else conn.execute("SELECT reason, detail FROM skipped WHERE path=?", (clean,)).fetchone()
            finally:
                conn.row_factory = None
        if row is None:
            if skip is not None:
                raise NotFound(f"{clean!r} is not indexed: {skip['reason']}" + (f" ({skip['detail']})" if skip["detail"] else ""),
                               "Only indexed documents can be read; list_documents shows them.")
            if full.exists() and st.state != "ready":
                raise NotFound(f"{clean!r} is not indexed yet; the folder is still being indexed ({round(st.fraction * 100)}%)",
                               "Retry in a few seconds.")
            if full.is_dir():
                raise InvalidArgument(f"{clean!r} is a directory", "Call list_documents or explore with sub_path set to it.")
            raise NotFound(f"no document {clean!r} in the folder {st.name!r}",
                           "Check the path with list_documents or find_documents; paths are relative to the folder.")
        return row, clean

    def metadata(self, folder: str | None, path: str) -> dict[str, Any]:
        st = self.folder(folder)
        row, clean = self._file_row(st, path)
        assert row is not None
        outline = json.loads(row["outline"] or "[]")
        return {
            "folder": st.name, "path": clean, "kind": row["kind"], "size": row["size"], "modified": _iso(row["mtime_ns"]),
            "indexed_at": datetime.datetime.fromtimestamp(row["indexed_at"], datetime.UTC).isoformat(),
            "chunks": row["chunk_count"], "characters": row["chars"], "title": row["title"],
            "headings": [h["title"] for h in outline][:50], "outline": outline[:200],
            "fingerprint": row["fingerprint"], **self._status(st),
        }

    def document_text(self, folder: str | None, path: str, max_chars: int, token: str | None) -> dict[str, Any]:
        st = self.folder(folder)
        if not 100 <= max_chars <= MAX_TEXT_PAGE:
            raise InvalidArgument(f"max_chars must be between 100 and {MAX_TEXT_PAGE}, got {max_chars}",
                                  "Use max_chars such as 20000 and follow continuation_token for the rest.")
        row, clean = self._file_row(st, path)
        assert row is not None and st.store is not None
        key = tokens.query_key("get_document_text", st.name, clean, row["fingerprint"])
        try:
            offset = tokens.decode(token, key)
        except InvalidArgument as exc:
            raise InvalidArgument(exc.message, "The document may have changed since that page; "
                                  "omit continuation_token to read it again from the start.") from None
        text = st.store.document_text(row["id"])
        piece = text[offset : offset + max_chars]
        end = offset + len(piece)
        if end < len(text):
            # End on a line break when one is near, so pages split cleanly.
            nl = piece.rfind("\n", max(0, len(piece) - 2000))
            if nl > 0:
                piece = piece[: nl + 1]
                end = offset + len(piece)
        start_line = text.count("\n", 0, offset) + 1
        nxt = end if end < len(text) else None
        return {
            "folder": st.name, "path": clean, "kind": row["kind"], "text": piece, "offset": offset,
            "total_chars": len(text), "lines": [start_line, start_line + piece.count("\n") - (1 if piece.endswith("\n") else 0)],
            "has_more": nxt is not None, "continuation_token": tokens.encode(key, nxt) if nxt is not None else None,
        }

    def chunks(self, folder: str | None, path: str, chunk_ids: list[int]) -> dict[str, Any]:
        st = self.folder(folder)
        if not chunk_ids:
            raise InvalidArgument("chunk_ids is empty", "Pass the chunk_id values from search_content results, e.g. [0, 3].")
        if len(chunk_ids) > 50:
            raise InvalidArgument(f"at most 50 chunk ids per call, got {len(chunk_ids)}", "Split the request.")
        row, clean = self._file_row(st, path)
        assert row is not None and st.store is not None
        with st.store.reader() as conn:
            found = {r[0]: r for r in conn.execute(
                "SELECT seq, start_line, end_line, heading, body FROM chunks WHERE file_id=? AND seq IN (SELECT value FROM json_each(?))",
                (row["id"], json.dumps(list(chunk_ids))))}
        missing = [c for c in chunk_ids if c not in found]
        if len(missing) == len(chunk_ids):
            raise NotFound(f"no chunk {missing} in {clean!r}",
                           f"This document has chunk ids 0 to {row['chunk_count'] - 1}; they come from search_content results.")
        out = [{"chunk_id": c, "lines": [found[c][1], found[c][2]], "heading": found[c][3] or None, "text": found[c][4]}
               for c in chunk_ids if c in found]
        data: dict[str, Any] = {"folder": st.name, "path": clean, "chunks": out, "chunk_count": row["chunk_count"]}
        if missing:
            data["missing"] = missing
        return data


def _dict_row(cursor: Any, row: tuple[Any, ...]) -> dict[str, Any]:
    return {d[0]: v for d, v in zip(cursor.description, row, strict=True)}


def _iso(mtime_ns: int) -> str:
    return datetime.datetime.fromtimestamp(mtime_ns / 1e9, datetime.UTC).isoformat(timespec="seconds")


