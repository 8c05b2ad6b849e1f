"""MkDocs hook: reference pages generated from the code, so they cannot drift from it.

A page asks for a generated section with an HTML comment on a line of its own:

* ``<!-- generated: cli -->``: every ``agentlog`` command, its usage, help and options,
  read from the typer app's click command tree;
* ``<!-- generated: plan -->``: the certification plan's TOML tables and fields, read from
  the pydantic models of ``agentlog.estimators.certify``;
* ``<!-- generated: cache-keys -->``: each registered provider's cache-key field list.

The same functions serve ``tests/docs`` (which checks that every command and field shows).
"""

from __future__ import annotations

import re
import types
import typing
from typing import Any

MARKER = re.compile(r"^<!-- generated: ([a-z-]+) -->$", re.M)


def _cell(text: object) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def cli_markdown() -> str:
    """Every command of the ``agentlog`` app, depth first, in the order ``--help`` lists them."""
    import typer

    from agentlog.cli._app import app, load_command

    root = typer.main.get_command(app)
    out: list[str] = []

    def visit(command: Any, path: list[str], parent: Any) -> None:
        ctx = typer.Context(command, info_name=path[-1], parent=parent)
        name = " ".join(path)
        if len(path) > 1:
            out.append(f"## `{name}`\n")
        help_text = (command.help or "").strip()
        if help_text:
            out.append(help_text.split("\n\n")[0].replace("\n", " ") + "\n")
        out.append(f"```text\n{command.get_usage(ctx)}\n```\n")
        rows = []
        for param in command.get_params(ctx):
            if getattr(param, "hidden", False):
                continue
            record = param.get_help_record(ctx)  # what --help prints: (names, help)
            if record is None:  # an argument without help text
                record = ((param.metavar or param.name or "").upper(), "")
            names, helptext = record
            rows.append(f"| `{_cell(names)}` | {_cell(helptext)} |")
        if rows:
            out.append("| option | meaning |\n| --- | --- |")
            out.append("\n".join(rows) + "\n")
        if hasattr(command, "list_commands"):
            for sub in command.list_commands(ctx):
                child = command.get_command(ctx, sub)
                lazy = getattr(command, "registry", {})
                if type(child).__name__ == "_Listed" and sub in lazy:  # not imported yet
                    child = load_command(sub, *lazy[sub][:2])
                if child is not None and not child.hidden:
                    visit(child, [*path, sub], ctx)

    visit(root, ["agentlog"], None)
    return "\n".join(out)


def _type_name(annotation: Any) -> str:
    """A field's type as a reader writes it in TOML terms: ``float | None``, ``'a' | 'b'``."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        return _type_name(args[0])
    if origin is typing.Literal:
        return " | ".join(repr(a) for a in args)
    if origin in (typing.Union, types.UnionType):
        return " | ".join(_type_name(a) for a in args)
    if origin is not None:
        return f"{getattr(origin, '__name__', origin)}[{', '.join(map(_type_name, args))}]"
    if annotation is type(None):
        return "None"
    return getattr(annotation, "__name__", repr(annotation))


def _attributes(model: Any) -> dict[str, str]:
    """The ``Attributes:`` section of a Google-style docstring, by field name."""
    doc = model.__doc__ or ""
    if "Attributes:" not in doc:
        return {}
    found: dict[str, str] = {}
    name = None
    for line in doc.split("Attributes:", 1)[1].splitlines():
        item = re.match(r"^\s{4,8}(\w+)(?: \(.*?\))?: (.*)$", line)
        if item and (name is None or len(line) - len(line.lstrip()) <= 8):
            name, found[item.group(1)] = item.group(1), item.group(2)
        elif name and line.strip():
            found[name] += " " + line.strip()
        elif not line.strip() and found:
            name = None
    return found


def plan_markdown() -> str:
    """The plan's models, the top-level table first, each field with its type and default."""
    from pydantic import BaseModel

    from agentlog.estimators import certify

    out: list[str] = []
    seen: set[type[BaseModel]] = set()
    queue: list[tuple[str, type[BaseModel]]] = [("top level", certify.Plan)]
    while queue:
        where, model = queue.pop(0)
        if model in seen:
            continue
        seen.add(model)
        doc = (model.__doc__ or "").strip().split("\n\n")[0].replace("\n", " ")
        out.append(f"## `{model.__name__}` ({where})\n\n{doc}\n")
        out.append("| field | type | default | meaning |\n| --- | --- | --- | --- |")
        meaning = _attributes(model)
        for name, field in model.model_fields.items():
            default = field.get_default()
            shown = ("required" if field.is_required() else
                     "(a table)" if isinstance(default, BaseModel) else f"`{default!r}`")
            out.append(f"| `{name}` | `{_cell(_type_name(field.annotation))}` | "
                       f"{_cell(shown)} | {_cell(meaning.get(name, ''))} |")
            for arg in _models_in(field.annotation):
                queue.append((f"in `{model.__name__}.{name}`", arg))
        out.append("")
    return "\n".join(out)


def _models_in(annotation: Any) -> list[Any]:
    from pydantic import BaseModel

    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in typing.get_args(annotation) for m in _models_in(arg)]


def cache_keys_markdown() -> str:
    """Each provider's registered key rules: included and excluded fields with the reasons."""
    from agentlog.adapters import registered_request_fields

    out: list[str] = []
    for rules in sorted(registered_request_fields(), key=lambda r: (r.provider, r.version)):
        out.append(f"## `{rules.provider}` version {rules.version}\n")
        out.append(f"Fingerprint `{rules.fingerprint}`.\n")
        out.append("In the key (besides any field not listed below): "
                   + ", ".join(f"`{f}`" for f in rules.include) + ".\n")
        out.append(f"Dropped from each item of {', '.join(f'`{f}`' for f in rules.message_lists)}: "
                   + ", ".join(f"`{f}`" for f in rules.message_exclude) + ".\n")
        out.append("| left out | why |\n| --- | --- |")
        out.extend(f"| `{f}` | {_cell(rules.reasons.get(f, ''))} |" for f in rules.exclude)
        out.append("")
    return "\n".join(out)


GENERATORS = {"cli": cli_markdown, "plan": plan_markdown, "cache-keys": cache_keys_markdown}


def on_page_markdown(markdown: str, **_: Any) -> str:
    """Replace each ``<!-- generated: NAME -->`` line with what its generator writes."""
    def generate(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in GENERATORS:
            raise ValueError(f"unknown generated section {name!r}; known: {sorted(GENERATORS)}")
        return GENERATORS[name]()
    return MARKER.sub(generate, markdown)
