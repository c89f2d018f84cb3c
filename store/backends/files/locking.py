"""An inter-process lock on a file, with `fcntl.flock`.

Chosen over the `filelock` package because that one costs ~40 ms to import on the CLI path and
all we need is a blocking exclusive lock, a non-blocking try, and reentrancy within a thread.
flock locks belong to the open file, so the kernel releases them when a process dies: a writer
killed with SIGKILL never leaves the store locked.
"""

from __future__ import annotations

import errno
import fcntl
import os
import threading
from pathlib import Path

from ...log import logger
from ...paths import FILE_MODE

WAIT_NOTICE = 5.0  # seconds a process waits for a lock before it says so on stderr


class FileLock:
    """Exclusive lock on `path`; reentrant for the thread that holds it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None
        self._depth = 0
        self._mutex = threading.RLock()
        self._unneeded = False  # held without a file: the store's file system is read-only

    def acquire(self, blocking: bool = True) -> bool:
        """Take the lock; with `blocking=False`, return False instead of waiting."""
        if not self._mutex.acquire(blocking):
            return False
        if self._depth == 0 and not self._lock_file(blocking):
            self._mutex.release()
            return False
        self._depth += 1
        return True

    def release(self) -> None:
        self._depth -= 1
        if self._depth == 0:
            self._unneeded = False
            if self._fd is not None:
                fcntl.flock(self._fd, fcntl.LOCK_UN)
                os.close(self._fd)
                self._fd = None
        self._mutex.release()

    def _lock_file(self, blocking: bool) -> bool:
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, FILE_MODE)
        except OSError as exc:  # a read-only store: an existing lock file locks as well read-only
            if exc.errno not in (errno.EROFS, errno.EACCES, errno.EPERM):
                raise
            if not self.path.exists():
                if exc.errno != errno.EROFS:
                    raise
                self._unneeded = True  # a read-only file system: no process can write, so none can need it
                return True
            fd = os.open(self.path, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if not blocking:
                os.close(fd)
                return False
            self._wait_for(fd)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        return True

    def _wait_for(self, fd: int) -> None:
        """Block until the holder lets go, saying so once the wait passes WAIT_NOTICE seconds:
        a holder that is stopped (SIGSTOP, a debugger) or a long maintenance command would
        otherwise leave this process silent for as long as it lasts."""
        notice = threading.Timer(WAIT_NOTICE, self._say_waiting)
        notice.daemon = True
        notice.start()
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        finally:
            notice.cancel()

    def _say_waiting(self) -> None:
        logger("lock").warning(
            "waiting for %s: another mem process holds it (a maintenance command, or a process that is stopped)",
            self.path,
        )

    def held(self) -> bool:
        """Whether this process holds the lock (in any thread)."""
        return self._depth > 0

    def is_current(self) -> bool:
        """Whether the file this process holds locked is still the one at `path` (a lock file
        deleted with its folder, then made anew by another process, locks nothing any more)."""
        if self._fd is None:
            return self._unneeded and self._depth > 0
        try:
            return os.stat(self.path).st_ino == os.fstat(self._fd).st_ino
        except FileNotFoundError:
            return False

    def __enter__(self) -> FileLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
