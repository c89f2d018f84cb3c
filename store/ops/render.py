"""Safe templates, token counting and the rendering of a persistent memory's contribution.

Templates only substitute: `{name}` or `{name.field}` is replaced by that variable (strings as
they are, lists joined by ", ", objects as compact JSON, a missing field of runtime data such as
`{context.topic}` by nothing), `{{` and `}}` are literal braces. Nothing is evaluated, so a
template from an untrusted configuration cannot run code or reach attributes. Templates are
checked when a configuration is saved (`check_template`): a lone brace, a placeholder that is not
a name, a name the template's place does not offer, a field below a value that is not a JSON
object (`{query.x}`, `{value.x}`) and any part starting with `__` are refused then, not rendered
as nothing.

A contribution is bounded by whole items: each item, best first, is kept if the rendered text
still fits `max_tokens` with it, else dropped (so a long item does not hide shorter ones after
it). A half item is never shown, and JSON is always a valid array. When not even one item fits,
the contribution is empty (`[]` in json).

Tokens are counted as WordPiece tokens of the bundled all-MiniLM-L6-v2 vocabulary (the static
embedder's tokenizer), which for English text is close to what common LLM tokenizers count.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

import orjson

from ..errors import InvalidInput

_PLACEHOLDER = re.compile(r"\{\{|\}\}|\{([A-Za-z_][\w]*(?:\.[\w]+)*)\}")


def fill(template: str, variables: dict[str, Any]) -> str:
    """`template` with every placeholder replaced by its variable (see the module docstring)."""

    def replace(match: re.Match[str]) -> str:
        if match.group(0) in ("{{", "}}"):
            return match.group(0)[0]
        value: Any = variables
        for part in match.group(1).split("."):
            value = value.get(part) if isinstance(value, dict) else None
        return as_text(value)

    return _PLACEHOLDER.sub(replace, template)


_TOKEN = re.compile(r"\{\{|\}\}|\{([^{}]*)\}|[{}]")
_NAME = re.compile(r"[A-Za-z_]\w*(?:\.\w+)*")


def placeholders(template: str, where: str = "template") -> list[str]:
    """The placeholder names of `template`, in order; a lone brace or a placeholder that is not a
    (dotted) name is refused, naming `where` and the position."""
    found = []
    for match in _TOKEN.finditer(template):
        token = match.group(0)
        if token in ("{{", "}}"):
            continue
        if match.group(1) is None:
            raise InvalidInput(
                f"{where}: unmatched {token!r} at position {match.start()} (write {token * 2} for a brace)"
            )
        if not _NAME.fullmatch(match.group(1)):
            raise InvalidInput(f"{where}: malformed placeholder {token!r} at position {match.start()}")
        found.append(match.group(1))
    return found


def check_template(
    template: str, where: str, open_names: set[str], known: dict[str, Any], objects: frozenset[str] = frozenset()
) -> None:
    """Refuse a placeholder the template cannot fill. A placeholder is one of `open_names`
    (runtime data), or a path into the static values `known`; only the names in `objects` (runtime
    JSON objects, such as a query's `context`) take a field below them (`{context.topic}`). No
    part may start with `__`: a dotted name is a JSON key, never a Python attribute, and a
    template that looks like one (`{query.__class__}`) is refused rather than rendered as nothing."""
    for name in placeholders(template, where):
        root, *fields = name.split(".")
        if any(part.startswith("__") for part in (root, *fields)):
            raise InvalidInput(f"{where}: {{{name}}}: a placeholder part may not start with '__' (no attribute access)")
        if root in open_names:  # runtime data: the caller's inputs win over a variable of that name
            if fields and root not in objects:
                takes = ", ".join("{" + n + ".field}" for n in sorted(objects)) or "none"
                raise InvalidInput(f"{where}: {{{root}}} takes no field ({{{name}}}); fields are taken by: {takes}")
            continue
        if _dig(known, name) is not _MISSING:
            continue
        allowed = ", ".join("{" + n + "}" for n in sorted(open_names | set(known)))
        raise InvalidInput(f"{where}: unknown placeholder {{{name}}}; allowed: {allowed}")


_MISSING = object()


def _dig(value: Any, path: str) -> Any:
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            return _MISSING
        value = value[part]
    return value


def as_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return ", ".join(value)
    if isinstance(value, (dict, list)):
        return orjson.dumps(value).decode()
    return str(value)


@lru_cache(maxsize=1)
def _tokenizer() -> Any:
    from tokenizers import Tokenizer

    from ..embed import MODELS

    tok = Tokenizer.from_file(str(MODELS / "static" / "tokenizer.json"))
    tok.no_padding()
    tok.no_truncation()
    return tok


def count_tokens(text: str) -> int:
    return len(_tokenizer().encode(text, add_special_tokens=False).ids) if text else 0


def render(
    items: list[dict[str, Any]], fmt: str, template: str | None, default_line: Any, heading: str, max_tokens: int | None
) -> tuple[str, int, list[int]]:
    """(rendered text, its tokens, the indices of the `items` it holds) for `items` in `fmt`."""
    if fmt == "json" and not template:
        return _render_json(items, max_tokens)
    lines = [
        fill(template, {**item, "index": i + 1}) if template else default_line(item) for i, item in enumerate(items)
    ]
    if fmt == "json":
        return _render_json(lines, max_tokens)
    if fmt == "markdown":
        head, lines = f"## {heading}\n\n", [f"- {line}" for line in lines]
    else:
        head = ""
    return _join_within(head, lines, max_tokens)


def _render_json(items: list[Any], max_tokens: int | None) -> tuple[str, int, list[int]]:
    """A JSON array of the items that fit, in order (`[]` when not even one does)."""
    kept: list[int] = []
    for i in range(len(items)):
        if max_tokens is None or count_tokens(_json([items[k] for k in [*kept, i]])) <= max_tokens:
            kept.append(i)
    text = _json([items[k] for k in kept])
    return text, count_tokens(text), kept


def _json(values: list[Any]) -> str:
    return orjson.dumps(values).decode()


def _join_within(head: str, lines: list[str], max_tokens: int | None) -> tuple[str, int, list[int]]:
    """`head` plus the whole lines that fit, in order; nothing at all (not even `head`) when none does."""
    text = head
    kept: list[int] = []
    for i, line in enumerate(lines):
        candidate = text + ("\n" if kept else "") + line
        if max_tokens is None or count_tokens(candidate) <= max_tokens:
            text = candidate
            kept.append(i)
    if not kept:
        text = ""
    return text, count_tokens(text), kept
