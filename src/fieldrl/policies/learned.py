"""Train Stable-Baselines3 models for a scenario entry, save them, and load them back
as :class:`~fieldrl.policies.base.Policy` objects.

Observation normalisation statistics are saved as plain numbers (JSON), not as a
pickled ``VecNormalize``, so the only pickle-bearing file is the SB3 zip, and that
one is loaded only after its SHA-256 matches the run manifest.
"""

from __future__ import annotations

import csv
import inspect
import io
import json
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from stable_baselines3.common.callbacks import BaseCallback, CallbackList
from stable_baselines3.common.logger import Logger
from stable_baselines3.common.vec_env import VecMonitor, VecNormalize

from fieldrl.policies import checkpoint, memory_guard
from fieldrl.policies.registry import ALGORITHMS, algorithm_parameters, build_kwargs

MODEL_FILE = "model.zip"
NORM_FILE = "obs_normalization.json"
CURVE_FILE = "learning_curve.csv"
IMITATION_FILE = "imitation.json"


class LearningCurve(BaseCallback):
    """Records every finished training episode (env steps so far, return, length)."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[tuple[int, float, int]] = []

    def _on_step(self) -> bool:
        for info in self.locals.get("infos", []):
            episode = info.get("episode")
            if episode is not None:
                self.rows.append((self.num_timesteps, float(episode["r"]), int(episode["l"])))
        return True

    def csv_text(self) -> str:
        out = io.StringIO()
        writer = csv.writer(out)
        writer.writerow(["timesteps", "episode_return", "episode_length"])
        writer.writerows(self.rows)
        return out.getvalue()


class ProgressReporter(BaseCallback):
    """Calls ``report(steps_done)`` about a hundred times over training."""

    def __init__(self, total: int, report: Callable[[int], None]) -> None:
        super().__init__()
        self.every = max(1, total // 100)
        self.report = report
        self._last = 0

    def _on_step(self) -> bool:
        if self.num_timesteps - self._last >= self.every:
            self._last = self.num_timesteps
            self.report(self.num_timesteps)
        return True


def train_model(
    make_vec_env: Callable[[int, int], Any],
    entry: Any,
    seed: int,
    out_dir: Path,
    tensorboard_dir: Path | None = None,
    report: Callable[[int], None] | None = None,
    checkpoint_dir: Path | None = None,
    demonstrations: Callable[[float], Any] | None = None,
) -> dict[str, bytes]:
    """Train one model and return its artifacts as ``{file name: bytes}`` (caller writes them).

    :param make_vec_env: ``(n_envs, seed) -> VecEnv``.
    :param entry: the scenario's ``LearnedEntry``.
    :param seed: training seed (network init, exploration, environment stream).
    :param out_dir: folder the model belongs in (used for the temp save only).
    :param tensorboard_dir: where SB3 writes TensorBoard logs, if anywhere.
    :param report: progress callback receiving env steps done.
    :param checkpoint_dir: where to save a checkpoint every ``entry.checkpoint_interval`` steps;
        if it holds a valid checkpoint, training continues from it instead of starting over.
    :param demonstrations: ``gamma -> Demonstrations`` of the heuristic named in ``entry.imitate``;
        the new model is behaviour-cloned on them before RL training (not when resuming).
    """
    torch.set_num_threads(1)
    venv = VecMonitor(make_vec_env(entry.n_envs, seed))
    kwargs = build_kwargs(entry.hyperparameters, _action_dim(venv.action_space))
    normalized = entry.normalize_obs or entry.normalize_reward
    if normalized:
        venv = VecNormalize(
            venv,
            norm_obs=entry.normalize_obs,
            norm_reward=entry.normalize_reward,
            gamma=float(kwargs.get("gamma", 0.99)),
        )
    algo = ALGORITHMS[entry.algorithm]
    tb_log = str(tensorboard_dir) if tensorboard_dir else None
    curve = LearningCurve()
    meta = checkpoint.read_checkpoint(checkpoint_dir) if checkpoint_dir is not None else None
    imitation_stats: bytes | None = None
    if meta is not None:
        model, curve.rows = checkpoint.restore(checkpoint_dir, meta, algo, venv, tensorboard_log=tb_log)
        done = int(meta["timesteps"])
        kept = checkpoint_dir / IMITATION_FILE
        imitation_stats = kept.read_bytes() if kept.is_file() else None
    else:
        model = algo(entry.policy, venv, seed=seed, verbose=0, device="cpu", tensorboard_log=tb_log, **kwargs)
        done = 0
        if demonstrations is not None and entry.imitate is not None:
            from fieldrl.policies import imitation

            demos = demonstrations(float(kwargs.get("gamma", 0.99)))
            kept = demos.sample(entry.imitate.max_decisions, seed)
            cloned = imitation.clone(model, venv, kept, entry.imitate.epochs, seed=seed)
            cloned["episodes"] = float(demos.episodes)
            cloned["decisions_seen"] = float(len(demos))
            imitation_stats = json.dumps(cloned, indent=1).encode()
            if checkpoint_dir is not None:  # kept for a resumed run's artifacts
                checkpoint_dir.mkdir(parents=True, exist_ok=True)
                (checkpoint_dir / IMITATION_FILE).write_bytes(imitation_stats)
    callbacks: list[BaseCallback] = [curve]
    if report is not None:
        callbacks.append(ProgressReporter(entry.train_steps, report))
    if checkpoint_dir is not None:
        callbacks.append(
            checkpoint.Checkpointer(checkpoint_dir, entry.checkpoint_interval, venv, curve, start=done)
        )
    if tb_log is None:  # SB3's default logger would leave an empty SB3-<date> folder in /tmp
        model.set_logger(Logger(folder=None, output_formats=[]))
    model.learn(
        total_timesteps=max(entry.train_steps - done, 0),
        callback=CallbackList(callbacks),
        tb_log_name=f"{entry.label}-seed{seed}",
        reset_num_timesteps=meta is None,
        progress_bar=False,
    )
    out_dir.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    model.save(buffer)
    artifacts = {MODEL_FILE: buffer.getvalue(), CURVE_FILE: curve.csv_text().encode()}
    if imitation_stats is not None:
        artifacts[IMITATION_FILE] = imitation_stats
    if isinstance(venv, VecNormalize) and entry.normalize_obs:
        rms = venv.obs_rms
        stats = {
            "mean": np.asarray(rms.mean).tolist(),
            "var": np.asarray(rms.var).tolist(),
            "clip_obs": venv.clip_obs,
            "epsilon": venv.epsilon,
        }
        artifacts[NORM_FILE] = json.dumps(stats).encode()
    venv.close()
    return artifacts


def construction_problem(
    make_vec_env: Callable[[int, int], Any], entry: Any
) -> tuple[str | None, Any, str] | None:
    """Build (but don't train) the model on a one-env copy of the environment.

    Catches what only SB3 can judge before any output is written: an algorithm that
    does not fit the action space, an unknown policy class, bad hyperparameter values,
    a buffer or network that would not fit in memory (:mod:`~fieldrl.policies.memory_guard`).
    Returns ``(hyperparameter or None, value, the problem in words)``, or None.
    """
    torch.set_num_threads(1)
    venv = make_vec_env(1, 0)
    try:
        kwargs = build_kwargs(entry.hyperparameters, _action_dim(venv.action_space))
        too_big = memory_guard.buffer_problem(venv, entry.n_envs, kwargs)
        if too_big:
            return too_big
        if "buffer_size" in algorithm_parameters(entry.algorithm):
            kwargs.setdefault("buffer_size", 1)  # don't allocate a million-transition buffer to check
        with warnings.catch_warnings(), memory_guard.address_space_capped():
            warnings.simplefilter("ignore")  # e.g. batch-size advice that only holds for n_envs=1
            ALGORITHMS[entry.algorithm](entry.policy, venv, verbose=0, device="cpu", **kwargs)
    except Exception as exc:  # SB3 raises many kinds; all mean "this entry cannot train here"
        text = " ".join(str(exc).split()) or type(exc).__name__
        if isinstance(exc, MemoryError) or "alloc" in text.lower():
            detail = text.partition("DefaultCPUAllocator: ")[2] or text  # drop torch's C++ assert
            text = f"needs more memory than half of what this machine has free ({detail})"
        return None, None, f"{entry.algorithm} cannot be built with these settings: {text}"
    finally:
        venv.close()
    return None


def _action_dim(space: spaces.Space) -> int | None:
    return int(np.prod(space.shape)) if isinstance(space, spaces.Box) else None


def normalize_obs(obs: np.ndarray, norm: dict[str, Any] | None) -> np.ndarray:
    """What ``VecNormalize.normalize_obs`` did in training, from the saved statistics."""
    if norm is None:
        return obs
    mean, var, clip = np.asarray(norm["mean"]), np.asarray(norm["var"]), norm["clip_obs"]
    return np.clip((obs - mean) / np.sqrt(var + norm["epsilon"]), -clip, clip).astype(np.float32)


class SB3Policy:
    """A trained SB3 model behind the batched Policy protocol.

    LSTM state is carried for recurrent models. For multi-agent domains (observations
    ``(n_episodes, n_slots, *obs_shape)``) the shared network acts on every slot at once;
    masked algorithms read the bound envs' ``action_masks()``.
    """

    def __init__(self, name: str, model: Any, norm: dict[str, Any] | None = None):
        self.name = name
        self.model = model
        self.norm = norm
        self.recurrent = hasattr(model.policy, "lstm_actor") or getattr(model, "is_recurrent", False)
        self.masked = "action_masks" in inspect.signature(model.predict).parameters
        self._obs_ndim = len(model.observation_space.shape)
        self._state: Any = None
        self._envs: Any = None

    def reset(self, n_envs: int) -> None:
        self._state = None

    def bind_envs(self, envs: Any) -> None:
        self._envs = envs

    def act(self, obs: np.ndarray, episode_start: np.ndarray) -> np.ndarray:
        obs = np.asarray(obs)
        lead = obs.shape[: obs.ndim - self._obs_ndim]
        flat = normalize_obs(obs.reshape(-1, *obs.shape[len(lead) :]), self.norm)
        kwargs: dict[str, Any] = {"deterministic": True}
        if self.masked and self._envs is not None and hasattr(self._envs, "action_masks"):
            masks = np.asarray(self._envs.action_masks())
            kwargs["action_masks"] = masks.reshape(flat.shape[0], -1)
        if self.recurrent:
            if len(lead) > 1:
                episode_start = np.repeat(episode_start, int(np.prod(lead[1:])))
            actions, self._state = self.model.predict(
                flat, state=self._state, episode_start=episode_start, **kwargs
            )
        else:
            actions, _ = self.model.predict(flat, **kwargs)
        return np.asarray(actions).reshape(*lead, *np.asarray(actions).shape[1:])


def load_policy(name: str, algorithm: str, model_path: Path, norm_path: Path | None) -> SB3Policy:
    """Load a model the caller has already verified against the run manifest."""
    torch.set_num_threads(1)
    model = ALGORITHMS[algorithm].load(str(model_path), device="cpu")
    norm = json.loads(norm_path.read_text()) if norm_path is not None else None
    return SB3Policy(name, model, norm)
