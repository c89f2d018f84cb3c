"""Where data lives, and how names become file names.

No user-supplied name (namespace, agent, key, tag, id) is ever used as a path: each becomes a
fixed-length hex digest, and the real name is kept inside the directory's descriptor file.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

from .errors import InvalidInput

DIR_MODE = 0o700
FILE_MODE = 0o600


def default_home() -> Path:
    """`MEM_HOME`, else the platform's user data directory for `mem`."""
    env = os.environ.get("MEM_HOME")
    if env:
        return Path(env).expanduser()
    from platformdirs import user_data_path

    return user_data_path("mem", appauthor=False)


def check_home(home: Path) -> None:
    """Refuse a store directory that is a file, or lies under one, before anything is created."""
    for path in (home, *home.parents):
        if path.exists():
            if not path.is_dir():
                where = "is a file" if path == home else f"is under {path}, which is a file"
                raise InvalidInput(f"store directory {home} {where} (set --home or MEM_HOME to a directory)")
            return


def digest(*parts: str) -> str:
    """A stable 32-hex-digit name for a tuple of arbitrary strings."""
    h = hashlib.blake2b(digest_size=16)
    for part in parts:
        data = part.encode("utf-8", "surrogatepass")
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()


def ensure_dir(path: Path) -> Path:
    """Create `path`, and any missing parents, readable by the owner only."""
    if not path.is_dir():
        ensure_dir(path.parent)
        with contextlib.suppress(FileExistsError):
            path.mkdir(mode=DIR_MODE)
    return path


def fsync_dir(path: Path) -> None:
    """Make a rename or a new file in `path` durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: Path, data: bytes) -> None:
    """Replace `path` with `data`: temp file, fsync, rename, fsync of the directory. The temp
    file's name is the writer's own: two threads of a process (two store objects) may write the
    same file at once, and each renames only the file it wrote."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:  # a full disk, a folder standing where `path` should be: no temp file left
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    fsync_dir(path.parent)


@contextlib.contextmanager
def naming(path: Path) -> Iterator[None]:
    """Put `path` in an OSError raised without a file name: a failed write (a full disk) says
    only "No space left on device", numpy's short write only "8192 requested and 0 written"."""
    try:
        yield
    except OSError as exc:
        if exc.filename is not None:
            raise
        if exc.errno is None or exc.strerror is None:  # numpy's short write: the disk filled, or a size limit
            raise OSError(f"{path}: {exc} (a short write: the disk is full or a file size limit was reached)") from exc
        raise OSError(exc.errno, exc.strerror, str(path)) from exc


def write_file(path: Path, data: bytes) -> None:
    """`path.write_bytes(data)`, naming the file when the write fails."""
    with naming(path):
        path.write_bytes(data)


def save_array(path: Path, array: Any) -> None:
    """`numpy.save`, naming the file when the write fails."""
    import numpy as np  # not for every command's start: the CLI imports this module

    with naming(path):
        np.save(path, array)


@contextlib.contextmanager
def private_output(path: str | Path, keep_on: tuple[type[BaseException], ...] = ()) -> Iterator[BinaryIO]:
    """`path` to write a dump to, mode 0600. A regular file (or a new one) is written to a
    temporary file beside it, renamed over it only once the block ends: an export that fails
    midway (a server gone, a crash) leaves the file that was there, last night's backup say, as
    it was. An exception of `keep_on` (a dump complete but for what it reports) puts the new file
    in place only where there was none: it never replaces a file that may hold more. A symlink
    (`/dev/stdout` too), a device or a pipe is written in place, as is a file in a folder this
    process may not write to."""
    target = Path(path)
    if target.is_symlink() or (target.exists() and not target.is_file()):
        with private_file(target) as out:
            yield out
        return
    existed = target.exists()
    # named before it is made, so that whatever ends the block from here on (a SIGTERM that
    # lands as the file is created, too) removes it: `mkstemp` made it before telling its name
    tmp = target.parent / f".{target.name}.{secrets.token_hex(6)}.tmp"
    dump: BinaryIO | None = None
    try:
        try:
            dump = os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb")
        except PermissionError:  # a writable file in a folder we may not write to: in place
            pass
        except OSError as exc:  # name the file asked for, not the temporary one
            raise OSError(exc.errno, exc.strerror, str(target)) from None
        if dump is None:
            with private_file(target) as direct:
                yield direct
            return
        try:
            yield dump
        except keep_on:
            if not existed:
                _put_in_place(dump, tmp, target)
            raise
        _put_in_place(dump, tmp, target)
    finally:
        # closing flushes what is buffered: on a full disk it fails again, and the temporary
        # file must go all the same (the error under way is the one to report)
        if dump is not None:
            with contextlib.suppress(OSError):
                dump.close()
        tmp.unlink(missing_ok=True)


def _put_in_place(out: BinaryIO, tmp: Path, target: Path) -> None:
    out.flush()
    os.fsync(out.fileno())
    os.replace(tmp, target)
    fsync_dir(target.parent)


def private_file(path: str | Path) -> BinaryIO:
    """`path` opened for writing, mode 0600 (also when it existed with a looser mode): a dump
    holds everything the store holds."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
    try:
        if stat.S_ISREG(os.fstat(fd).st_mode):  # not /dev/stdout, a pipe, ...
            os.fchmod(fd, FILE_MODE)
    except OSError:
        os.close(fd)
        raise
    return os.fdopen(fd, "wb")
