"""Episode KPIs of the traffic domain, read from ``TrafficEnv.episode_info()`` at each episode's end."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from fieldrl.domains.base import KPI, EpisodeRecord
from fieldrl.domains.traffic.keys import KPI_KEYS, TRACE_KEYS

if TYPE_CHECKING:  # loaded where used: checking a scenario needs none of this
    import pandas as pd

KPIS: list[KPI] = [
    KPI("person_delay_mean", "Mean person delay (all road users)", "s", higher_is_better=False, fmt=".1f"),
    KPI("vehicle_delay_mean", "Mean vehicle delay", "s", higher_is_better=False, fmt=".1f"),
    KPI("vehicle_delay_p95", "95th-percentile vehicle delay", "s", higher_is_better=False, fmt=".0f"),
    KPI("pedestrian_delay_mean", "Mean pedestrian delay", "s", higher_is_better=False, fmt=".1f"),
    KPI("pedestrian_delay_p95", "95th-percentile pedestrian delay", "s", higher_is_better=False, fmt=".0f"),
    KPI("pedestrian_max_wait", "Longest pedestrian wait", "s", higher_is_better=False, fmt=".0f"),
    KPI("throughput", "Throughput (people arriving)", "people/min", higher_is_better=True, fmt=".1f"),
    KPI("jain_modes", "Fairness between modes (Jain)", "0-1", higher_is_better=True, fmt=".3f"),
    KPI("queue_mean", "Mean vehicle queue", "vehicles", higher_is_better=False, fmt=".1f"),
]
assert {k.name for k in KPIS} <= set(KPI_KEYS)


def info_keys(n_stages: int) -> tuple[str, ...]:
    return (*KPI_KEYS, *TRACE_KEYS, *(f"stage_share_{k}" for k in range(n_stages + 1)))


def episode_kpis(record: EpisodeRecord) -> dict[str, np.ndarray]:
    return {k.name: record.final(k.name) for k in KPIS}


def episode_trace(record: EpisodeRecord, index: int) -> pd.DataFrame:
    """Per decision step of one episode: time, queue, waiting pedestrians, longest current
    pedestrian wait, first junction's stage (-1 = changing), running KPIs and stage shares."""
    import pandas as pd

    length = int(np.asarray(record.active, dtype=bool)[:, index].sum())
    columns = {
        key: np.asarray(values, dtype=float)[:length, index]
        for key, values in record.info.items()
        if key in TRACE_KEYS or key.startswith("stage_share_") or key in ("person_delay_mean",)
    }
    columns["step"] = np.arange(length)
    return pd.DataFrame(columns)
