"""Log records to stderr as `mem: level: message`; `logging` is imported only when one is made.

(`import logging` costs ~10 ms, which every one-shot CLI call would pay for nothing.)
"""

from __future__ import annotations

import os
import sys
from typing import Any


def level() -> str:
    """`MEM_LOG` as `logging` names levels (checked when the store opened); WARNING by default."""
    name = os.environ.get("MEM_LOG", "").strip().upper()
    return name if name in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL") else "WARNING"


def logger(name: str) -> Any:
    """The `mem.<name>` logger, with the stderr handler installed on first use."""
    import logging

    root = logging.getLogger("mem")
    if not root.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("mem: %(levelname)s: %(message)s"))
        root.addHandler(handler)
        root.setLevel(level())
        root.propagate = False
    return logging.getLogger(f"mem.{name}")
