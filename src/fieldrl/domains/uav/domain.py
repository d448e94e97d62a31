"""The multi-UAV vehicular offloading domain: params, ParallelEnv, heuristics, KPIs and report."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from fieldrl.domains.base import EpisodeRecord, StressAxis, field_axis
from fieldrl.domains.multiagent import ParallelDomain
from fieldrl.domains.speed import Speed
from fieldrl.domains.uav import metrics
from fieldrl.domains.uav.heuristics import HEURISTICS
from fieldrl.domains.uav.keys import KPI_KEYS, info_keys
from fieldrl.domains.uav.stress import trained_vehicles, with_vehicles
from fieldrl.simulators.uav.params import UavParams

if TYPE_CHECKING:  # loaded where used: checking a scenario needs none of this
    import pandas as pd

    from fieldrl.domains.uav.env import UavParallelEnv
    from fieldrl.reportkit.context import ReportContext


class UavDomain(ParallelDomain[UavParams]):
    """UAVs and a base station serving vehicles' computing tasks in a city (arXiv:2605.04436 setting)."""

    name = "uav"
    title = "Multi-UAV-assisted vehicular task offloading"
    #: measured on the demo budgets of the built-in scenarios (see :class:`~fieldrl.domains.speed.Speed`)
    speed = Speed(on_policy=170.0, off_policy=100.0, episode_s=0.45)
    params_model = UavParams
    kpis = metrics.KPIS
    headline_kpis = ("success_rate", "mean_delay_ms", "energy_j", "cost")
    glossary = {
        "SOCP": "second-order cone programme: the convex problem solved for each UAV's flight path.",
        "LP": "linear programme: splits each task between the vehicle, the UAVs and the base station.",
        "Weighted system cost": "the paper's objective per time slot: delay and energy weighted together "
        "(lower is better).",
    }
    heuristics = HEURISTICS
    info_keys = KPI_KEYS
    eval_batch_size = 64
    #: the world moved away from training (``fieldrl stress``; why these keep the spaces: uav/stress.py)
    stress_axes = {
        # the task-size multiplier: the built-in scenarios train at x2 (0.4-2 Mbit tasks) and
        # dense-city also trains separate policies at x1.5 and x3; the defaults span half to twice the
        # trained load. Allowed from x0.1, where the largest default task (0.1 Mbit x 1,000 cycles/bit)
        # fits the vehicle's own 1 GHz CPU within the shortest 0.2 s deadline, to x10, where it needs
        # half a second of the whole 20 GHz base-station CPU: "offloading optional" to "little can finish"
        "load": field_axis(
            "load", "Computing load", "x the base task sizes", (1.0, 1.5, 2.0, 3.0, 4.0), 0.1, 10.0
        ),
        # traffic: vehicles driving (and sending up to one task a slot each) in the area. quick trains
        # with 10 (2 UAVs), dense-city with 40 (4 UAVs); the defaults hold both, from half the smaller
        # fleet to twice the larger. Allowed from 1 to the params model's 200.
        "vehicles": StressAxis(
            "Number of vehicles",
            "vehicles in the area",
            (5.0, 10.0, 20.0, 40.0, 80.0),
            1.0,
            200.0,
            trained_vehicles,
            with_vehicles,
            ".0f",
        ),
    }

    def make_parallel_env(self, params: UavParams, training: bool = False) -> UavParallelEnv:
        from fieldrl.domains.uav.env import UavParallelEnv

        return UavParallelEnv(self.checked_params(params))

    def eval_info_keys(self, params: UavParams) -> Sequence[str]:
        """The KPIs and the per-slot positions of this many UAVs and vehicles (for the report's map)."""
        return info_keys(params)

    def environment_safeguard(self, params: UavParams) -> str | None:
        """The pipeline's rule rectifier repairs the allocation (failed tasks moved, shares re-split) before
        it is executed; without the pipeline, or with ``rectifier: none``, the policy's action is taken."""
        if params.pipeline and params.rectifier != "none":
            return (
                "the UAV pipeline's rule rectifier (it moves failed tasks and re-splits bandwidth and CPU "
                "before the allocation is executed)"
            )
        return None

    # -- decision differences (words in :mod:`fieldrl.domains.uav.decisions`)
    def ask_problem(self, use: str, params: UavParams) -> str | None:
        if use == "pipeline-fixed" and not params.pipeline:
            return (
                "answers with the pipeline's allocation actions, which mean other moves without the pipeline"
            )
        return super().ask_problem(use, params)

    def decision_features(self, envs: Any, n_features: int) -> list[str]:
        from fieldrl.domains.uav.decisions import features

        return features(envs, n_features)

    def action_words(self, envs: Any) -> list[str] | None:
        from fieldrl.domains.uav.decisions import action_words

        return action_words(envs)

    def episode_kpis(self, record: EpisodeRecord) -> dict[str, np.ndarray]:
        return metrics.episode_kpis(record)

    def episode_trace(self, record: EpisodeRecord, index: int) -> pd.DataFrame:
        return metrics.episode_trace(record, index)

    def report_section(self, context: ReportContext) -> list[Any]:
        from fieldrl.domains.uav.report import report_section

        return report_section(context)

    # -- side-by-side replays (``fieldrl replay``; drawing in :mod:`fieldrl.domains.uav.replay`)
    def replay_snapshot(self, envs: Any, index: int) -> dict[str, Any]:
        from fieldrl.domains.uav.replay import snapshot

        return snapshot(envs, index)

    def draw_replay(self, ax: Any, history: Sequence[dict[str, Any]], title: str) -> None:
        from fieldrl.domains.uav.replay import draw

        draw(ax, history, title)

    def replay_divergence(self, a: dict[str, Any], b: dict[str, Any]) -> float:
        """The gap in tasks failed so far, plus the UAVs' mean distance apart (every 100 m counts as one
        failed task)."""
        from fieldrl.domains.uav.replay import divergence

        return divergence(a, b)
