"""The run folder: atomic writes and a SHA-256 manifest of every artifact.

Everything fieldrl writes goes through :func:`fieldrl.files.atomic_write_bytes` (temp file in
the same folder, fsync, ``os.replace``), so an interrupted run never leaves a
half-written results file, model or PDF: the old file stays until the new one
is complete. The manifest is what makes model files safe to load: SB3 zips
contain pickles, so a file is only unpickled if its hash matches the manifest
fieldrl wrote when it saved the file.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import platform
from contextlib import AbstractContextManager
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import pandas as pd

from fieldrl.errors import FieldrlError
from fieldrl.files import atomic_write_bytes, folder_lock, open_regular, read_regular, sha256_of

if TYPE_CHECKING:
    from pydantic import BaseModel

M = TypeVar("M", bound="BaseModel")
MANIFEST = "manifest.json"
#: held (``flock``) by the one process writing a run folder; not part of the manifest
LOCK_FILE = ".fieldrl.lock"


def _timestamp() -> str:
    import datetime as dt

    return dt.datetime.now().strftime("%Y%m%d-%H%M%S")


def new_output_folder(out: str | Path | None, root: str, stem: str) -> Path:
    """The folder a new run or study writes to: ``out``, or ``root/<stem>-<time>`` (``-2``, ``-3``, ...
    after it when a run of the same second has it already); ``out`` is refused if not empty."""
    if out is None:
        base = Path(root) / f"{stem}-{_timestamp()}"
        out = next(c for k in range(1, 10_000) if not (c := base if k == 1 else Path(f"{base}-{k}")).exists())
    path = Path(out)
    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        raise FieldrlError(f"--out = {str(path)!r}: already exists and is not empty; choose a new folder")
    return path


def library_versions() -> dict[str, str]:
    versions = {"python": platform.python_version(), "platform": platform.platform()}
    for dist in (
        "fieldrl",
        "numpy",
        "scipy",
        "torch",
        "gymnasium",
        "stable-baselines3",
        "sb3-contrib",
        "pandas",
        "pydantic",
        "matplotlib",
        "reportlab",
    ):
        try:
            versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            versions[dist] = "not installed"
    return versions


class RunFolder:
    """One run: scenario snapshot, models, results, report, manifest."""

    def __init__(self, path: str | Path):
        self.path = Path(path)

    def inside(self, rel: str | Path) -> Path:
        """``path / rel``, refused unless it stays inside the run folder (symbolic links resolved).

        Every path fieldrl writes, reads or deletes in a run is built from names in the scenario;
        this is the check that none of them leads out of the folder, whatever the name.
        """
        target = self.path / rel
        root = self.path.resolve()
        resolved = target.resolve()
        if resolved != root and not resolved.is_relative_to(root):
            raise FieldrlError(
                f"{target}: leads outside the run folder {self.path}; refusing to use it "
                "(policy and variant names must not name other folders)"
            )
        return target

    def lock(self) -> AbstractContextManager[None]:
        """Hold this run folder for writing: one fieldrl process at a time, re-entrant in that process
        (:func:`fieldrl.files.folder_lock`; the lock file is never opened through a link)."""
        return folder_lock(self.path, LOCK_FILE, "run folder")

    # -- writing -------------------------------------------------------------------------
    def write_bytes(self, rel: str, data: bytes, record: bool = True) -> Path:
        target = self.inside(rel)
        atomic_write_bytes(target, data)
        if record:
            self.record(rel)
        return target

    def write_text(self, rel: str, text: str, record: bool = True) -> Path:
        return self.write_bytes(rel, text.encode("utf-8"), record)

    def write_json(self, rel: str, obj: Any, record: bool = True) -> Path:
        return self.write_text(rel, json.dumps(obj, indent=2, default=str) + "\n", record)

    def write_parquet(self, rel: str, frame: pd.DataFrame, record: bool = True) -> Path:
        buffer = io.BytesIO()
        frame.to_parquet(buffer, index=False)
        return self.write_bytes(rel, buffer.getvalue(), record)

    # -- manifest ------------------------------------------------------------------------
    def manifest(self) -> dict[str, Any]:
        path = self.path / MANIFEST
        if not path.exists() and not path.is_symlink():
            return {"files": {}}
        try:
            manifest = json.loads(read_regular(path).decode("utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise FieldrlError(f"{path}: manifest is unreadable ({exc})") from None
        files = manifest.get("files") if isinstance(manifest, dict) else None
        if not isinstance(files, dict) or not all(
            isinstance(e, dict) and isinstance(e.get("sha256"), str) for e in files.values()
        ):
            raise FieldrlError(
                f"{path}: manifest is unreadable (not the {{files: {{path: {{sha256}}}}}} fieldrl writes)"
            )
        return manifest

    def record(self, *rels: str) -> None:
        """Add (or refresh) the SHA-256 of files in the manifest. Only the main process calls this."""
        manifest = self.manifest()
        for rel in rels:
            target = self.path / rel
            manifest["files"][rel] = {"sha256": sha256_of(target), "bytes": target.stat().st_size}
        manifest["files"] = dict(sorted(manifest["files"].items()))
        text = json.dumps(manifest, indent=2) + "\n"
        atomic_write_bytes(self.path / MANIFEST, text.encode("utf-8"))

    def forget(self, *rels: str) -> None:
        """Drop files from the manifest (the caller deletes them)."""
        if not rels:
            return
        manifest = self.manifest()
        for rel in rels:
            manifest["files"].pop(rel, None)
        atomic_write_bytes(self.path / MANIFEST, (json.dumps(manifest, indent=2) + "\n").encode("utf-8"))

    def expected_hash(self, rel: str) -> str:
        entry = self.manifest()["files"].get(rel)
        if entry is None:
            raise FieldrlError(
                f"{self.path / rel}: not in this run's manifest; fieldrl only loads model files it wrote"
            )
        return entry["sha256"]

    def hashes(self) -> dict[str, str]:
        """Relative path -> SHA-256 of every file in the manifest."""
        return {rel: entry["sha256"] for rel, entry in self.manifest()["files"].items()}

    def verified_path(self, rel: str, expected_sha256: str) -> Path:
        """Return the path of ``rel`` if its content matches ``expected_sha256``; refuse otherwise."""
        target = self.inside(rel)
        if not target.is_file():
            raise FieldrlError(f"{target}: file is missing from the run folder")
        actual = sha256_of(target)
        if actual != expected_sha256:
            raise FieldrlError(
                f"{target}: SHA-256 {actual[:12]}... does not match the manifest "
                f"({expected_sha256[:12]}...); refusing to load a file fieldrl did not write"
            )
        return target

    # -- reading -------------------------------------------------------------------------
    def require(self, rel: str, what: str) -> Path:
        target = self.inside(rel)
        if not target.is_file():
            if target.exists():  # a FIFO, device or folder (or a link to one): say which
                os.close(open_regular(target))
            raise FieldrlError(f"{self.path}: no {rel} here; {what}")
        return target

    def read_verified(self, rel: str, what: str) -> bytes:
        """The bytes of ``rel`` if they are what fieldrl recorded in the manifest; refused otherwise.

        :param what: what to do when the file is missing (e.g. "evaluate the run first").
        """
        target = self.require(rel, what)
        expected = self.hashes().get(rel)
        if expected is None:
            raise FieldrlError(f"{target}: not in this run's manifest; fieldrl reads only files it wrote")
        try:
            data = read_regular(target)
        except OSError as exc:
            raise FieldrlError(f"{target}: cannot read ({exc.strerror or exc})") from None
        if hashlib.sha256(data).hexdigest() != expected:
            raise FieldrlError(
                f"{target}: changed since fieldrl wrote it (its SHA-256 differs from the manifest); "
                "refusing to use it — restore it, or rebuild it (`fieldrl evaluate RUN_DIR`)"
            )
        return data

    def read_json(self, rel: str, what: str = "not written yet") -> Any:
        """A JSON file of the run, verified against the manifest."""
        data = self.read_verified(rel, what)
        try:
            return json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise FieldrlError(f"{self.path / rel}: not readable as JSON ({exc})") from None

    def read_model(self, rel: str, model: type[M]) -> M:
        """A JSON file of the run, verified against the manifest and validated by the pydantic ``model``
        (a file of another shape is one line naming the field)."""
        from pydantic import ValidationError

        from fieldrl.errors import file_shape_error

        try:
            return model.model_validate(self.read_json(rel))
        except ValidationError as exc:
            raise file_shape_error(exc, str(self.path / rel)) from None

    def read_parquet(self, rel: str, what: str = "not written yet") -> pd.DataFrame:
        """A parquet table of the run, verified against the manifest."""
        data = self.read_verified(rel, what)
        try:
            return pd.read_parquet(io.BytesIO(data))
        except Exception as exc:  # pyarrow raises several kinds for a damaged file
            raise FieldrlError(f"{self.path / rel}: not readable as a parquet table ({exc})") from None
