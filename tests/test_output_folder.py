"""Default run folders: two runs started in the same second get two folders, never one."""

from __future__ import annotations

import pytest

from fieldrl.errors import FieldrlError
from fieldrl.evaluation import store


def test_runs_started_in_the_same_second_get_their_own_folders(tmp_path, monkeypatch):
    monkeypatch.setattr(store, "_timestamp", lambda: "20261205-120000")
    first = store.new_output_folder(None, str(tmp_path), "chemo-quick")
    first.mkdir()
    (first / "run.json").write_text("{}")
    second = store.new_output_folder(None, str(tmp_path), "chemo-quick")
    assert first.name == "chemo-quick-20261205-120000"
    assert second.name == "chemo-quick-20261205-120000-2"
    second.mkdir()
    assert store.new_output_folder(None, str(tmp_path), "chemo-quick").name.endswith("-3")


def test_a_named_folder_that_is_not_empty_is_refused(tmp_path):
    (tmp_path / "x").write_text("mine")
    with pytest.raises(FieldrlError, match="already exists and is not empty"):
        store.new_output_folder(tmp_path, "runs", "chemo-quick")
