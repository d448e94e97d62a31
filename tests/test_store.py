"""Run-folder writes are atomic and model files are loaded only if the manifest vouches for them."""

from __future__ import annotations

import pytest

from fieldrl import files
from fieldrl.errors import FieldrlError
from fieldrl.evaluation.store import RunFolder


def test_atomic_write_keeps_old_file_when_interrupted(tmp_path, monkeypatch):
    target = tmp_path / "report.pdf"
    files.atomic_write_bytes(target, b"old report")

    def boom(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(files.os, "replace", boom)
    with pytest.raises(KeyboardInterrupt):
        files.atomic_write_bytes(target, b"new report that never finishes")
    assert target.read_bytes() == b"old report"
    assert [p.name for p in tmp_path.iterdir()] == ["report.pdf"]  # no temp file left


def test_manifest_records_and_verifies_hashes(tmp_path):
    folder = RunFolder(tmp_path)
    folder.write_bytes("models/a/model.zip", b"weights")
    expected = folder.expected_hash("models/a/model.zip")
    assert folder.verified_path("models/a/model.zip", expected).read_bytes() == b"weights"
    (tmp_path / "models/a/model.zip").write_bytes(b"tampered")
    with pytest.raises(FieldrlError, match="does not match the manifest"):
        folder.verified_path("models/a/model.zip", expected)


def test_file_outside_manifest_is_refused(tmp_path):
    folder = RunFolder(tmp_path)
    (tmp_path / "stray.zip").write_bytes(b"?")
    with pytest.raises(FieldrlError, match="not in this run's manifest"):
        folder.expected_hash("stray.zip")
