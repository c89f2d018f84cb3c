"""`python -m a2e_mem.backends.postgres.build`: build the HNSW index of the store in `MEM_STORE`
(started detached by a one-shot command that found it due; see `backend.py`)."""

from __future__ import annotations

import os

if __name__ == "__main__":
    from .backend import PostgresBackend

    backend = PostgresBackend(os.environ["MEM_STORE"])
    try:
        backend.build_index(force=True)
    finally:
        backend.db.close()
