"""Local constrained-decoding compilers over Plexor's tool schemas: ``python decoding.py CONFIG``.

A model served locally is held to a tool's schema by compiling it into a grammar: llguidance
(``LLMatcher.grammar_from_json_schema``, then its validation, which reports unsupported keywords
as warnings) and outlines-core (``build_regex_from_schema``). Config: ``{"schemas": {tool: schema},
"out"}``; the record lists, per compiler, every tool it refused or warned about."""

from __future__ import annotations

import json
import sys
from importlib.metadata import version

import llguidance
from outlines_core.json_schema import build_regex_from_schema


def main() -> None:
    with open(sys.argv[1], encoding="utf-8") as f:
        config = json.load(f)
    record: dict = {"versions": {d: version(d) for d in ("llguidance", "outlines_core")},
                    "llguidance": {}, "outlines_core": {}, "compiled": 0}
    for name, schema in config["schemas"].items():
        text = json.dumps(schema)
        try:
            failed, warnings = llguidance.LLMatcher.validate_grammar_with_warnings(
                llguidance.LLMatcher.grammar_from_json_schema(text))
            if failed or warnings:
                record["llguidance"][name] = warnings
        except Exception as e:  # noqa: BLE001 - the compiler's refusal is the finding
            record["llguidance"][name] = [f"{type(e).__name__}: {e}"]
        try:
            build_regex_from_schema(text)
        except Exception as e:  # noqa: BLE001
            record["outlines_core"][name] = [f"{type(e).__name__}: {e}"]
        record["compiled"] += 1
    with open(config["out"], "w", encoding="utf-8") as f:
        json.dump(record, f, indent=1)


if __name__ == "__main__":
    main()
