"""Masking secret-shaped strings before anything is stored or embedded (`redact` in config,
`MEM_REDACT=1` or `mem --redact`).

What counts as secret-shaped: private key blocks, JSON Web Tokens, well-known API key formats
(OpenAI/Anthropic `sk-...`, GitHub `ghp_`/`gho_`/`github_pat_`, Slack `xox?-`, AWS `AKIA...`,
Google `AIza...`, Stripe `sk_live_`/`rk_live_`), bearer tokens, the value of any
`password`/`secret`/`token`/`api_key`-style assignment, and long opaque hex or base64 runs; in
JSON, also the text or number of a member so named (`{"password": "hunter22"}`). Each match
becomes `[REDACTED]`; the rest of the text is kept, so the memory stays useful.
"""

from __future__ import annotations

import re
from typing import Any

MASK = "[REDACTED]"

_PATTERNS = [
    r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----",
    r"\beyJ[\w-]{8,}\.[\w-]{8,}\.[\w-]{8,}",  # JWT
    r"\b(?:sk|rk)-(?:ant-|proj-)?[A-Za-z0-9_-]{16,}",
    r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{20,}|\bgithub_pat_[A-Za-z0-9_]{20,}",
    r"\bxox[abposr]-[A-Za-z0-9-]{10,}",
    r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b",
    r"\bAIza[0-9A-Za-z_-]{30,}",
    r"\b(?:sk|rk|pk)_(?:live|test)_[0-9A-Za-z]{16,}",
    r"\b[Bb]earer\s+[A-Za-z0-9._~+/-]{16,}=*",
    r"\b[0-9a-fA-F]{40,}\b",  # long hex: keys, hashes of secrets
    r"\b[A-Za-z0-9+/]{40,}={0,2}(?![A-Za-z0-9+/=])",  # long base64 runs
]
_ASSIGNMENT = re.compile(
    r"(?i)\b((?:password|passwd|pwd|secret|token|api[_-]?key|access[_-]?key|client[_-]?secret|auth)"
    r"[\"']?\s*[:=]\s*[\"']?)([^\s\"',;]{4,})"
)
_SECRET = re.compile("|".join(f"(?:{p})" for p in _PATTERNS))


def redact_text(text: str) -> str:
    text = _ASSIGNMENT.sub(lambda m: m.group(1) + MASK, text)
    return _SECRET.sub(MASK, text)


# a member named so holds a secret whatever it looks like: {"password": "hunter22"}
_SECRET_NAME = re.compile(
    r"(?i)^(?:.*[_-])?(?:password|passwd|pwd|secret|token|api[_-]?key|access[_-]?key|client[_-]?secret|auth)$"
)


def redact(value: Any) -> Any:
    """`value` (any JSON) with every secret-shaped string masked, and every text or number of a
    member named like a secret (`password`, `db_password`, `api-key`, `token`, ...); keys of
    objects are kept."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, dict):
        return {k: MASK if _secret_member(k, v) else redact(v) for k, v in value.items()}
    if isinstance(value, list):
        return [redact(v) for v in value]
    return value


def _secret_member(name: Any, value: Any) -> bool:
    held = isinstance(value, (str, int, float)) and not isinstance(value, bool) and value != ""
    return held and isinstance(name, str) and bool(_SECRET_NAME.match(name))
