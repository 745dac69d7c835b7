"""Loading and validating the YAML tool declarations (the shipped ``tools.yaml`` and the user's file).

A file looks like::

    version: 1
    tools:
      list_tables:
        description: List the tables of one database ...
        params:
          database: {type: identifier, required: true, description: the database}
        command: blockchain get table
        parser: {kind: json_path, path: "$[?(@.table.dbms == '{database}')].table.name", sort: true, key: tables}

Every problem in a file is collected and reported at once, each prefixed with
the tool and field it concerns; the plugin then fails to start with that list
(see README: a broken tools file is never half-loaded).
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from plexor_edgelake import command as cmd
from plexor_edgelake.params import PARAM_TYPES, ParamDef
from plexor_edgelake.parsers import validate_parser

__all__ = ["Catalog", "ParamDef", "ToolDef", "load_catalog", "method_for", "validate_document"]

SHIPPED = Path(__file__).with_name("tools.yaml")
CACHE_VERSION = 1

PARAM_KEYS = {"type", "description", "required", "default", "choices", "minimum", "maximum", "wildcard"}
TOOL_KEYS = {"description", "command", "clauses", "method", "destination", "timeout", "read_only", "params",
             "build", "parser", "handler", "headers", "enabled", "empty_ok", "title", "cases", "targets"}
CASE_KEYS = {"command", "clauses", "method", "destination", "parser", "empty_ok", "build", "headers", "read_only"}
HANDLERS = {"server_info"}
RESERVED_PARAMS = {"node", "ctx"}
RESERVED_HEADERS = {"command", "destination", "host", "content-length", "transfer-encoding", "connection", "user-agent"}
_TOOL_NAME = re.compile(r"^[a-z][a-z0-9_]{0,47}$")
_CHOICE = re.compile(r"^[A-Za-z0-9_:]+(?: [A-Za-z0-9_:]+)*$")
_DESTINATION = re.compile(r"^(local|network|[A-Za-z0-9.-]+:\d{1,5}(\s*,\s*[A-Za-z0-9.-]+:\d{1,5})*)$")
# Commands the node accepts over GET (PROTOCOL.md); every other command must be POSTed.
GET_PREFIXES = ("sql ", "get ", "blockchain get ", "blockchain read", "help", "query status", "job status",
                "file get ", "test ", "print ")


def method_for(template: str) -> str:
    """The HTTP method the node requires for a command starting like ``template``."""
    head = " ".join(template.lower().split()) + " "
    return "GET" if head.startswith(GET_PREFIXES) or head.strip() in ("get", "help", "test", "print") else "POST"


@dataclass
class ToolDef:
    name: str
    description: str
    source: str
    params: dict[str, ParamDef] = field(default_factory=dict)
    command: cmd.Template | None = None
    clauses: list[cmd.Template] = field(default_factory=list)
    method: str = "GET"
    destination: str | None = None
    timeout: float | None = None
    read_only: bool = True
    build: dict[str, str] = field(default_factory=dict)
    parser: dict[str, Any] | None = None
    handler: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    empty_ok: bool = False
    title: str | None = None
    case_param: str | None = None  # the enum parameter whose value picks one of ``cases``
    cases: dict[str, ToolDef] = field(default_factory=dict)
    targets: str | None = None  # a command answering IP:Port,...: the destination when it is not given

    @property
    def destination_param(self) -> str | None:
        """The parameter holding the destination, when ``destination`` is ``{param}``."""
        d = self.destination
        return d[1:-1] if d and d.startswith("{") and d.endswith("}") else None

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name, "source": self.source, "handler": self.handler,
            "command": self.command.text if self.command else None,
            "clauses": [c.text for c in self.clauses], "method": self.method if self.command else None,
            "destination": self.destination, "timeout": self.timeout, "read_only": self.read_only,
            **({"cases": {k: c.command.text if c.command else None for k, c in self.cases.items()},
                "case_parameter": self.case_param} if self.cases else {}),
            **({"targets": self.targets} if self.targets else {}),
        }


@dataclass
class Catalog:
    tools: dict[str, ToolDef]
    files: list[str]


def _near(word: str, options: set[str]) -> str:
    near = difflib.get_close_matches(word, sorted(options), n=1)
    return f" (did you mean {near[0]!r}?)" if near else ""


def _check_param(tool: str, name: str, spec: Any, problems: list[str]) -> ParamDef | None:
    where = f"tools.{tool}.params.{name}"
    if not cmd.IDENT.match(name) or name in RESERVED_PARAMS:
        problems.append(f"{where}: {name!r} cannot be a parameter name (plain names only; 'node' and 'ctx' are reserved)")
        return None
    if isinstance(spec, str):
        spec = {"type": spec}
    if not isinstance(spec, dict):
        problems.append(f"{where}: must be a mapping such as {{type: identifier, required: true}}")
        return None
    for key in set(spec) - PARAM_KEYS:
        problems.append(f"{where}: unknown key {key!r}{_near(key, PARAM_KEYS)}")
    ptype = spec.get("type", "string")
    if ptype not in PARAM_TYPES:
        problems.append(f"{where}: type {ptype!r} is not one of {', '.join(sorted(PARAM_TYPES))}{_near(str(ptype), set(PARAM_TYPES))}")
        return None
    p = ParamDef(name, ptype, str(spec.get("description") or ""), bool(spec.get("required", False)),
                 spec.get("default"), wildcard=bool(spec.get("wildcard", False)))
    if "required" in spec and not isinstance(spec["required"], bool):
        problems.append(f"{where}: required must be true or false")
    if ptype == "enum":
        choices = spec.get("choices")
        if not isinstance(choices, list) or not choices or not all(isinstance(c, str) and _CHOICE.match(c) for c in choices):
            problems.append(f"{where}: an enum needs choices: a list of words (letters, digits, _, single spaces)")
            return None
        p.choices = tuple(choices)
    elif "choices" in spec:
        problems.append(f"{where}: choices only apply to type enum")
    for bound in ("minimum", "maximum"):
        if bound in spec:
            if ptype not in ("integer", "number") or isinstance(spec[bound], bool) or not isinstance(spec[bound], (int, float)):
                problems.append(f"{where}: {bound} must be a number, on an integer or number parameter")
            else:
                setattr(p, bound, spec[bound])
    if p.wildcard and ptype != "identifier":
        problems.append(f"{where}: wildcard only applies to type identifier")
    if p.required and p.default is not None:
        problems.append(f"{where}: a required parameter cannot have a default")
    if p.default is not None:
        try:
            _check_default(p)
        except Exception as exc:  # noqa: BLE001 - report whatever the validator says
            problems.append(f"{where}: the default {p.default!r} is invalid: {getattr(exc, 'message', exc)}")
    return p


def _check_default(p: ParamDef) -> None:
    v = p.default
    if p.type == "integer" and (isinstance(v, bool) or not isinstance(v, int)):
        raise ValueError("not a whole number")
    if p.type == "number" and (isinstance(v, bool) or not isinstance(v, (int, float))):
        raise ValueError("not a number")
    if p.type == "boolean" and not isinstance(v, bool):
        raise ValueError("not true/false")
    if p.type == "enum" and v not in p.choices:
        raise ValueError(f"not one of {list(p.choices)}")
    if p.minimum is not None and v < p.minimum or p.maximum is not None and v > p.maximum:
        raise ValueError("outside minimum/maximum")
    p.render(v)


def _check_tool(name: str, spec: Any, source: str, problems: list[str]) -> ToolDef | None:
    where = f"tools.{name}"
    if not isinstance(name, str) or not _TOOL_NAME.match(name):
        problems.append(f"{where}: tool names are lower-case letters, digits and _, starting with a letter (max 48)")
        return None
    if not isinstance(spec, dict):
        problems.append(f"{where}: must be a mapping with description, command (or handler), params and parser")
        return None
    for key in set(spec) - TOOL_KEYS:
        problems.append(f"{where}: unknown key {key!r}{_near(key, TOOL_KEYS)}")
    before = len(problems)
    desc = spec.get("description")
    if not isinstance(desc, str) or not desc.strip():
        problems.append(f"{where}.description: required; tell the model what the tool does and returns")
    tool = ToolDef(name, (desc or "").strip(), source, title=spec.get("title"))
    if "cases" in spec:
        return _check_cases(name, spec, source, problems, tool, before)
    if ("command" in spec) == ("handler" in spec):
        problems.append(f"{where}: give exactly one of command (an EdgeLake command template), cases or handler")
        return None
    params_spec = spec.get("params") or {}
    if not isinstance(params_spec, dict):
        problems.append(f"{where}.params: must be a mapping of parameter name to its declaration")
        params_spec = {}
    for pname, pspec in params_spec.items():
        p = _check_param(name, str(pname), pspec, problems)
        if p is not None:
            tool.params[p.name] = p
    # A handler (answered by the plugin itself) may take parameters too, e.g. server_info's tool.
    if "handler" in spec:
        if spec["handler"] not in HANDLERS:
            problems.append(f"{where}.handler: {spec['handler']!r} is not one of {', '.join(sorted(HANDLERS))}")
        tool.handler = spec["handler"]
        return tool if len(problems) == before else None
    _check_build(where, spec, tool, problems)
    try:
        command = tool.command = cmd.Template(spec["command"])
    except cmd.TemplateError as exc:
        problems.append(f"{where}.command: {exc}")
        return None
    _check_templates(where, spec, tool, command, {str(n) for n in params_spec}, problems)
    _check_routing(where, spec, tool, command, problems)
    _check_options(where, spec, tool, problems)
    return tool if len(problems) == before else None


def _check_build(where: str, spec: dict[str, Any], tool: ToolDef, problems: list[str]) -> None:
    build = spec.get("build") or {}
    if not isinstance(build, dict) or not all(v in cmd.BUILDERS for v in build.values()):
        problems.append(f"{where}.build: must map a name to one of {', '.join(cmd.BUILDERS)}")
        build = {}
    for bname in build:
        if bname in tool.params:
            problems.append(f"{where}.build: {bname!r} is also a parameter")
    if "select_statement" in build.values() and "table" not in tool.params:
        problems.append(f"{where}.build: select_statement needs a 'table' parameter")
    tool.build = dict(build)


def _check_templates(where: str, spec: dict[str, Any], tool: ToolDef, command: cmd.Template, declared: set[str],
                     problems: list[str]) -> None:
    """The clauses, and every placeholder of the command and clauses naming a declared parameter."""
    clauses = spec.get("clauses") or []
    if not isinstance(clauses, list):
        problems.append(f"{where}.clauses: must be a list of templates such as 'where {{where}}'")
        clauses = []
    for i, text in enumerate(clauses):
        try:
            clause = cmd.Template(text)
        except cmd.TemplateError as exc:
            problems.append(f"{where}.clauses[{i}]: {exc}")
            continue
        if not clause.placeholders:
            problems.append(f"{where}.clauses[{i}]: {text!r} has no placeholder, so it would always be sent; "
                            "put it in the command instead")
        tool.clauses.append(clause)
    known = declared | set(tool.build)  # a declared parameter refused above is reported already, not twice
    for tmpl, label in [(command, "command")] + [(c, f"clauses[{i}]") for i, c in enumerate(tool.clauses)]:
        for ph in tmpl.placeholders:
            if ph not in known:
                problems.append(f"{where}.{label}: the placeholder {{{ph}}} is not a parameter{_near(ph, known)}; "
                                "declare it under params")
    for ph in command.placeholders:
        p = tool.params.get(ph)
        if p is not None and not p.required and p.default is None:
            problems.append(f"{where}.command: {{{ph}}} is optional with no default, so the command could be sent "
                            f"without it; make it required, give it a default, or move it into a clause")


def _check_routing(where: str, spec: dict[str, Any], tool: ToolDef, command: cmd.Template, problems: list[str]) -> None:
    inferred = method_for(command.text)
    method = spec.get("method", inferred)
    if method not in ("GET", "POST"):
        problems.append(f"{where}.method: must be GET or POST")
    elif method == "GET" and inferred == "POST":
        problems.append(f"{where}.method: the node refuses {command.text.split()[0]!r}... over GET (error 156); "
                        "only sql, get and blockchain get/read may use GET — use POST")
    else:
        tool.method = method
    dest = spec.get("destination")
    dest_param = dest[1:-1] if isinstance(dest, str) and dest.startswith("{") and dest.endswith("}") else None
    if dest_param is not None:
        if dest_param not in tool.params or tool.params[dest_param].type != "destination":
            problems.append(f"{where}.destination: {dest} must name a parameter of type destination")
    elif dest is not None and not (isinstance(dest, str) and _DESTINATION.match(dest)):
        problems.append(f"{where}.destination: must be local, network, a list of IP:port, or {{param}}")
    tool.destination = None if dest in (None, "local") else dest
    if dest == "network" and not command.text.lstrip().startswith("sql "):
        problems.append(f"{where}.destination: only sql commands can be sent to the network (the node answers "
                        "other commands with error 155); name nodes as IP:port, or leave destination out")
    targets = spec.get("targets")
    if targets is not None:
        if not isinstance(targets, str) or method_for(targets) != "GET" or "{" in targets:
            problems.append(f"{where}.targets: must be a fixed read command answering IP:Port,... "
                            "(e.g. 'blockchain get (master, query, operator) bring.ip_port')")
        elif dest_param is None:
            problems.append(f"{where}.targets: needs destination: {{param}} (the parameter that, when given, "
                            "replaces the targets)")
        else:
            tool.targets = targets


def _check_options(where: str, spec: dict[str, Any], tool: ToolDef, problems: list[str]) -> None:
    timeout = spec.get("timeout")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout <= 3600):
        problems.append(f"{where}.timeout: must be a number of seconds between 0 and 3600")
    else:
        tool.timeout = float(timeout) if timeout is not None else None
    for key, default in (("read_only", tool.method == "GET"), ("empty_ok", False)):
        value = spec.get(key, default)
        if not isinstance(value, bool):
            problems.append(f"{where}.{key}: must be true or false")
        setattr(tool, key, bool(value))
    headers = spec.get("headers") or {}
    if not isinstance(headers, dict):
        problems.append(f"{where}.headers: must be a mapping of header name to value")
        headers = {}
    for hk, hv in headers.items():
        if not isinstance(hk, str) or not re.match(r"^[A-Za-z][A-Za-z0-9-]*$", hk) or hk.lower() in RESERVED_HEADERS:
            problems.append(f"{where}.headers: {hk!r} cannot be set here (command, destination, host and framing "
                            "headers are set by the plugin)")
        elif not isinstance(hv, (str, int, float)) or re.search(r"[\x00-\x1f\x7f]", str(hv)):
            problems.append(f"{where}.headers.{hk}: must be a one-line value")
        else:
            tool.headers[hk] = str(hv)
    parser = spec.get("parser", {"kind": "auto"})
    if isinstance(parser, str):
        parser = {"kind": parser}
    for problem in validate_parser(parser, set(tool.params)):
        problems.append(f"{where}.parser: {problem}")
    tool.parser = parser if isinstance(parser, dict) else None


def _check_cases(name: str, spec: dict[str, Any], source: str, problems: list[str], tool: ToolDef,
                 before: int) -> ToolDef | None:
    """``cases: {param: P, VALUE: {command, parser, ...}, ...}``: one command per value of the enum P.

    Each case is checked as a tool of its own with the parent's parameters, so
    everything a tool may declare about its command (clauses, method,
    destination, parser, empty_ok) it may declare per case.
    """
    where = f"tools.{name}.cases"
    cases = spec["cases"]
    if "command" in spec or "handler" in spec:
        problems.append(f"tools.{name}: give either cases or command/handler, not both")
        return None
    if not isinstance(cases, dict) or not isinstance(cases.get("param"), str):
        problems.append(f"{where}: must be a mapping with param (an enum parameter) and one entry per choice")
        return None
    param = cases["param"]
    pspec = (spec.get("params") or {}).get(param)
    choices = pspec.get("choices") if isinstance(pspec, dict) and pspec.get("type") == "enum" else None
    if not choices:
        problems.append(f"{where}.param: {param!r} must be a parameter of type enum")
        return None
    inherited = {k: v for k, v in spec.items() if k not in ("cases", "description") and k not in CASE_KEYS}
    for value in choices:
        case = cases.get(value)
        if not isinstance(case, dict):
            problems.append(f"{where}: no entry for {param} = {value!r} (every choice needs its command)")
            continue
        for key in set(case) - CASE_KEYS:
            problems.append(f"{where}.{value}: unknown key {key!r}{_near(key, CASE_KEYS)}")
        sub = _check_tool(name, {**inherited, "description": tool.description or "-", **case}, source, problems)
        if sub is not None:
            tool.cases[value] = sub
    for key in set(cases) - set(choices) - {"param"}:
        problems.append(f"{where}: {key!r} is not a choice of {param}")
    if len(problems) != before or not tool.cases:
        return None
    first = next(iter(tool.cases.values()))
    tool.params, tool.case_param = first.params, param
    tool.read_only = all(c.read_only for c in tool.cases.values())
    tool.timeout = first.timeout
    return tool


def validate_document(doc: Any, source: str) -> tuple[dict[str, ToolDef], set[str], list[str]]:
    """``(tools, disabled names, problems)`` for one parsed file."""
    problems: list[str] = []
    if not isinstance(doc, dict):
        return {}, set(), ["the file must be a mapping with a 'tools' key"]
    for key in set(doc) - {"version", "tools"}:
        problems.append(f"unknown top-level key {key!r}{_near(str(key), {'version', 'tools'})}")
    if doc.get("version", 1) != 1:
        problems.append(f"version {doc.get('version')!r} is not supported (use version: 1)")
    tools_spec = doc.get("tools")
    if not isinstance(tools_spec, dict) or not tools_spec:
        problems.append("'tools' must be a mapping of tool name to declaration")
        return {}, set(), problems
    tools: dict[str, ToolDef] = {}
    disabled: set[str] = set()
    for name, spec in tools_spec.items():
        if isinstance(spec, dict) and spec.get("enabled") is False and set(spec) <= {"enabled"}:
            disabled.add(str(name))
            continue
        if isinstance(spec, dict) and "enabled" in spec and not isinstance(spec["enabled"], bool):
            problems.append(f"tools.{name}.enabled: must be true or false")
            continue
        tool = _check_tool(str(name), spec, source, problems)
        if tool is not None and (not isinstance(spec, dict) or spec.get("enabled", True)):
            tools[tool.name] = tool
        elif tool is not None:
            disabled.add(tool.name)
    return tools, disabled, problems


def load_catalog(user_file: Path | None = None, *, cache_dir: Path | None = None, shipped: Path = SHIPPED) -> Catalog:
    """The shipped tools, then the user's file on top (see :func:`plexor_edgelake.loader.load_catalog`)."""
    from plexor_edgelake.loader import load_catalog as load

    return load(user_file, cache_dir=cache_dir, shipped=shipped)
