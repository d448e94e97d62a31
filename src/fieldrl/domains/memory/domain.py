"""The cue-memory domain: a small test that a policy carries information across steps."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from fieldrl.domains.base import KPI, Domain, EpisodeRecord, StressAxis, field_axis
from fieldrl.domains.memory.env import MemoryEnv
from fieldrl.domains.memory.heuristics import HEURISTICS
from fieldrl.domains.speed import Speed


class MemoryParams(BaseModel):
    """Scenario parameters of the cue-memory task."""

    model_config = ConfigDict(extra="forbid")

    delay: int = Field(5, ge=1, le=100, description="Steps between the cue and the deciding step.")
    noise: float = Field(0.0, ge=0.0, le=1.0, description="S.d. of Gaussian noise on the observed signal.")


KPIS: list[KPI] = [
    KPI("success", "Episodes with the correct final action", "%", higher_is_better=True, binary=True),
    KPI("return", "Return", "", higher_is_better=True),
]


class MemoryDomain(Domain[MemoryParams]):
    """Cue-then-act memory task: act on the sign of a cue seen ``delay`` steps earlier."""

    name = "memory"
    title = "Cue memory"
    #: measured on the demo budgets of the built-in scenarios (see :class:`~fieldrl.domains.speed.Speed`)
    speed = Speed(on_policy=800.0, off_policy=850.0, episode_s=0.01)
    params_model = MemoryParams
    kpis = KPIS
    headline_kpis = ("success",)
    heuristics = HEURISTICS
    info_keys = ("success",)
    stress_axes = {
        "noise": field_axis(
            "noise", "Observation noise", "s.d. on the signal", (0.0, 0.25, 0.5, 1.0), 0.0, 1.0
        ),
        # a longer wait than trained: a history of five steps no longer reaches back to the cue
        "delay": StressAxis(
            "Steps between cue and decision",
            "steps",
            (2.0, 5.0, 8.0, 12.0),
            1.0,
            100.0,
            lambda p: float(p.delay),
            lambda raw, value: {**raw, "delay": round(value)},
            fmt="g",
        ),
    }

    def make_env(self, params: MemoryParams, seed: int | None = None) -> MemoryEnv:
        p = self.checked_params(params)
        env = MemoryEnv(delay=p.delay, noise=p.noise)
        if seed is not None:
            env.reset(seed=seed)
        return env

    # -- decision differences (words in :mod:`fieldrl.domains.memory.decisions`)
    def decision_features(self, envs: Any, n_features: int) -> list[str]:
        from fieldrl.domains.memory.decisions import features

        return features(envs, n_features)

    def action_words(self, envs: Any) -> list[str] | None:
        from fieldrl.domains.memory.decisions import action_words

        return action_words(envs)

    def episode_kpis(self, record: EpisodeRecord) -> dict[str, np.ndarray]:
        active = np.asarray(record.active, dtype=bool)
        success = np.asarray(record.info["success"], dtype=np.float64).reshape(active.shape)
        return {
            "success": np.where(active, success, 0.0).sum(axis=0) * 100.0,
            "return": np.asarray(record.returns, dtype=np.float64),
        }

    # -- side-by-side replays (``fieldrl replay``; drawing in :mod:`fieldrl.domains.memory.replay`)
    def replay_snapshot(self, envs: Any, index: int) -> dict[str, Any]:
        from fieldrl.domains.memory.replay import snapshot

        return snapshot(envs, index)

    def draw_replay(self, ax: Any, history: Sequence[dict[str, Any]], title: str) -> None:
        from fieldrl.domains.memory.replay import draw

        draw(ax, history, title)

    def replay_divergence(self, a: dict[str, Any], b: dict[str, Any]) -> float:
        """The gap between the two policies' actions on the step just taken (actions run from -1 to 1),
        plus the gap between their returns (2 at the deciding step when one has the cue's sign and the
        other not)."""
        from fieldrl.domains.memory.replay import divergence

        return divergence(a, b)
