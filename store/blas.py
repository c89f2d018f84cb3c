"""Matrix products on one thread.

The products a query makes are small (a 10k x 256 matrix times a vector: 0.1 ms on one core),
and OpenBLAS splits them over every core anyway. On a busy machine the second thread is often
not scheduled, so the product waits for it, and after the product its threads spin, taking the
core from the rest of the query (Annoy's search): measured on 2 cores under load, a query over
100k + 10k entries took 15.9 ms (p50) with OpenBLAS's threads and 6.2 ms with one.

`mem` processes set `OPENBLAS_NUM_THREADS=1` (and its kin) before numpy loads (`cli/main.py`).
A program using the library keeps its own setting: the store's calls narrow BLAS to one thread
only while they run, through threadpoolctl (the scikit-learn project's tool for exactly this;
about 10 us a call).
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])
ONE_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


@functools.lru_cache(maxsize=1)
def _controller() -> Any:
    """threadpoolctl's controller of the BLAS libraries loaded; None when BLAS is on one thread
    for the whole process already."""
    if all(os.environ.get(name) == "1" for name in ONE_THREAD_VARIABLES):
        return None
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    controller = _controller()
    if controller is None:
        yield
        return
    with controller.limit(limits=1, user_api="blas"):
        yield


def on_one_thread(function: F) -> F:
    """`function`, run with BLAS on one thread."""

    @functools.wraps(function)
    def call(*args: Any, **kwargs: Any) -> Any:
        with one_thread():
            return function(*args, **kwargs)

    return call  # type: ignore[return-value]
