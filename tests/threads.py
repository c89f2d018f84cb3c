"""Run one function in several threads at once and collect what they raise (for the tests of an
object shared by threads: the Python API's `Memory`, the LangGraph `MemStore`)."""

from __future__ import annotations

import threading
from collections.abc import Callable


def run_in_threads(work: Callable[[int], None], count: int, timeout: float = 120) -> list[BaseException]:
    """`work(0..count-1)` in `count` threads; the exceptions they raised. Fails the test if a
    thread is still running after `timeout` seconds (a hang), leaving it behind as a daemon."""
    failures: list[BaseException] = []

    def guarded(worker: int) -> None:
        try:
            work(worker)
        except BaseException as exc:  # noqa: BLE001 - returned to the test, which asserts on it
            failures.append(exc)

    threads = [threading.Thread(target=guarded, args=(w,), daemon=True) for w in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=timeout)
    assert not any(t.is_alive() for t in threads), "a thread hangs"
    return failures
