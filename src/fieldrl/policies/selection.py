"""Validation-gated selection: the policy that goes to held-out evaluation is the best checkpoint
on the validation seeds, not whatever the last gradient step left.

Every ``every`` environment steps (and once before the first update, so a warm start is a
candidate too, and once at the end) the live model is run deterministically on the
scenario's validation seeds, which are disjoint from the training and held-out seeds. The
best-scoring weights (with the observation-normalisation statistics of that moment) are
kept. Each evaluation is a row of the validation curve: steps, training CPU seconds and wall
seconds so far (validation time excluded) and the score; the report draws it against the best
heuristic's score on the same seeds (time-to-quality).

SB3's ``EvalCallback`` does the same for one gym env; this one evaluates through fieldrl's
runner (batched, multi-agent, any domain KPI) and keeps the weights in memory, so it can hand
them to fieldrl's own weight files.
"""

from __future__ import annotations

import copy
import csv
import dataclasses
import io
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.vec_env import VecNormalize

CURVE_COLUMNS = ("timesteps", "updates", "cpu_seconds", "wall_seconds", "value", "best")


@dataclass
class Validation:
    """How a training run is validated.

    :param every: env steps between evaluations.
    :param score: ``(model, obs_norm or None) -> score`` on the validation seeds (mean primary KPI).
    :param higher_is_better: direction of the score.
    :param kpi: name of the KPI scored (for the record).
    :param observe: called with ``(steps, score)`` after each evaluation; returning False stops
        training there (a tuning trial that the pruner gave up on).
    """

    every: int
    score: Callable[[Any, dict[str, Any] | None], float]
    higher_is_better: bool
    kpi: str = ""
    observe: Callable[[int, float], bool] | None = None


@dataclass
class SelectionState:
    """What selection has seen so far; kept in checkpoints so a resumed run continues it."""

    rows: list[tuple[int, int, float, float, float]] = field(default_factory=list)
    best_value: float | None = None
    best_step: int | None = None
    best_updates: int | None = None
    best_weights: dict[str, torch.Tensor] | None = None
    best_norm: dict[str, Any] | None = None
    cpu_seconds: float = 0.0  # training time before this process took over (resumed runs)
    wall_seconds: float = 0.0

    def as_json(self) -> dict[str, Any]:
        return {
            "rows": [list(r) for r in self.rows],
            "best_value": self.best_value,
            "best_step": self.best_step,
            "best_updates": self.best_updates,
            "best_norm": self.best_norm,
            "cpu_seconds": self.cpu_seconds,
            "wall_seconds": self.wall_seconds,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any], weights: dict[str, torch.Tensor] | None) -> SelectionState:
        return cls(
            rows=[
                (int(r[0]), int(r[1]), float(r[2]), float(r[3]), float(r[4])) for r in data.get("rows", [])
            ],
            best_value=data.get("best_value"),
            best_step=data.get("best_step"),
            best_updates=data.get("best_updates"),
            best_weights=weights,
            best_norm=data.get("best_norm"),
            cpu_seconds=float(data.get("cpu_seconds", 0.0)),
            wall_seconds=float(data.get("wall_seconds", 0.0)),
        )

    def curve_csv(self) -> str:
        out = io.StringIO()
        writer = csv.writer(out)
        writer.writerow(CURVE_COLUMNS)
        for steps, updates, cpu, wall, value in self.rows:
            best = int(steps == self.best_step)
            writer.writerow([steps, updates, f"{cpu:.3f}", f"{wall:.3f}", repr(value), best])
        return out.getvalue()


def norm_stats(venv: Any) -> dict[str, Any] | None:
    """The observation-normalisation statistics of ``venv`` as plain numbers (None if it has none)."""
    if isinstance(venv, VecNormalize) and venv.norm_obs:
        rms = venv.obs_rms
        return {
            "mean": np.asarray(rms.mean).tolist(),
            "var": np.asarray(rms.var).tolist(),
            "clip_obs": venv.clip_obs,
            "epsilon": venv.epsilon,
        }
    return None


class ValidationSelector(BaseCallback):
    """Scores the live model on the validation seeds every ``validation.every`` steps; keeps the best."""

    def __init__(
        self,
        validation: Validation,
        venv: Any,
        updates: Callable[[], int],
        state: SelectionState | None = None,
    ) -> None:
        super().__init__()
        self.validation = validation
        self.venv = venv
        self.updates = updates
        self.state = state or SelectionState()
        self._last = self.state.rows[-1][0] if self.state.rows else None
        self._cpu0 = self._wall0 = 0.0
        self._spent_cpu = self._spent_wall = 0.0  # time spent validating, left out of the curve
        self.stopped = False  # training was stopped by ``validation.observe``
        #: called with each score (fine-tuning's jump-start lowers its horizon on them)
        self.listeners: list[Callable[[float], None]] = []

    def _clock(self) -> tuple[float, float]:
        cpu = self.state.cpu_seconds + time.process_time() - self._cpu0 - self._spent_cpu
        wall = self.state.wall_seconds + time.perf_counter() - self._wall0 - self._spent_wall
        return cpu, wall

    def _on_training_start(self) -> None:
        self._cpu0, self._wall0 = time.process_time(), time.perf_counter()
        if self._last is None:  # a fresh start: the untrained (or warm-started) model is a candidate
            self.evaluate()

    def _on_rollout_start(self) -> None:
        # Weights change only between rollouts (SB3 trains after collecting), so that is when a
        # new checkpoint exists; evaluating inside a rollout would score the same weights again.
        if self._last is None or self.num_timesteps - self._last >= self.validation.every:
            self.evaluate()

    def _on_step(self) -> bool:
        return not self.stopped

    def _on_training_end(self) -> None:
        if self._last != self.num_timesteps and not self.stopped:
            self.evaluate()
        self.state.cpu_seconds, self.state.wall_seconds = self._clock()
        self._cpu0, self._wall0 = time.process_time(), time.perf_counter()
        self._spent_cpu = self._spent_wall = 0.0

    def evaluate(self) -> float:
        cpu, wall = self._clock()
        started_cpu, started_wall = time.process_time(), time.perf_counter()
        norm = norm_stats(self.venv)
        value = float(self.validation.score(self.model, norm))
        self._spent_cpu += time.process_time() - started_cpu
        self._spent_wall += time.perf_counter() - started_wall
        steps, updates = int(self.model.num_timesteps), int(self.updates())
        self.state.rows.append((steps, updates, cpu, wall, value))
        self._last = steps
        for listener in self.listeners:
            listener(value)
        if self._better(value):
            self.state.best_value, self.state.best_step, self.state.best_updates = value, steps, updates
            self.state.best_weights = copy.deepcopy(self.model.policy.state_dict())
            self.state.best_norm = norm
        if self.validation.observe is not None and not self.validation.observe(steps, value):
            self.stopped = True
        return value

    def snapshot(self) -> SelectionState:
        """The state so far with the clocks brought up to now (what a checkpoint keeps)."""
        cpu, wall = self._clock()
        return dataclasses.replace(self.state, cpu_seconds=cpu, wall_seconds=wall)

    def _better(self, value: float) -> bool:
        if not math.isfinite(value):  # e.g. every validation episode failed
            return False
        best = self.state.best_value
        if best is None or not math.isfinite(best):
            return True
        return value > best if self.validation.higher_is_better else value < best
