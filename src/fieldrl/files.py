"""File I/O every layer shares: atomic writes and file hashes.

Everything fieldrl writes goes through :func:`atomic_write_bytes` (temp file in the same folder,
fsync, ``os.replace``), so an interrupted run never leaves a half-written results file, model,
checkpoint or PDF: the old file stays until the new one is complete. This module sits below every
other part of fieldrl (it imports only :mod:`fieldrl.errors` and :mod:`fieldrl.processes`), so the
run folder (:mod:`fieldrl.evaluation.store`), training checkpoints (:mod:`fieldrl.policies.checkpoint`)
and the benchmark suite all write the same way without importing one another.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from fieldrl.errors import FieldrlError
from fieldrl.processes import orphaned


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


FILE_MODE = 0o666 & ~_umask()  # what open() would give; mkstemp alone makes files private (0600)


#: what a failed write tells the user to do once the problem is fixed (a run folder's advice)
RESUME_RUN = "resume with `fieldrl run --resume RUN_DIR`"


def atomic_write_bytes(path: Path, data: bytes, then: str = RESUME_RUN) -> None:
    """Write ``data`` to ``path`` all at once or not at all; the previous file stays intact on failure.

    A full disk or a permission problem ends as a :class:`FieldrlError` naming the file.

    :param then: what to do once space is freed or permissions fixed (the folder's own resume command).
    """
    tmp: str | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, FILE_MODE)
        if orphaned():  # a worker whose run ended (killed): its files are no longer its to write
            Path(tmp).unlink(missing_ok=True)
            os._exit(1)
        os.replace(tmp, path)
    except OSError as exc:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        reason = exc.strerror or type(exc).__name__
        raise FieldrlError(
            f"{path}: cannot write ({reason}); files written before are intact — free space or fix "
            f"permissions, then {then}"
        ) from None
    except BaseException:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        raise


def sha256_of(path: Path) -> str:
    """The SHA-256 of a regular file's content, read in 1 MiB blocks (see :func:`open_regular`)."""
    digest = hashlib.sha256()
    with os.fdopen(open_regular(path), "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISLNK, "a symbolic link"),
        (stat.S_ISFIFO, "a named pipe (FIFO)"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISDIR, "a folder"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def open_regular(path: Path, flags: int = os.O_RDONLY, follow: bool = True, create: bool = False) -> int:
    """``os.open(path)`` for a **regular file** only; the file descriptor, or a :class:`FieldrlError`.

    A named pipe, device, socket or folder put where fieldrl expects one of its files is refused
    without being opened, so it can neither block a read forever (a FIFO) nor receive what fieldrl
    writes (``/dev/sda``). With ``follow=False`` a symbolic link is refused too (``O_NOFOLLOW``): the
    files fieldrl *writes or locks in place* in its folders are opened that way, so a link planted
    there cannot send the write to a file outside. ``create`` makes a missing file (never through a
    link, whatever ``follow`` says).
    """
    try:
        before = os.stat(path, follow_symlinks=follow and not create)
    except FileNotFoundError:
        if not create:
            raise
        before = None
    except OSError as exc:
        raise FieldrlError(f"{path}: cannot open ({exc.strerror or exc})") from None
    if before is not None and not stat.S_ISREG(before.st_mode):
        raise FieldrlError(
            f"{path}: is {_kind(before.st_mode)}, not a regular file; fieldrl only uses regular files "
            "in its folders (remove it)"
        )
    extra = os.O_NONBLOCK | os.O_CLOEXEC | (os.O_NOFOLLOW if not follow or create else 0)
    try:
        fd = os.open(path, flags | extra | (os.O_CREAT if create else 0), 0o644)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise FieldrlError(
                f"{path}: is a symbolic link; fieldrl does not write through links in its folders (remove it)"
            ) from None
        if exc.errno == errno.ENOENT:
            raise
        raise FieldrlError(f"{path}: cannot open ({exc.strerror or exc})") from None
    after = os.fstat(fd)
    if not stat.S_ISREG(after.st_mode) or (
        before is not None and (after.st_ino, after.st_dev) != (before.st_ino, before.st_dev)
    ):  # swapped between the check and the open
        os.close(fd)
        raise FieldrlError(f"{path}: changed while fieldrl opened it; not a regular file it can use")
    os.set_blocking(fd, True)
    return fd


def read_regular(path: Path, limit: int | None = None) -> bytes:
    """The bytes of a regular file (see :func:`open_regular`); at most ``limit`` + 1 bytes are read,
    so a caller can tell an oversized file without reading all of it."""
    with os.fdopen(open_regular(path), "rb") as fh:
        return fh.read() if limit is None else fh.read(limit + 1)


#: lock files this process holds: resolved path -> [fd, depth] (re-entrant)
_held_locks: dict[Path, list[int]] = {}


@contextmanager
def folder_lock(folder: Path, lock_name: str, what: str) -> Iterator[None]:
    """Hold ``folder`` for writing: one fieldrl process at a time, re-entrant in that process.

    An exclusive ``flock`` on the regular file ``folder/lock_name`` (made if missing, never followed
    through a link: see :func:`open_regular`), holding the holder's pid. The kernel releases it when
    the holder exits, ``kill -9`` included, so a stale lock cannot outlive its process.

    :param what: the folder in words (``run folder``, ``tuning folder``) for the messages.
    """
    path = folder / lock_name
    key = path.parent.resolve() / path.name
    if key in _held_locks:
        _held_locks[key][1] += 1
        try:
            yield
        finally:
            _held_locks[key][1] -= 1
        return
    try:
        fd = open_regular(path, os.O_RDWR, follow=False, create=True)
    except FieldrlError as exc:
        raise FieldrlError(f"{folder}: cannot lock this {what}: {exc}") from None
    except OSError as exc:
        raise FieldrlError(f"{folder}: cannot write in this {what} ({exc.strerror or exc})") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.read(fd, 32).decode("ascii", "replace").strip() or "?"
        os.close(fd)
        raise FieldrlError(
            f"{folder}: another fieldrl process (pid {holder}) is writing this {what}; "
            "let it finish or stop it, then retry"
        ) from None
    except OSError as exc:  # a file system without locks (some network mounts): go on unlocked
        if exc.errno not in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS):
            os.close(fd)
            raise FieldrlError(f"{folder}: cannot lock this {what} ({exc.strerror or exc})") from None
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
    _held_locks[key] = [fd, 1]
    try:
        yield
    finally:
        del _held_locks[key]
        os.close(fd)  # releases the lock
