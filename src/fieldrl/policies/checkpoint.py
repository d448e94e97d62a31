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
in.

Checkpoints are taken only for entries with ``checkpoint_every`` (see below for why); without,
an interrupted training restarts from its beginning, which gives the same model.

**Resume is the same run.** A checkpoint is taken where SB3 starts collecting a rollout (the
previous rollout trained, PPO's rollout buffer empty). Environment state in the middle of an
episode cannot be saved for every simulator (SUMO, Flatland), so at each checkpoint the training
environments start new episodes from a seed derived from the training seed and the step count
(:func:`restart_seed`) -- in the uninterrupted run as in the resumed one. With the networks,
optimisers, every RNG (torch, numpy, Python, the action space's), the replay buffer, the
normalisation statistics and SB3's counters restored, a resumed training continues bit for bit
as the uninterrupted one would have (tested: same ``results.parquet``). The episodes cut at a
checkpoint are bootstrapped like time-limit truncations. (gSDE exploration is the exception:
SB3 resamples its noise before a checkpoint can be taken; no shipped scenario uses it.)
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

from fieldrl.errors import FieldrlError
from fieldrl.files import atomic_write_bytes, read_regular
from fieldrl.policies import weights

META = "checkpoint.json"
STATE = "state.pt"
STATE_JSON = "state.json"
BUFFER = "replay_buffer.npz"
BEST = "best.safetensors"

#: plain counters SB3 keeps on the algorithm object (restored when present)
_SCALARS = (
    "num_timesteps",
    "_n_updates",
    "_n_calls",
    "_episode_num",
    "_current_progress_remaining",
    "exploration_rate",
)


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
    """Every array of an SB3 replay buffer (dict observations as ``name/key``) and its position.

    Until the buffer is full only its filled rows are kept: a 1e6-transition buffer early in
    training is mostly zeros, and it is written at every checkpoint.
    """
    arrays: dict[str, np.ndarray] = {"pos": np.asarray(buffer.pos), "full": np.asarray(buffer.full)}
    filled = None if buffer.full else int(buffer.pos)

    def kept(value: np.ndarray) -> np.ndarray:
        if filled is not None and value.ndim >= 1 and value.shape[0] == buffer.buffer_size:
            return value[:filled]
        return value

    for name, value in vars(buffer).items():
        if isinstance(value, np.ndarray):
            arrays[name] = kept(value)
        elif isinstance(value, dict) and value and all(isinstance(v, np.ndarray) for v in value.values()):
            arrays.update({f"{name}/{k}": kept(v) for k, v in value.items()})
    return arrays


def _restored(live: np.ndarray | None, saved: np.ndarray) -> np.ndarray:
    """``saved`` as the buffer's array: a filled prefix is copied into the live (empty) array."""
    if live is None or live.shape == saved.shape:
        return saved
    if saved.ndim != live.ndim or saved.shape[1:] != live.shape[1:] or saved.shape[0] > live.shape[0]:
        raise ValueError(f"replay buffer array of shape {saved.shape} does not fit {live.shape}")
    live[: saved.shape[0]] = saved
    return live


def _restore_buffer(buffer: Any, data: Any) -> None:
    for key in data.files:
        value = data[key]
        if key in ("pos", "full"):
            setattr(buffer, key, value.item())
        elif "/" in key:
            name, sub = key.split("/", 1)
            part = getattr(buffer, name)
            part[sub] = _restored(part.get(sub), value)
        else:
            setattr(buffer, key, _restored(getattr(buffer, key, None), value))


def _space_rng(space: Any) -> dict[str, Any] | None:
    """The action space's generator state (plain ints), which draws SB3's random warm-up actions."""
    generator = getattr(space, "_np_random", None)
    return None if generator is None else generator.bit_generator.state


def save_checkpoint(
    folder: Path,
    model: Any,
    venv: Any,
    curve_rows: list[Any],
    timesteps: int,
    updates: int = 0,
    selection: Any = None,
    extra_files: dict[str, bytes] | None = None,
) -> None:
    """Write a complete checkpoint of ``model`` at ``timesteps`` into ``folder`` (with ``extra_files``:
    state a training aid keeps, e.g. the fine-tuning pull's optimiser, as safetensors)."""
    files: dict[str, bytes] = dict(extra_files or {})
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
        "action_space_rng": _space_rng(model.action_space),
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
        meta = json.loads(read_regular(folder / META).decode("utf-8"))
        if not {STATE, STATE_JSON} <= set(meta["files"]):
            return None  # a checkpoint of an older fieldrl (pickles): never read, start over
        for name, digest in meta["files"].items():
            if _digest(read_regular(folder / name)) != digest:
                return None
        return meta
    except (OSError, ValueError, KeyError, TypeError, FieldrlError):  # a FIFO or link: not a checkpoint
        return None


def restore(
    folder: Path, meta: dict[str, Any], build: Callable[[], Any], venv: Any
) -> tuple[Any, dict[str, Any]]:
    """Rebuild the model with ``build()`` and load the checkpoint's tensors and counters into it.

    Returns the model and the JSON state (``curve``, ``updates``, ``selection``); the selection's
    best weights, if any, are in ``state["best_weights"]``.
    """
    model = build()
    saved = torch.load(io.BytesIO(read_regular(folder / STATE)), weights_only=True)
    model.set_parameters(saved["state_dicts"], exact_match=True, device="cpu")
    for name, tensor in saved["variables"].items():
        _attr(model, name).data.copy_(tensor)
    torch.set_rng_state(saved["torch_rng"])
    if BUFFER in meta["files"] and getattr(model, "replay_buffer", None) is not None:
        with np.load(folder / BUFFER, allow_pickle=False) as data:
            _restore_buffer(model.replay_buffer, data)
    state = json.loads(read_regular(folder / STATE_JSON).decode("utf-8"))
    for key, value in state["scalars"].items():
        setattr(model, key, value)
    name, keys, pos, has_gauss, cached = state["numpy_rng"]
    np.random.set_state((name, np.asarray(keys, dtype=np.uint32), int(pos), int(has_gauss), float(cached)))
    version, internal, gauss = state["random_rng"]
    random.setstate((version, tuple(internal), gauss))
    if state.get("action_space_rng") is not None:  # random actions before learning_starts
        model.action_space.np_random.bit_generator.state = state["action_space_rng"]
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


def restart_seed(train_seed: int, timesteps: int) -> int:
    """Seed of the episodes the training envs start at the checkpoint taken at ``timesteps``.

    Derived from both numbers (so no two checkpoints or training seeds share one) and below
    2**31, which every simulator accepts (SUMO takes a C int).
    """
    return int(np.random.SeedSequence([int(train_seed), int(timesteps)]).generate_state(1)[0] >> 1)


def restart_episodes(model: Any, seed: int) -> None:
    """Start new episodes in every training env from ``seed`` and point SB3's rollout state at them.

    What SB3's ``_setup_learn`` does on a first ``learn``; the cut episodes are left as they
    are (PPO bootstrapped their last value already; off-policy transitions stay not-done).
    """
    env = model.get_env()
    env.seed(seed)
    model._last_obs = env.reset()
    model._last_episode_starts = np.ones((env.num_envs,), dtype=bool)
    normalizer = model.get_vec_normalize_env()
    if normalizer is not None:
        model._last_original_obs = normalizer.get_original_obs()
    if getattr(model, "action_noise", None) is not None:
        model.action_noise.reset()
    lstm_states = getattr(model, "_last_lstm_states", None)
    if lstm_states is not None:  # RecurrentPPO: episode starts mask them anyway; zeroed to be plain
        for part in (lstm_states.pi, lstm_states.vf):
            for tensor in part:
                tensor.zero_()
    if hasattr(model, "episodes_restarted"):  # e.g. LSTM-TD3's history windows
        model.episodes_restarted()


class Checkpointer(BaseCallback):
    """Saves a checkpoint every ``every`` env steps, where a rollout starts, then restarts episodes.

    :param train_seed: the training seed (the restarted episodes' seeds derive from it).
    :param resumed: training continues from a checkpoint taken at ``start``: the first rollout
        starts the same episodes the uninterrupted run started there.
    """

    def __init__(
        self,
        folder: Path,
        every: int,
        venv: Any,
        curve: Any,
        start: int = 0,
        updates: Any = None,
        selector: Any = None,
        train_seed: int = 0,
        resumed: bool = False,
        extra_files: Callable[[], dict[str, bytes]] | None = None,
    ) -> None:
        super().__init__()
        self.extra_files = extra_files
        self.folder = folder
        self.every = every
        self.venv = venv
        self.curve = curve
        self.updates = updates
        self.selector = selector
        self.train_seed = train_seed
        self._last = start
        self._restart_pending = resumed

    def _on_rollout_start(self) -> None:
        if self._restart_pending:
            self._restart_pending = False
            restart_episodes(self.model, restart_seed(self.train_seed, self.num_timesteps))
            return
        if self.num_timesteps - self._last < self.every:
            return
        self._last = self.num_timesteps
        save_checkpoint(
            self.folder,
            self.model,
            self.venv,
            self.curve.rows,
            self.num_timesteps,
            updates=self.updates.total if self.updates is not None else 0,
            selection=self.selector.snapshot() if self.selector is not None else None,
            extra_files=self.extra_files() if self.extra_files is not None else None,
        )
        restart_episodes(self.model, restart_seed(self.train_seed, self.num_timesteps))

    def _on_step(self) -> bool:
        return True
