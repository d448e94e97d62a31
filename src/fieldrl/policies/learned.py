"""Train Stable-Baselines3 models for a :class:`~fieldrl.policies.spec.TrainingSpec`, save them, and
load them back as :class:`~fieldrl.policies.base.Policy` objects.

Nothing a run folder holds is unpickled: weights are safetensors files loaded into a model
rebuilt from the training spec (:mod:`~fieldrl.policies.weights`), observation normalisation
statistics are plain numbers (JSON), not a pickled ``VecNormalize``.
"""

from __future__ import annotations

import csv
import inspect
import io
import json
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
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
from fieldrl.policies.spec import TrainingSpec, WarmStart
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


def build_model(
    spec: TrainingSpec, venv: Any, seed: int | None = 0, tensorboard_log: str | None = None
) -> Any:
    """A new, untrained model of ``spec`` on ``venv`` (its algorithm, policy class and hyperparameters)."""
    kwargs = build_kwargs(spec.hyperparameters, _action_dim(venv.action_space))
    return ALGORITHMS[spec.algorithm](
        spec.policy, venv, seed=seed, verbose=0, device="cpu", tensorboard_log=tensorboard_log, **kwargs
    )


def train_model(
    make_vec_env: Callable[[int, int], Any],
    spec: TrainingSpec,
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

    The steps, each a function below (as SB3's ``learn`` is ``_setup_learn``, then collection and
    training): the training env (:func:`_training_env`); the model, restored from a checkpoint
    (:func:`_resume`) or new and warm-started (:func:`_new_model`, :func:`_warm_start`); fine-tuning
    (:func:`_install_fine_tune`) and the callbacks (:func:`_callbacks`); learning (:func:`_learn`);
    the weights kept, the best on validation or the last (:func:`_kept_weights`); the artifacts
    (:func:`_artifacts`).

    :param make_vec_env: ``(n_envs, seed) -> VecEnv`` (residual entries: already wrapped).
    :param spec: what to train (the scenario's ``LearnedEntry.training_spec()``).
    :param seed: training seed (network init, exploration, environment stream).
    :param out_dir: folder the model belongs in.
    :param tensorboard_dir: where SB3 writes TensorBoard logs, if anywhere.
    :param report: progress callback receiving env steps done.
    :param checkpoint_dir: where to save a checkpoint every ``spec.checkpoint_interval`` steps;
        if it holds a valid checkpoint, training continues from it instead of starting over.
    :param demonstrations: ``gamma -> Demonstrations`` of the heuristic the scenario's ``imitate``
        names; with ``spec.imitate``, a new model is behaviour-cloned on them before RL training
        (not a resumed one).
    :param validation: evaluate on the validation seeds every ``validation.every`` steps and keep
        the best weights (:mod:`~fieldrl.policies.selection`); None: the final weights are kept.
    :param prepare: called on a newly built model before anything else (e.g. residual zeroing).
    """
    torch.set_num_threads(1)
    venv = _training_env(make_vec_env, spec, seed)
    tb_log = str(tensorboard_dir) if tensorboard_dir else None
    start = _resume(spec, venv, seed, tb_log, checkpoint_dir)
    if start is None:
        start = _new_model(spec, venv, seed, tb_log, prepare)
        if demonstrations is not None and spec.imitate is not None:
            start.imitation_stats = _warm_start(
                start.model, venv, spec, spec.imitate, seed, demonstrations, checkpoint_dir
            )
    updates = UpdateCounter(start.model, start=start.updates)
    selector = None
    if validation is not None:
        selector = ValidationSelector(validation, venv, lambda: updates.total, start.selection)
    tuning_log = fine_tune.FineTuneLog()
    undo_fine_tune = _install_fine_tune(
        start.model, spec, checkpoint_dir, start.resumed, tuning_log, selector
    )
    callbacks = _callbacks(
        spec, venv, seed, start, updates, selector, report, checkpoint_dir, undo_fine_tune.checkpoint_files
    )
    _learn(start, spec, seed, callbacks, tb_log)
    undo_fine_tune()
    out_dir.mkdir(parents=True, exist_ok=True)
    kept = _kept_weights(start.model, venv, spec, selector, validation)
    artifacts = _artifacts(spec, start, updates, kept, tuning_log)
    venv.close()
    return artifacts


@dataclass
class _Start:
    """Where a training starts: a new model (perhaps warm-started) or one restored from a checkpoint,
    with what the restored training had done so far."""

    model: Any
    curve: LearningCurve = field(default_factory=LearningCurve)
    #: env steps and gradient updates already made
    done: int = 0
    updates: int = 0
    selection: SelectionState | None = None
    #: the warm start's statistics (``imitation.json``), if there was one
    imitation_stats: bytes | None = None
    resumed: bool = False


@dataclass(frozen=True)
class _Kept:
    """The weights a training keeps: the best on validation, or the last."""

    state_dict: dict[str, Any]
    norm: dict[str, Any] | None
    #: the validation checkpoint chosen (the record's ``selected``), None: the last weights
    selected: dict[str, Any] | None = None
    validation_csv: str | None = None


def _gamma(spec: TrainingSpec, venv: Any) -> float:
    """The discount the algorithm trains with (reward normalisation and demonstrations' returns use it)."""
    return float(build_kwargs(spec.hyperparameters, _action_dim(venv.action_space)).get("gamma", 0.99))


def _training_env(make_vec_env: Callable[[int, int], Any], spec: TrainingSpec, seed: int) -> Any:
    """``spec.n_envs`` training envs, episodes recorded (``VecMonitor``), normalised where ``spec`` asks."""
    venv = VecMonitor(make_vec_env(spec.n_envs, seed))
    if spec.normalized:
        venv = VecNormalize(
            venv,
            norm_obs=spec.normalize_obs,
            norm_reward=spec.normalize_reward,
            gamma=_gamma(spec, venv),
        )
    return venv


def _resume(
    spec: TrainingSpec, venv: Any, seed: int, tb_log: str | None, checkpoint_dir: Path | None
) -> _Start | None:
    """The training kept in ``checkpoint_dir``, restored into a rebuilt model; None: start anew (no
    folder, no checkpoint, or files that are not what fieldrl writes)."""
    meta = checkpoint.read_checkpoint(checkpoint_dir) if checkpoint_dir is not None else None
    if meta is None:
        return None
    assert checkpoint_dir is not None
    restored = checkpoint.restore_or_none(
        checkpoint_dir, meta, lambda: build_model(spec, venv, seed, tb_log), venv
    )
    if restored is None:
        return None
    model, state = restored
    curve = LearningCurve()
    curve.rows = [tuple(r) for r in state["curve"]]
    selection = None
    if "selection" in state:
        selection = SelectionState.from_json(state["selection"], state["best_weights"])
    kept = checkpoint_dir / IMITATION_FILE
    return _Start(
        model,
        curve,
        done=int(meta["timesteps"]),
        updates=int(state.get("updates", 0)),
        selection=selection,
        imitation_stats=read_regular(kept) if kept.exists() else None,
        resumed=True,
    )


def _new_model(
    spec: TrainingSpec, venv: Any, seed: int, tb_log: str | None, prepare: Callable[[Any], None] | None
) -> _Start:
    """A new model of ``spec``, prepared (a residual's correction zeroed, ...)."""
    model = build_model(spec, venv, seed, tb_log)
    if prepare is not None:
        prepare(model)
    return _Start(model)


def _warm_start(
    model: Any,
    venv: Any,
    spec: TrainingSpec,
    imitate: WarmStart,
    seed: int,
    demonstrations: Callable[[float], Any],
    checkpoint_dir: Path | None,
) -> bytes:
    """Behaviour-clone ``model`` on the demonstrations; returns the cloning's statistics (``imitation.json``).

    With a checkpoint folder, the statistics are kept there for a resumed run's artifacts, and so is
    the clone itself where fine-tuning's pull or jump-start needs it.
    """
    from fieldrl.policies import imitation

    demos = demonstrations(_gamma(spec, venv))
    kept_demos = demos.sample(imitate.max_decisions, seed)
    cloned = imitation.clone(
        model, venv, kept_demos, imitate.epochs, learning_rate=imitate.learning_rate, seed=seed
    )
    cloned["episodes"] = float(demos.episodes)
    cloned["decisions_seen"] = float(len(demos))
    stats = json.dumps(cloned, indent=1).encode()
    if checkpoint_dir is not None:
        checkpoint_dir.mkdir(parents=True, exist_ok=True)
        (checkpoint_dir / IMITATION_FILE).write_bytes(stats)
        if spec.fine_tune is not None and spec.fine_tune.needs_clone:
            clone_bytes = weights.policy_bytes(model.policy.state_dict(), {"clone": True})
            (checkpoint_dir / CLONE_FILE).write_bytes(clone_bytes)
    return stats


def _callbacks(
    spec: TrainingSpec,
    venv: Any,
    seed: int,
    start: _Start,
    updates: UpdateCounter,
    selector: ValidationSelector | None,
    report: Callable[[int], None] | None,
    checkpoint_dir: Path | None,
    extra_files: Callable[[], dict[str, bytes]] | None,
) -> list[BaseCallback]:
    """What runs beside learning: the learning curve, validation, progress, checkpoints (in that order)."""
    callbacks: list[BaseCallback] = [start.curve]
    if selector is not None:
        callbacks.append(selector)
    if report is not None:
        callbacks.append(ProgressReporter(spec.train_steps, report))
    if checkpoint_dir is not None:
        callbacks.append(
            checkpoint.Checkpointer(
                checkpoint_dir,
                spec.checkpoint_interval,
                venv,
                start.curve,
                start=start.done,
                updates=updates,
                selector=selector,
                train_seed=seed,
                resumed=start.resumed,
                extra_files=extra_files,
            )
        )
    return callbacks


def _learn(
    start: _Start, spec: TrainingSpec, seed: int, callbacks: list[BaseCallback], tb_log: str | None
) -> None:
    """SB3's ``learn`` for the steps ``spec.train_steps`` leaves after ``start``."""
    model = start.model
    if start.resumed:
        # Not None, so SB3's _setup_learn keeps its hands off the envs: the Checkpointer starts
        # the episodes the uninterrupted run started at this checkpoint (same seed, same statistics).
        model._last_obs = np.zeros(0)
    if tb_log is None:  # SB3's default logger would leave an empty SB3-<date> folder in /tmp
        model.set_logger(Logger(folder=None, output_formats=[]))
    model.learn(
        total_timesteps=max(spec.train_steps - start.done, 0),
        callback=CallbackList(callbacks),
        tb_log_name=f"{spec.label}-seed{seed}",
        reset_num_timesteps=not start.resumed,
        progress_bar=False,
    )


def _kept_weights(
    model: Any,
    venv: Any,
    spec: TrainingSpec,
    selector: ValidationSelector | None,
    validation: Validation | None,
) -> _Kept:
    """The best weights on validation (and the observation statistics they were scored with), or
    the final ones when nothing was validated."""
    if selector is not None and selector.state.best_weights is not None:
        chosen = selector.state
        selected = {
            "timesteps": chosen.best_step,
            "gradient_updates": chosen.best_updates,
            "value": chosen.best_value,
            "kpi": validation.kpi if validation is not None else "",
        }
        norm = chosen.best_norm if spec.normalize_obs else None
        return _Kept(chosen.best_weights, norm, selected, chosen.curve_csv())
    return _Kept(model.policy.state_dict(), norm_stats(venv) if spec.normalize_obs else None)


def _artifacts(
    spec: TrainingSpec, start: _Start, updates: UpdateCounter, kept: _Kept, tuning_log: fine_tune.FineTuneLog
) -> dict[str, bytes]:
    """``{file name: bytes}`` of a finished training: its curves, warm start, statistics, fine-tuning
    log and the weights kept, whose header records what training did (:mod:`~fieldrl.policies.record`)."""
    record: dict[str, Any] = {
        "algorithm": spec.algorithm,
        "num_timesteps": int(start.model.num_timesteps),
        "gradient_updates": int(updates.total),
        "selected": kept.selected,
    }
    artifacts = {CURVE_FILE: start.curve.csv_text().encode()}
    if kept.validation_csv is not None:
        artifacts[VALIDATION_FILE] = kept.validation_csv.encode()
    if start.imitation_stats is not None:
        artifacts[IMITATION_FILE] = start.imitation_stats
    if kept.norm is not None:
        artifacts[NORM_FILE] = json.dumps(kept.norm).encode()
    if spec.fine_tune is not None:
        record["fine_tune"] = {**spec.fine_tune.record(), "pull_updates": tuning_log.pull_steps}
        artifacts[FINE_TUNE_FILE] = tuning_log.csv_text().encode()
    artifacts[MODEL_FILE] = weights.policy_bytes(kept.state_dict, record)
    return artifacts


def _install_fine_tune(
    model: Any,
    spec: TrainingSpec,
    checkpoint_dir: Path | None,
    resumed: bool,
    log: fine_tune.FineTuneLog,
    selector: ValidationSelector | None,
) -> fine_tune.Installed:
    """Apply ``spec.fine_tune`` to the model about to learn; returns the undo. The clone the pull
    and the jump-start use, and the fine-tuning log, are kept in the checkpoint folder, so that a
    resumed training continues with them."""
    schedule = spec.fine_tune
    if schedule is None:
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
    if schedule.needs_clone:
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
    return fine_tune.install(model, schedule, teacher, log, selector, pull_state)


def construction_problem(
    make_vec_env: Callable[[int, int], Any],
    spec: TrainingSpec,
    budgets: dict[str, TrainingSpec] | None = None,
) -> tuple[str | None, Any, str] | None:
    """Build (but don't train) the model on a one-env copy of the environment.

    Catches what only SB3 can judge before any output is written: an algorithm that
    does not fit the action space, an unknown policy class, bad hyperparameter values,
    a buffer or network that would not fit in memory (:mod:`~fieldrl.policies.memory_guard`),
    and (:mod:`~fieldrl.policies.feasibility`) a budget under which it could not learn: ``budgets``
    maps a budget name to the training as that budget runs it.
    Returns ``(hyperparameter or None, value, the problem in words)``, or None.
    """
    from fieldrl.policies.feasibility import training_problem

    torch.set_num_threads(1)
    venv = make_vec_env(1, 0)
    try:
        kwargs = build_kwargs(spec.hyperparameters, _action_dim(venv.action_space))
        too_big = memory_guard.buffer_problem(venv, spec.n_envs, kwargs)
        if too_big:
            return too_big
        if "buffer_size" in algorithm_parameters(spec.algorithm):
            kwargs.setdefault("buffer_size", 1)  # don't allocate a million-transition buffer to check
        with warnings.catch_warnings(), memory_guard.address_space_capped():
            warnings.simplefilter("ignore")  # e.g. batch-size advice that only holds for n_envs=1
            ALGORITHMS[spec.algorithm](spec.policy, venv, verbose=0, device="cpu", **kwargs)
        for budget, applied in (budgets or {"full": spec}).items():
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
        return None, None, f"{spec.algorithm} cannot be built with these settings: {text}"
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
    spec: TrainingSpec,
    make_vec_env: Callable[[int, int], Any],
    weights_path: Path,
    norm_path: Path | None,
    wrap: Callable[[Any], Any] | None = None,
) -> Any:
    """Rebuild ``spec``'s model on one env of ``make_vec_env`` and load its weights file into it.

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
            model = build_model(spec, venv, seed=0)
    finally:
        venv.close()
    weights.load_into(model, weights.read_weights(weights_path), str(weights_path))
    norm = read_obs_normalization(norm_path, model.observation_space.shape) if norm_path is not None else None
    policy = SB3Policy(name, model, norm)
    return wrap(policy) if wrap is not None else policy
