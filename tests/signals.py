"""Signals in the processes the tests start: a suite run in the background (`cmd &` in a
script, `nohup`) starts with SIGINT, SIGQUIT or SIGHUP ignored, every child inherits that, and
`mem` rightly keeps an ignored signal ignored; a test of what a signal does gives its child the
default actions."""

from __future__ import annotations

import signal

STOPPING = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)


def default_signals() -> None:
    """`preexec_fn` of a child a test will signal: the default action of every stopping signal."""
    for signum in STOPPING:
        signal.signal(signum, signal.SIG_DFL)
