"""Episode KPIs of the UAV offloading domain and the per-slot trace behind the report's map."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from fieldrl.domains.base import KPI, EpisodeRecord

if TYPE_CHECKING:  # loaded where used: checking a scenario needs none of this
    import pandas as pd

KPIS: list[KPI] = [
    KPI("success_rate", "Task success rate", "%", higher_is_better=True, fmt=".1f"),
    KPI("cost", "Weighted system cost", "per slot", higher_is_better=False, fmt=".3f"),
    KPI("mean_delay_ms", "Mean delay (completed tasks)", "ms", higher_is_better=False, fmt=".0f"),
    KPI("energy_j", "Energy, all", "J per slot", higher_is_better=False, fmt=".0f"),
    KPI("propulsion_j", "Energy, UAV propulsion", "J per slot", higher_is_better=False, fmt=".0f"),
    KPI("computing_j", "Energy, computing", "J per slot", higher_is_better=False, fmt=".2f"),
    KPI("transmission_j", "Energy, transmission", "J per slot", higher_is_better=False, fmt=".3f"),
    KPI("socp_ms", "SOCP solve time per UAV", "ms", False, ".2f", wall_clock=True),
    KPI("lp_ms", "LP time per slot", "ms", False, ".2f", wall_clock=True),
    KPI(
        "separation_violations",
        "UAV separation violations",
        "pairs x slots",
        higher_is_better=False,
        fmt=".0f",
    ),
]


def episode_kpis(record: EpisodeRecord) -> dict[str, np.ndarray]:
    """Each KPI read from ``info`` at the episode's last active step (the env keeps running totals)."""
    return {k.name: record.final(k.name) for k in KPIS}


def episode_trace(record: EpisodeRecord, index: int) -> pd.DataFrame:
    """Per slot: UAV positions (``uav{u}_x/y/z``), vehicle positions (``veh{v}_x/y``), slot success/cost."""
    import pandas as pd

    length = int(np.asarray(record.active, dtype=bool)[:, index].sum())
    columns = {"slot": np.arange(1, length + 1)}
    for key, values in record.info.items():
        if key.startswith(("uav", "veh")) or key in ("slot_success", "slot_cost"):
            columns[key] = np.asarray(values, float)[:length, index]
    return pd.DataFrame(columns)
