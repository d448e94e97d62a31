"""Resumable training: periodic checkpoints of everything a training run needs to continue.

A checkpoint is a folder holding the SB3 model (weights and optimiser state), the replay
buffer where the algorithm has one, the observation/return normalisation statistics, the
learning curve so far and the global RNG states, plus ``checkpoint.json`` (written last,
atomically) with the step count and the SHA-256 of every other file. A checkpoint whose
files do not match its ``checkpoint.json`` is ignored (training restarts from scratch), so
a kill during a save never resumes from a torn checkpoint, and no pickle is loaded unless
fieldrl wrote it.

Resumed training continues the same model, buffer and statistics; it is not bit-identical
to an uninterrupted run (the environments restart their episodes at the checkpoint).
"""

from __future__ import annotations

import hashlib
import io
import json
import pickle
import random
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.vec_env import VecNormalize

from fieldrl.evaluation.store import atomic_write_bytes

META = "checkpoint.json"
MODEL = "model.zip"
BUFFER = "replay_buffer.pkl"
NORM = "normalization.json"
CURVE = "curve.json"
RNG = "rng.pkl"


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _rms_state(rms: Any) -> dict[str, Any]:
    return {"mean": np.asarray(rms.mean).tolist(), "var": np.asarray(rms.var).tolist(), "count": rms.count}


def _set_rms(rms: Any, state: dict[str, Any]) -> None:
    rms.mean = np.asarray(state["mean"], dtype=np.float64)
    rms.var = np.asarray(state["var"], dtype=np.float64)
    rms.count = float(state["count"])


def save_checkpoint(
    folder: Path, model: BaseAlgorithm, venv: Any, curve_rows: list[Any], timesteps: int
) -> None:
    """Write a complete checkpoint of ``model`` at ``timesteps`` into ``folder``."""
    files: dict[str, bytes] = {}
    buffer = io.BytesIO()
    model.save(buffer)
    files[MODEL] = buffer.getvalue()
    if getattr(model, "replay_buffer", None) is not None:
        files[BUFFER] = pickle.dumps(model.replay_buffer, protocol=pickle.HIGHEST_PROTOCOL)
    if isinstance(venv, VecNormalize):
        norm = {"obs_rms": _rms_state(venv.obs_rms), "ret_rms": _rms_state(venv.ret_rms)}
        files[NORM] = json.dumps(norm).encode()
    files[CURVE] = json.dumps([list(r) for r in curve_rows]).encode()
    rng = {"torch": torch.get_rng_state(), "numpy": np.random.get_state(), "random": random.getstate()}
    files[RNG] = pickle.dumps(rng)
    for name, data in files.items():
        atomic_write_bytes(folder / name, data)
    meta = {"timesteps": int(timesteps), "files": {name: _digest(d) for name, d in files.items()}}
    atomic_write_bytes(folder / META, json.dumps(meta, indent=2).encode())


def read_checkpoint(folder: Path) -> dict[str, Any] | None:
    """The checkpoint's metadata if every file matches it, else None (start from scratch)."""
    try:
        meta = json.loads((folder / META).read_text("utf-8"))
        for name, digest in meta["files"].items():
            if _digest((folder / name).read_bytes()) != digest:
                return None
        return meta
    except (OSError, ValueError, KeyError, TypeError):
        return None


def restore(folder: Path, meta: dict[str, Any], algo: type[BaseAlgorithm], venv: Any, **load_kwargs: Any):
    """Load the verified checkpoint: model (with ``venv`` attached), buffer, statistics, RNG."""
    model = algo.load(str(folder / MODEL), env=venv, device="cpu", **load_kwargs)
    if BUFFER in meta["files"]:
        model.replay_buffer = pickle.loads((folder / BUFFER).read_bytes())
    if NORM in meta["files"] and isinstance(venv, VecNormalize):
        norm = json.loads((folder / NORM).read_text("utf-8"))
        _set_rms(venv.obs_rms, norm["obs_rms"])
        _set_rms(venv.ret_rms, norm["ret_rms"])
    rng = pickle.loads((folder / RNG).read_bytes())
    torch.set_rng_state(rng["torch"])
    np.random.set_state(rng["numpy"])
    random.setstate(rng["random"])
    curve = [tuple(r) for r in json.loads((folder / CURVE).read_text("utf-8"))]
    return model, curve


def remove_checkpoint(folder: Path) -> None:
    shutil.rmtree(folder, ignore_errors=True)


class Checkpointer(BaseCallback):
    """Saves a checkpoint every ``every`` env steps (a step counts all envs of the vector)."""

    def __init__(self, folder: Path, every: int, venv: Any, curve: Any, start: int = 0) -> None:
        super().__init__()
        self.folder = folder
        self.every = every
        self.venv = venv
        self.curve = curve
        self._last = start

    def _on_step(self) -> bool:
        if self.num_timesteps - self._last >= self.every:
            self._last = self.num_timesteps
            save_checkpoint(self.folder, self.model, self.venv, self.curve.rows, self.num_timesteps)
        return True
