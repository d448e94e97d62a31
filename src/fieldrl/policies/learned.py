"""Train Stable-Baselines3 models for a scenario entry, save them, and load them back
as :class:`~fieldrl.policies.base.Policy` objects.

Nothing a run folder holds is unpickled: weights are safetensors files loaded into a model
rebuilt from the scenario (:mod:`~fieldrl.policies.weights`), observation normalisation
statistics are plain numbers (JSON), not a pickled ``VecNormalize``.
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

from fieldrl.errors import FieldrlError, short_repr
from fieldrl.files import atomic_write_bytes, read_regular
from fieldrl.policies import checkpoint, fine_tune, memory_guard, weights
from fieldrl.policies.base import Policy
from fieldrl.policies.registry import ALGORITHMS, algorithm_parameters, build_kwargs
from fieldrl.policies.selection import SelectionState, Validation, ValidationSelector, norm_stats
from fieldrl.policies.weights import UpdateCounter

MODEL_FILE = "policy.safetensors"
NORM_FILE = "obs_normalization.json"
CURVE_FILE = "learning_curve.csv"
VALIDATION_FILE = "validation_curve.csv"
#: columns of a learning curve (one row per finished training episode)
CURVE_COLUMNS = ("timesteps", "episode_return", "episode_length")
IMITATION_FILE = "imitation.json"
FINE_TUNE_FILE = "fine_tune.csv"
#: the behaviour clone as cloned, kept in the checkpoint folder for a resumed fine-tuning's pull
CLONE_FILE = "clone.safetensors"


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
        writer.writerow(CURVE_COLUMNS)
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


def build_model(entry: Any, venv: Any, seed: int | None = 0, tensorboard_log: str | None = None) -> Any:
    """A new, untrained model of ``entry`` on ``venv`` (the scenario's algorithm and settings)."""
    kwargs = build_kwargs(entry.hyperparameters, _action_dim(venv.action_space))
    return ALGORITHMS[entry.algorithm](
        entry.policy, venv, seed=seed, verbose=0, device="cpu", tensorboard_log=tensorboard_log, **kwargs
    )


def train_model(
    make_vec_env: Callable[[int, int], Any],
    entry: Any,
    seed: int,
    out_dir: Path,
    tensorboard_dir: Path | None = None,
    report: Callable[[int], None] | None = None,
    checkpoint_dir: Path | None = None,
    demonstrations: Callable[[float], Any] | None = None,
    validation: Validation | None = None,
    prepare: Callable[[Any], None] | None = None,
) -> dict[str, bytes]:
    """Train one model and return its artifacts as ``{file name: bytes}`` (caller writes them).

    :param make_vec_env: ``(n_envs, seed) -> VecEnv`` (residual entries: already wrapped).
    :param entry: the scenario's ``LearnedEntry``.
    :param seed: training seed (network init, exploration, environment stream).
    :param out_dir: folder the model belongs in.
    :param tensorboard_dir: where SB3 writes TensorBoard logs, if anywhere.
    :param report: progress callback receiving env steps done.
    :param checkpoint_dir: where to save a checkpoint every ``entry.checkpoint_interval`` steps;
        if it holds a valid checkpoint, training continues from it instead of starting over.
    :param demonstrations: ``gamma -> Demonstrations`` of the heuristic named in ``entry.imitate``;
        the new model is behaviour-cloned on them before RL training (not when resuming).
    :param validation: evaluate on the validation seeds every ``validation.every`` steps and keep
        the best weights (:mod:`~fieldrl.policies.selection`); None: the final weights are kept.
    :param prepare: called on a newly built model before anything else (e.g. residual zeroing).
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
    tb_log = str(tensorboard_dir) if tensorboard_dir else None
    curve = LearningCurve()
    meta = checkpoint.read_checkpoint(checkpoint_dir) if checkpoint_dir is not None else None
    imitation_stats: bytes | None = None
    selection_state: SelectionState | None = None
    done_updates = 0
    restored = None
    if meta is not None:
        assert checkpoint_dir is not None
        restored = checkpoint.restore_or_none(
            checkpoint_dir, meta, lambda: build_model(entry, venv, seed, tb_log), venv
        )
        meta = meta if restored is not None else None
    if restored is not None:
        assert checkpoint_dir is not None and meta is not None
        model, state = restored
        curve.rows = [tuple(r) for r in state["curve"]]
        done_updates = int(state.get("updates", 0))
        if "selection" in state:
            selection_state = SelectionState.from_json(state["selection"], state["best_weights"])
        done = int(meta["timesteps"])
        kept = checkpoint_dir / IMITATION_FILE
        imitation_stats = read_regular(kept) if kept.exists() else None
    else:
        model = build_model(entry, venv, seed, tb_log)
        if prepare is not None:
            prepare(model)
        done = 0
        if demonstrations is not None and entry.imitate is not None:
            from fieldrl.policies import imitation

            demos = demonstrations(float(kwargs.get("gamma", 0.99)))
            kept_demos = demos.sample(entry.imitate.max_decisions, seed)
            cloned = imitation.clone(
                model,
                venv,
                kept_demos,
                entry.imitate.epochs,
                learning_rate=entry.imitate.learning_rate,
                seed=seed,
            )
            cloned["episodes"] = float(demos.episodes)
            cloned["decisions_seen"] = float(len(demos))
            imitation_stats = json.dumps(cloned, indent=1).encode()
            if checkpoint_dir is not None:  # kept for a resumed run's artifacts
                checkpoint_dir.mkdir(parents=True, exist_ok=True)
                (checkpoint_dir / IMITATION_FILE).write_bytes(imitation_stats)
                if entry.fine_tune is not None and entry.fine_tune.needs_clone:
                    clone_bytes = weights.policy_bytes(model.policy.state_dict(), {"clone": True})
                    (checkpoint_dir / CLONE_FILE).write_bytes(clone_bytes)
    updates = UpdateCounter(model, start=done_updates)
    callbacks: list[BaseCallback] = [curve]
    selector = None
    if validation is not None:
        selector = ValidationSelector(validation, venv, lambda: updates.total, selection_state)
        callbacks.append(selector)
    tuning_log = fine_tune.FineTuneLog()
    undo_fine_tune = _install_fine_tune(
        model, entry, checkpoint_dir, restored is not None, tuning_log, selector
    )
    if report is not None:
        callbacks.append(ProgressReporter(entry.train_steps, report))
    if checkpoint_dir is not None:
        callbacks.append(
            checkpoint.Checkpointer(
                checkpoint_dir,
                entry.checkpoint_interval,
                venv,
                curve,
                start=done,
                updates=updates,
                selector=selector,
                train_seed=seed,
                resumed=restored is not None,
                extra_files=undo_fine_tune.checkpoint_files,
            )
        )
    if restored is not None:
        # Not None, so SB3's _setup_learn keeps its hands off the envs: the Checkpointer starts
        # the episodes the uninterrupted run started at this checkpoint (same seed, same statistics).
        model._last_obs = np.zeros(0)
    if tb_log is None:  # SB3's default logger would leave an empty SB3-<date> folder in /tmp
        model.set_logger(Logger(folder=None, output_formats=[]))
    model.learn(
        total_timesteps=max(entry.train_steps - done, 0),
        callback=CallbackList(callbacks),
        tb_log_name=f"{entry.label}-seed{seed}",
        reset_num_timesteps=meta is None,
        progress_bar=False,
    )
    undo_fine_tune()
    out_dir.mkdir(parents=True, exist_ok=True)
    record: dict[str, Any] = {
        "algorithm": entry.algorithm,
        "num_timesteps": int(model.num_timesteps),
        "gradient_updates": int(updates.total),
        "selected": None,
    }
    state_dict = model.policy.state_dict()
    norm = norm_stats(venv) if entry.normalize_obs else None
    artifacts = {CURVE_FILE: curve.csv_text().encode()}
    if selector is not None and selector.state.best_weights is not None:
        chosen = selector.state
        state_dict, norm = chosen.best_weights, chosen.best_norm if entry.normalize_obs else None
        record["selected"] = {
            "timesteps": chosen.best_step,
            "gradient_updates": chosen.best_updates,
            "value": chosen.best_value,
            "kpi": validation.kpi if validation is not None else "",
        }
        artifacts[VALIDATION_FILE] = chosen.curve_csv().encode()
    if imitation_stats is not None:
        artifacts[IMITATION_FILE] = imitation_stats
    if norm is not None:
        artifacts[NORM_FILE] = json.dumps(norm).encode()
    if entry.fine_tune is not None:
        record["fine_tune"] = {
            **fine_tune.Schedule.of(entry.fine_tune, entry.train_steps).record(),
            "pull_updates": tuning_log.pull_steps,
        }
        artifacts[FINE_TUNE_FILE] = tuning_log.csv_text().encode()
    artifacts[MODEL_FILE] = weights.policy_bytes(state_dict, record)
    venv.close()
    return artifacts


def _install_fine_tune(
    model: Any,
    entry: Any,
    checkpoint_dir: Path | None,
    resumed: bool,
    log: fine_tune.FineTuneLog,
    selector: ValidationSelector | None,
) -> fine_tune.Installed:
    """Apply the entry's ``fine_tune`` to the model about to learn; returns the undo. The clone the pull
    and the jump-start use, and the fine-tuning log, are kept in the checkpoint folder, so that a
    resumed training continues with them."""
    spec = entry.fine_tune
    if spec is None:
        return fine_tune.Installed(lambda: None)
    if checkpoint_dir is not None:  # the log is kept beside the checkpoints, for a resumed training
        kept_log = checkpoint_dir / FINE_TUNE_FILE
        if resumed and kept_log.is_file():
            try:
                log.rows = fine_tune.FineTuneLog.from_csv(
                    read_regular(kept_log).decode(), int(model.num_timesteps)
                ).rows
            except (ValueError, UnicodeDecodeError) as exc:
                raise FieldrlError(
                    f"{kept_log}: not the fine-tuning log fieldrl writes ({exc}); delete the checkpoint "
                    "folder to train this policy again from its start"
                ) from None

        def keep(done: fine_tune.FineTuneLog) -> None:
            checkpoint_dir.mkdir(parents=True, exist_ok=True)
            atomic_write_bytes(kept_log, done.csv_text().encode())

        log.on_row = keep
    teacher = None
    if spec.needs_clone:
        teacher = fine_tune.frozen_copy(model.policy)
        kept = checkpoint_dir / CLONE_FILE if checkpoint_dir is not None else None
        if resumed:
            if kept is None or not kept.is_file():
                raise FieldrlError(
                    f"{checkpoint_dir}: the checkpoint has no {CLONE_FILE} (the clone its fine-tuning uses); "
                    "delete the checkpoint folder to train this policy again from its start"
                )
            teacher.load_state_dict(weights.read_weights(kept), strict=True)
    pull_state = None
    kept_pull = checkpoint_dir / fine_tune.PULL_STATE_FILE if checkpoint_dir is not None else None
    if resumed and kept_pull is not None:
        meta = checkpoint.read_checkpoint(checkpoint_dir)  # every listed file whole, or None
        if meta is not None and fine_tune.PULL_STATE_FILE in meta["files"]:
            pull_state = weights.read_weights(kept_pull)
    schedule = fine_tune.Schedule.of(spec, entry.train_steps)
    return fine_tune.install(model, schedule, teacher, log, selector, pull_state)


def construction_problem(
    make_vec_env: Callable[[int, int], Any], entry: Any, budgets: dict[str, Any] | None = None
) -> tuple[str | None, Any, str] | None:
    """Build (but don't train) the model on a one-env copy of the environment.

    Catches what only SB3 can judge before any output is written: an algorithm that
    does not fit the action space, an unknown policy class, bad hyperparameter values,
    a buffer or network that would not fit in memory (:mod:`~fieldrl.policies.memory_guard`),
    and (:mod:`~fieldrl.policies.feasibility`) a budget under which it could not learn: ``budgets``
    maps a budget name to the entry as that budget runs it.
    Returns ``(hyperparameter or None, value, the problem in words)``, or None.
    """
    from fieldrl.policies.feasibility import training_problem

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
        for budget, applied in (budgets or {"full": entry}).items():
            problem = training_problem(
                applied.algorithm, applied.hyperparameters, applied.n_envs, venv.num_envs, applied.train_steps
            )
            if problem:
                key, value, text = problem
                return key, value, text + ("" if budget == "full" else f" (budget {budget})")
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


def read_obs_normalization(path: Path, obs_shape: tuple[int, ...]) -> dict[str, Any]:
    """The saved observation statistics (see :func:`~fieldrl.policies.selection.norm_stats`), refused
    unless they are what training writes for this model: means and variances of the observation's
    shape, finite, variances not negative, a positive clip and epsilon."""
    try:
        norm = json.loads(read_regular(path).decode("utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise FieldrlError(f"{path}: not readable as JSON ({exc})") from None
    fields = ("mean", "var", "clip_obs", "epsilon")
    if not isinstance(norm, dict) or sorted(norm) != sorted(fields):
        raise FieldrlError(
            f"{path}: not the observation statistics fieldrl writes (fields: {', '.join(fields)})"
        )
    for name in fields:
        try:
            value = np.asarray(norm[name], dtype=np.float64)
        except (TypeError, ValueError):
            value = np.asarray(np.nan)
        expected = obs_shape if name in ("mean", "var") else ()
        if (
            value.shape != expected
            or not np.all(np.isfinite(value))
            or (name != "mean" and np.any(value < 0))
        ):
            raise FieldrlError(
                f"{path}: {name} = {short_repr(norm[name])}: expected finite numbers of shape {expected} "
                "(variances, clip and epsilon not negative); not what training writes"
            )
    if norm["clip_obs"] <= 0 or norm["epsilon"] <= 0:
        raise FieldrlError(f"{path}: clip_obs and epsilon must be positive; not what training writes")
    return norm


class SB3Policy(Policy):
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


def load_policy(
    name: str,
    entry: Any,
    make_vec_env: Callable[[int, int], Any],
    weights_path: Path,
    norm_path: Path | None,
    wrap: Callable[[Any], Any] | None = None,
) -> Any:
    """Rebuild ``entry``'s model on one env of ``make_vec_env`` and load its weights file into it.

    Nothing in the files is executed: the weights are tensors, the statistics JSON (see
    :mod:`~fieldrl.policies.weights`). ``wrap`` turns the loaded SB3 policy into the policy that
    is evaluated (a residual policy adds the heuristic's action).
    """
    torch.set_num_threads(1)
    venv = make_vec_env(1, 0)
    try:
        with warnings.catch_warnings():
            # SB3's batch-size advice is about training on this one env; the model only predicts here
            warnings.simplefilter("ignore", UserWarning)
            model = build_model(entry, venv, seed=0)
    finally:
        venv.close()
    weights.load_into(model, weights.read_weights(weights_path), str(weights_path))
    norm = read_obs_normalization(norm_path, model.observation_space.shape) if norm_path is not None else None
    policy = SB3Policy(name, model, norm)
    return wrap(policy) if wrap is not None else policy
