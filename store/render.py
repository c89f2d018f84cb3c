"""Safe templates, token counting and the rendering of a persistent memory's contribution.

Templates only substitute: `{name}` or `{name.field}` is replaced by that variable (strings as
they are, lists joined by ", ", objects as compact JSON, missing names by nothing), `{{` and `}}`
are literal braces. Nothing is evaluated, so a template from an untrusted configuration cannot
run code or reach attributes.

Tokens are counted as WordPiece tokens of the bundled all-MiniLM-L6-v2 vocabulary (the static
embedder's tokenizer), which for English text is close to what common LLM tokenizers count.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

import orjson

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

    from .embed import MODELS

    tok = Tokenizer.from_file(str(MODELS / "static" / "tokenizer.json"))
    tok.no_padding()
    tok.no_truncation()
    return tok


def count_tokens(text: str) -> int:
    return len(_tokenizer().encode(text, add_special_tokens=False).ids) if text else 0


def cut_to_tokens(text: str, budget: int) -> str:
    """The longest prefix of `text` holding at most `budget` tokens (cut at a token boundary)."""
    encoding = _tokenizer().encode(text, add_special_tokens=False)
    if len(encoding.ids) <= budget:
        return text
    return text[: encoding.offsets[budget - 1][1]] if budget > 0 else ""


def render(
    items: list[dict[str, Any]], fmt: str, template: str | None, default_line: Any, heading: str, max_tokens: int | None
) -> tuple[str, int, bool]:
    """(rendered text, its tokens, whether it was cut) for `items` in `fmt`."""
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


def _render_json(items: list[Any], max_tokens: int | None) -> tuple[str, int, bool]:
    """A JSON array, dropping items from the end until it fits."""
    kept = list(items)
    while True:
        text = orjson.dumps(kept).decode()
        tokens = count_tokens(text)
        if max_tokens is None or tokens <= max_tokens or not kept:
            return text, tokens, len(kept) < len(items)
        kept.pop()


def _join_within(head: str, lines: list[str], max_tokens: int | None) -> tuple[str, int, bool]:
    """`head` plus whole lines while they fit; the first line that does not fit is cut."""
    text = head
    for i, line in enumerate(lines):
        candidate = text + ("\n" if i else "") + line
        if max_tokens is not None and count_tokens(candidate) > max_tokens:
            cut = cut_to_tokens(candidate, max_tokens)
            return cut, count_tokens(cut), True
        text = candidate
    return text, count_tokens(text), False
