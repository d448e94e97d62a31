"""Resumable training: periodic checkpoints of everything a training run needs to continue.

A checkpoint is a folder holding, with nothing pickled:

* ``state.pt``: the model's networks and optimisers (SB3's ``_get_torch_save_params``: state
  dicts and tensors) and torch's RNG state, read back with ``torch.load(weights_only=True)``,
  which refuses anything but tensors and plain containers;
* ``replay_buffer.npz`` where the algorithm has one: its arrays, read with ``allow_pickle=False``;
* ``state.json``: step and update counts, numpy's and Python's RNG states, the
  normalisation statistics, the learning curve and the validation-selection record;
* ``best.safetensors``: the best validation checkpoint's weights, if any;
* ``checkpoint.json`` (written last, atomically) with the step count and the SHA-256 of every
  other file. The hashes only detect a torn write (a kill during a save: training then restarts
  from scratch); they vouch for nothing, and nothing read here can run code.

The model is rebuilt from the scenario entry (``rebuild``) before the saved tensors are copied
in. Resumed training continues the same model, buffer and statistics; it is not bit-identical
to an uninterrupted run (the environments restart their episodes at the checkpoint).
"""

from __future__ import annotations

import hashlib
import io
import json
import pickle  # only for its error type: nothing here is unpickled
import random
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.vec_env import VecNormalize

from fieldrl.evaluation.store import atomic_write_bytes
from fieldrl.policies import weights

META = "checkpoint.json"
STATE = "state.pt"
STATE_JSON = "state.json"
BUFFER = "replay_buffer.npz"
BEST = "best.safetensors"

#: plain counters SB3 keeps on the algorithm object (restored when present)
_SCALARS = ("num_timesteps", "_n_updates", "_episode_num", "_current_progress_remaining", "exploration_rate")


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _rms_state(rms: Any) -> dict[str, Any]:
    return {"mean": np.asarray(rms.mean).tolist(), "var": np.asarray(rms.var).tolist(), "count": rms.count}


def _set_rms(rms: Any, state: dict[str, Any]) -> None:
    rms.mean = np.asarray(state["mean"], dtype=np.float64)
    rms.var = np.asarray(state["var"], dtype=np.float64)
    rms.count = float(state["count"])


def _attr(obj: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        obj = getattr(obj, part)
    return obj


def _torch_state(model: Any) -> dict[str, Any]:
    state_dicts, variables = model._get_torch_save_params()
    return {
        "state_dicts": {name: _attr(model, name).state_dict() for name in state_dicts},
        "variables": {name: _attr(model, name).detach().clone() for name in variables or []},
        "torch_rng": torch.get_rng_state(),
    }


def _buffer_arrays(buffer: Any) -> dict[str, np.ndarray]:
    """Every array of an SB3 replay buffer (dict observations as ``name/key``) and its position."""
    arrays: dict[str, np.ndarray] = {"pos": np.asarray(buffer.pos), "full": np.asarray(buffer.full)}
    for name, value in vars(buffer).items():
        if isinstance(value, np.ndarray):
            arrays[name] = value
        elif isinstance(value, dict) and value and all(isinstance(v, np.ndarray) for v in value.values()):
            arrays.update({f"{name}/{k}": v for k, v in value.items()})
    return arrays


def _restore_buffer(buffer: Any, data: Any) -> None:
    for key in data.files:
        value = data[key]
        if key in ("pos", "full"):
            setattr(buffer, key, value.item())
        elif "/" in key:
            name, sub = key.split("/", 1)
            getattr(buffer, name)[sub] = value
        else:
            setattr(buffer, key, value)


def save_checkpoint(
    folder: Path,
    model: Any,
    venv: Any,
    curve_rows: list[Any],
    timesteps: int,
    updates: int = 0,
    selection: Any = None,
) -> None:
    """Write a complete checkpoint of ``model`` at ``timesteps`` into ``folder``."""
    files: dict[str, bytes] = {}
    buffer = io.BytesIO()
    torch.save(_torch_state(model), buffer)
    files[STATE] = buffer.getvalue()
    if getattr(model, "replay_buffer", None) is not None:
        arrays = io.BytesIO()
        np.savez(arrays, **_buffer_arrays(model.replay_buffer))
        files[BUFFER] = arrays.getvalue()
    np_state = np.random.get_state()
    state: dict[str, Any] = {
        "scalars": {
            k: getattr(model, k) for k in _SCALARS if isinstance(getattr(model, k, None), int | float)
        },
        "updates": int(updates),
        "numpy_rng": [np_state[0], np.asarray(np_state[1]).tolist(), *map(float, np_state[2:])],
        "random_rng": [random.getstate()[0], list(random.getstate()[1]), random.getstate()[2]],
        "curve": [list(r) for r in curve_rows],
    }
    if isinstance(venv, VecNormalize):
        state["normalization"] = {"obs_rms": _rms_state(venv.obs_rms), "ret_rms": _rms_state(venv.ret_rms)}
    if selection is not None:
        state["selection"] = selection.as_json()
        if selection.best_weights is not None:
            files[BEST] = weights.policy_bytes(selection.best_weights, {})
    files[STATE_JSON] = json.dumps(state).encode()
    for name, data in files.items():
        atomic_write_bytes(folder / name, data)
    meta = {"timesteps": int(timesteps), "files": {name: _digest(d) for name, d in files.items()}}
    atomic_write_bytes(folder / META, json.dumps(meta, indent=2).encode())


def read_checkpoint(folder: Path) -> dict[str, Any] | None:
    """The checkpoint's metadata if every file is whole, else None (start from scratch)."""
    try:
        meta = json.loads((folder / META).read_text("utf-8"))
        if not {STATE, STATE_JSON} <= set(meta["files"]):
            return None  # a checkpoint of an older fieldrl (pickles): never read, start over
        for name, digest in meta["files"].items():
            if _digest((folder / name).read_bytes()) != digest:
                return None
        return meta
    except (OSError, ValueError, KeyError, TypeError):
        return None


def restore(
    folder: Path, meta: dict[str, Any], build: Callable[[], Any], venv: Any
) -> tuple[Any, dict[str, Any]]:
    """Rebuild the model with ``build()`` and load the checkpoint's tensors and counters into it.

    Returns the model and the JSON state (``curve``, ``updates``, ``selection``); the selection's
    best weights, if any, are in ``state["best_weights"]``.
    """
    model = build()
    saved = torch.load(io.BytesIO((folder / STATE).read_bytes()), weights_only=True)
    model.set_parameters(saved["state_dicts"], exact_match=True, device="cpu")
    for name, tensor in saved["variables"].items():
        _attr(model, name).data.copy_(tensor)
    torch.set_rng_state(saved["torch_rng"])
    if BUFFER in meta["files"] and getattr(model, "replay_buffer", None) is not None:
        with np.load(folder / BUFFER, allow_pickle=False) as data:
            _restore_buffer(model.replay_buffer, data)
    state = json.loads((folder / STATE_JSON).read_text("utf-8"))
    for key, value in state["scalars"].items():
        setattr(model, key, value)
    name, keys, pos, has_gauss, cached = state["numpy_rng"]
    np.random.set_state((name, np.asarray(keys, dtype=np.uint32), int(pos), int(has_gauss), float(cached)))
    version, internal, gauss = state["random_rng"]
    random.setstate((version, tuple(internal), gauss))
    if "normalization" in state and isinstance(venv, VecNormalize):
        _set_rms(venv.obs_rms, state["normalization"]["obs_rms"])
        _set_rms(venv.ret_rms, state["normalization"]["ret_rms"])
    state["best_weights"] = weights.read_weights(folder / BEST) if BEST in meta["files"] else None
    return model, state


def restore_or_none(
    folder: Path, meta: dict[str, Any], build: Callable[[], Any], venv: Any
) -> tuple[Any, dict[str, Any]] | None:
    """:func:`restore`, or None (train from scratch) when the files are not what fieldrl writes.

    ``torch.load(weights_only=True)`` and ``np.load(allow_pickle=False)`` refuse pickled objects,
    so a planted file raises here instead of running; tensors of the wrong shapes fail to load.
    """
    try:
        return restore(folder, meta, build, venv)
    except (pickle.UnpicklingError, OSError, ValueError, KeyError, TypeError, RuntimeError):
        return None


def remove_checkpoint(folder: Path) -> None:
    shutil.rmtree(folder, ignore_errors=True)


class Checkpointer(BaseCallback):
    """Saves a checkpoint every ``every`` env steps (a step counts all envs of the vector)."""

    def __init__(
        self,
        folder: Path,
        every: int,
        venv: Any,
        curve: Any,
        start: int = 0,
        updates: Any = None,
        selector: Any = None,
    ) -> None:
        super().__init__()
        self.folder = folder
        self.every = every
        self.venv = venv
        self.curve = curve
        self.updates = updates
        self.selector = selector
        self._last = start

    def _on_step(self) -> bool:
        if self.num_timesteps - self._last >= self.every:
            self._last = self.num_timesteps
            save_checkpoint(
                self.folder,
                self.model,
                self.venv,
                self.curve.rows,
                self.num_timesteps,
                updates=self.updates.total if self.updates is not None else 0,
                selection=self.selector.snapshot() if self.selector is not None else None,
            )
        return True
