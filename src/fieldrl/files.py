"""File I/O every layer shares: atomic writes and file hashes.

Everything fieldrl writes goes through :func:`atomic_write_bytes` (temp file in the same folder,
fsync, ``os.replace``), so an interrupted run never leaves a half-written results file, model,
checkpoint or PDF: the old file stays until the new one is complete. This module sits below every
other part of fieldrl (it imports only :mod:`fieldrl.errors` and :mod:`fieldrl.processes`), so the
run folder (:mod:`fieldrl.evaluation.store`), training checkpoints (:mod:`fieldrl.policies.checkpoint`)
and the benchmark suite all write the same way without importing one another.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

from fieldrl.errors import FieldrlError
from fieldrl.processes import orphaned


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


FILE_MODE = 0o666 & ~_umask()  # what open() would give; mkstemp alone makes files private (0600)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` all at once or not at all; the previous file stays intact on failure.

    A full disk or a permission problem ends as a :class:`FieldrlError` naming the file.
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
            "permissions, then resume with `fieldrl run --resume RUN_DIR`"
        ) from None
    except BaseException:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        raise


def sha256_of(path: Path) -> str:
    """The SHA-256 of a file's content, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
