"""Command templates: literal text with ``{name}`` placeholders, never sent with one unfilled."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from plexor import InvalidArgument

__all__ = ["Template", "TemplateError", "render_command"]

IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")

_PLACEHOLDER = re.compile(r"\{\{|\}\}|\{([^{}]*)\}|[{}]")


class TemplateError(ValueError):
    """A template that cannot be used (raised while the tools file is validated)."""


class Template:
    """A command template: literal text with ``{name}`` placeholders (``{{`` / ``}}`` are braces)."""

    def __init__(self, text: str) -> None:
        if not isinstance(text, str) or not text.strip():
            raise TemplateError("must be a non-empty string")
        self.text = text
        self.parts: list[tuple[bool, str]] = []  # (is_placeholder, text)
        pos = 0
        for m in _PLACEHOLDER.finditer(text):
            if m.start() > pos:
                self.parts.append((False, text[pos:m.start()]))
            token = m.group()
            if token in ("{{", "}}"):
                self.parts.append((False, token[0]))
            elif token in ("{", "}"):
                raise TemplateError(f"has an unmatched {token!r} at position {m.start()} (write {token * 2} for a literal brace)")
            else:
                name = m.group(1).strip()
                if not IDENT.match(name):
                    raise TemplateError(f"has the placeholder {token!r}, which is not a plain name")
                self.parts.append((True, name))
            pos = m.end()
        if pos < len(text):
            self.parts.append((False, text[pos:]))
        _no_control_template(text)

    @property
    def placeholders(self) -> list[str]:
        return [p for is_ph, p in self.parts if is_ph]

    def missing(self, values: Mapping[str, str | None]) -> list[str]:
        return [p for p in self.placeholders if values.get(p) in (None, "")]

    def render(self, values: Mapping[str, str | None]) -> str:
        """Fill every placeholder; a placeholder without a value is an error, never literal text."""
        missing = self.missing(values)
        if missing:
            raise InvalidArgument(
                f"the command template {self.text!r} needs {', '.join(missing)}, which {'was' if len(missing) == 1 else 'were'} not given",
                f"Pass {', '.join(repr(m) for m in missing)}.",
            )
        return "".join(values[p] if is_ph else p for is_ph, p in self.parts)  # type: ignore[misc]


def _no_control_template(text: str) -> None:
    m = _CONTROL.search(text)
    if m:
        raise TemplateError(f"contains the control character {m.group()!r}; commands travel in one HTTP header line")


def render_command(command: Template, clauses: Iterable[Template], values: Mapping[str, str | None]) -> str:
    """The main template, then each clause whose placeholders all have values (exactly those)."""
    out = command.render(values)
    for clause in clauses:
        if not clause.missing(values):
            out = f"{out} {clause.render(values)}"
    return out.strip()
