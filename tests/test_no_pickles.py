"""Nothing read from a run folder or checkpoint can run code (issue: pickles trusted on the word of
the folder that holds them). Each test plants a pickle whose unpickling would create a file."""

from __future__ import annotations

import hashlib
import json
import os
import pickle
from pathlib import Path

import fieldrl
from fieldrl.domains import get_domain
from fieldrl.policies import checkpoint
from fieldrl.policies.learned import MODEL_FILE, train_model
from fieldrl.scenario import LearnedEntry


class _Payload:
    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def _payload(marker: Path) -> bytes:
    return pickle.dumps(_Payload(marker))


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_a_planted_pickle_with_a_rewritten_manifest_hash_is_refused_not_run(
    scenario_data, write_scenario, tmp_path
):
    from typer.testing import CliRunner

    from fieldrl.cli import app

    run_dir = fieldrl.train(write_scenario(scenario_data), out=tmp_path / "run", show_progress=False)
    marker = tmp_path / "pwned"
    rel = f"models/default/PPO/seed-0/{MODEL_FILE}"
    planted = _payload(marker)
    (run_dir / rel).write_bytes(planted)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    manifest["files"][rel] = {"sha256": _sha(planted), "bytes": len(planted)}  # the folder vouches for it
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    before = (run_dir / "manifest.json").read_bytes()
    for extra in ([], ["--trust"]):
        result = CliRunner().invoke(app, ["evaluate", str(run_dir), "--quiet", *extra])
        flat = " ".join(result.output.split())
        assert result.exit_code == 2, flat
        assert "not a fieldrl weights file" in flat and "Traceback" not in flat
    assert not marker.exists()
    assert not (run_dir / "results.parquet").exists()
    # the models are checked before any job runs: no heuristic left partial results behind
    assert not (run_dir / "partial").exists() and (run_dir / "manifest.json").read_bytes() == before


def _tiny_training(tmp_path: Path, ckpt: Path) -> dict[str, bytes]:
    domain = get_domain("chemo")
    params = domain.params_model(preset="s1", max_t=40)
    entry = LearnedEntry(
        algorithm="sac",
        train_steps=240,
        n_envs=1,
        checkpoint_every=80,
        hyperparameters={"learning_starts": 50, "batch_size": 16, "policy_kwargs": {"net_arch": [16]}},
    )
    return train_model(
        lambda n, s: domain.make_train_vec_env(params, n, s),
        entry.training_spec(),
        0,
        tmp_path / "out",
        checkpoint_dir=ckpt,
    )


def test_a_checkpoint_of_the_old_pickle_format_is_never_read(tmp_path):
    marker = tmp_path / "pwned"
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    files = {
        "model.zip": _payload(marker),
        "replay_buffer.pkl": _payload(marker),
        "rng.pkl": _payload(marker),
    }
    for name, data in files.items():
        (ckpt / name).write_bytes(data)
    meta = {"timesteps": 160, "files": {name: _sha(d) for name, d in files.items()}}
    (ckpt / checkpoint.META).write_text(json.dumps(meta))
    _tiny_training(tmp_path, ckpt)
    assert not marker.exists()


def test_a_tampered_checkpoint_with_matching_hashes_trains_from_scratch_without_running_it(tmp_path):
    ckpt = tmp_path / "ckpt"
    _tiny_training(tmp_path, ckpt)  # leaves its last checkpoint (the caller removes it in a run)
    meta = json.loads((ckpt / checkpoint.META).read_text())
    assert checkpoint.BUFFER in meta["files"] and not list(ckpt.glob("*.pkl"))
    marker = tmp_path / "pwned"
    for name in (checkpoint.STATE, checkpoint.BUFFER):
        (ckpt / name).write_bytes(_payload(marker))
        meta["files"][name] = _sha(_payload(marker))
    (ckpt / checkpoint.META).write_text(json.dumps(meta))
    assert checkpoint.read_checkpoint(ckpt) is not None  # the hashes match: they prove nothing
    artifacts = _tiny_training(tmp_path, ckpt)
    assert not marker.exists()
    assert MODEL_FILE in artifacts
