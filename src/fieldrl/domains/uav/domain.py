"""The multi-UAV vehicular offloading domain: params, ParallelEnv, heuristics, KPIs and report."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from fieldrl.domains.base import EpisodeRecord
from fieldrl.domains.multiagent import ParallelDomain
from fieldrl.domains.uav import metrics
from fieldrl.domains.uav.heuristics import HEURISTICS
from fieldrl.domains.uav.keys import KPI_KEYS, info_keys
from fieldrl.simulators.uav.params import UavParams

if TYPE_CHECKING:  # loaded where used: checking a scenario needs none of this
    import pandas as pd

    from fieldrl.domains.uav.env import UavParallelEnv
    from fieldrl.reportkit.context import ReportContext


class UavDomain(ParallelDomain[UavParams]):
    """UAVs and a base station serving vehicles' computing tasks in a city (arXiv:2605.04436 setting)."""

    name = "uav"
    title = "Multi-UAV-assisted vehicular task offloading"
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

    def make_parallel_env(self, params: UavParams, training: bool = False) -> UavParallelEnv:
        from fieldrl.domains.uav.env import UavParallelEnv

        return UavParallelEnv(self.checked_params(params))

    def eval_info_keys(self, params: UavParams) -> Sequence[str]:
        """The KPIs and the per-slot positions of this many UAVs and vehicles (for the report's map)."""
        return info_keys(params)

    def episode_kpis(self, record: EpisodeRecord) -> dict[str, np.ndarray]:
        return metrics.episode_kpis(record)

    def episode_trace(self, record: EpisodeRecord, index: int) -> pd.DataFrame:
        return metrics.episode_trace(record, index)

    def report_section(self, context: ReportContext) -> list[Any]:
        from fieldrl.domains.uav.report import report_section

        return report_section(context)
