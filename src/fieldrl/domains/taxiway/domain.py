"""The taxiway routing domain: wires params, the PettingZoo env, controllers and KPIs together."""

from __future__ import annotations

import time
from collections.abc import Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np

from fieldrl.domains.base import EpisodeRecord
from fieldrl.domains.multiagent import ParallelDomain, ParallelLockstepEnvs
from fieldrl.domains.speed import Speed
from fieldrl.domains.taxiway import metrics
from fieldrl.domains.taxiway.heuristics import HEURISTICS
from fieldrl.domains.taxiway.params import TaxiwayParams
from fieldrl.domains.taxiway.stress import stress_axes
from fieldrl.policies.base import Policy
from fieldrl.simulators.airport.engine import CONFLICT_KINDS

if TYPE_CHECKING:  # loaded where used: checking a scenario needs none of this
    import pandas as pd

    from fieldrl.domains.taxiway.env import TaxiwayEnv
    from fieldrl.domains.taxiway.vec import TermRewardSlots
    from fieldrl.reportkit.context import ReportContext


class TaxiwayLockstepEnvs(ParallelLockstepEnvs):
    """``ParallelLockstepEnvs`` that also times the policy and records positions and conflicts.

    The time between one ``step`` returning and the next ``step`` call is the policy's decision
    time for the whole batch; it is shared out over the aircraft that decided (one decision per
    taxiing aircraft per step) and reported by every env as ``decision_ms``. Per-slot positions
    and each step's new conflicts go into ``info`` for the report's airport map.
    """

    def __init__(self, envs: Sequence[TaxiwayEnv], seeds: Sequence[int], info_keys: Sequence[str]):
        super().__init__(envs, seeds, info_keys)
        self._returned = 0.0
        self._seconds = 0.0
        self._decisions = 0
        self._events_seen = [0] * len(self.envs)

    def reset(self) -> np.ndarray:
        self._events_seen = [0] * len(self.envs)
        self._seconds, self._decisions = 0.0, 0
        obs = super().reset()
        self._returned = time.perf_counter()
        return obs

    def step(self, actions: np.ndarray):
        self._seconds += time.perf_counter() - self._returned
        self._decisions += sum(len(env.agents) for env in self.envs)
        for env in self.envs:
            env.decision_seconds, env.decisions = self._seconds, self._decisions
        out = super().step(actions)
        self._returned = time.perf_counter()
        return out

    def _info(self) -> dict[str, np.ndarray]:
        info = super()._info()
        n, slots = self.n, self.n_slots
        sx = np.full((n, slots), np.nan)
        sy = np.full((n, slots), np.nan)
        ex = np.full((n, metrics.MAX_EVENTS), np.nan)
        ey = np.full((n, metrics.MAX_EVENTS), np.nan)
        ek = np.full((n, metrics.MAX_EVENTS), np.nan)
        for i, env in enumerate(self.envs):
            sim = env.sim
            for slot, agent in enumerate(self.maps[i].agents):
                if agent is not None and env.index(agent) in sim.active:
                    sx[i, slot], sy[i, slot] = sim.s.cell_xy[sim.cell(env.index(agent))]
            new = sim.events[self._events_seen[i] :][: metrics.MAX_EVENTS]
            self._events_seen[i] = len(sim.events)
            for k, (_, kind, x, y) in enumerate(new):
                ex[i, k], ey[i, k], ek[i, k] = x, y, CONFLICT_KINDS.index(kind)
        info.update(slot_x=sx, slot_y=sy, ev_x=ex, ev_y=ey, ev_kind=ek)
        return info


def make_env(params: TaxiwayParams) -> TaxiwayEnv:
    from fieldrl.domains.taxiway.env import TaxiwayEnv

    return TaxiwayEnv(params)


class TaxiwayDomain(ParallelDomain[TaxiwayParams]):
    """Aircraft taxi routing on an airport surface (multi-agent, masked actions)."""

    name = "taxiway"
    title = "Airport taxiway routing"
    #: measured on the demo budgets of the built-in scenarios (see :class:`~fieldrl.domains.speed.Speed`)
    speed = Speed(on_policy=3500.0, off_policy=170.0, episode_s=0.45)
    params_model = TaxiwayParams
    kpis = metrics.KPIS
    headline_kpis = ("conflicts_per_100", "taxi_time_min", "throughput_per_hour", "completed_pct")
    glossary = {
        "Conflict": "two aircraft closer than the separation minimum on the surface (counted exactly, "
        "per 100 movements).",
        "Masked actions": "moves the airport forbids (a closed taxiway, a runway in use) are never offered "
        "to the learned policy.",
        "Shield": "a learned policy marked '+ shield' acts through prioritized planning, which replaces any "
        "move it cannot confirm as conflict-free (every replacement is counted in the taxiway section).",
    }
    heuristics = HEURISTICS
    policy_params = {
        "advice": "whether each aircraft sees the move prioritized planning would make now (and may "
        "follow it)",
        "train_weights": "the reward weights it trains on (none: the scenario's; it is scored on the "
        "scenario's)",
    }
    info_keys = metrics.SCALAR_KEYS
    file_params = ("layout_file",)
    extra_wall_clock_metrics = ("plan_ms",)
    eval_batch_size = 64
    eval_envs_class = TaxiwayLockstepEnvs
    shield_heuristics = ("prioritized",)
    #: traffic (x the trained rate), share of departures, separation minimum; points and ranges, and
    #: why, in :mod:`fieldrl.domains.taxiway.stress`
    stress_axes = stress_axes()

    def shielded_policy(self, label: str, learned: Policy, shield: Policy, patience: int) -> Policy:
        from fieldrl.domains.taxiway.heuristics import Prioritized
        from fieldrl.domains.taxiway.shield import ShieldedPolicy

        assert isinstance(shield, Prioritized), shield
        return ShieldedPolicy(label, learned, shield, patience)

    def make_parallel_env(self, params: TaxiwayParams, training: bool = False) -> TaxiwayEnv:
        """The env; a training env rewards with ``train_weights`` where they are set."""
        if training and params.train_weights is not None:
            params = params.model_copy(update={"weights": params.train_weights})
        return make_env(params)

    def make_train_vec_env(self, params: TaxiwayParams, n_envs: int, seed: int) -> TermRewardSlots:
        """Agent slots that also report each slot's reward terms (what the value-decomposed learner needs)."""
        from fieldrl.domains.taxiway.vec import TermRewardSlots

        p = self.checked_params(params)
        return TermRewardSlots([partial(self.make_parallel_env, p, True) for _ in range(n_envs)], seed)

    # -- decision differences (words in :mod:`fieldrl.domains.taxiway.decisions`)
    def decision_features(self, envs: Any, n_features: int) -> list[str]:
        from fieldrl.domains.taxiway.decisions import features

        return features(envs, n_features)

    def action_words(self, envs: Any) -> list[str] | None:
        from fieldrl.domains.taxiway.decisions import action_words

        return action_words(envs)

    def episode_kpis(self, record: EpisodeRecord) -> dict[str, np.ndarray]:
        return metrics.episode_kpis(record)

    def episode_trace(self, record: EpisodeRecord, index: int) -> pd.DataFrame:
        return metrics.episode_trace(record, index)

    def report_section(self, context: ReportContext) -> list[Any]:
        from fieldrl.domains.taxiway.report import report_section

        return report_section(context)

    # -- side-by-side replays (``fieldrl replay``; drawing in :mod:`fieldrl.domains.taxiway.replay`)
    def replay_snapshot(self, envs: Any, index: int) -> dict[str, Any]:
        from fieldrl.domains.taxiway.replay import snapshot

        return snapshot(envs, index)

    def draw_replay(self, ax: Any, history: Sequence[dict[str, Any]], title: str) -> None:
        from fieldrl.domains.taxiway.replay import draw

        draw(ax, history, title)

    def replay_divergence(self, a: dict[str, Any], b: dict[str, Any]) -> float:
        """Twice the gap in conflicts so far, plus the gap in completed movements, plus half the aircraft
        that taxi in one episode only or stand in different places in the two."""
        from fieldrl.domains.taxiway.replay import divergence

        return divergence(a, b)
