"""Episode KPIs of the rail domain, read from the env's ``episode_info`` at each episode's end."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from fieldrl.domains.base import KPI, EpisodeRecord

if TYPE_CHECKING:  # loaded where used: checking a scenario needs none of this
    import pandas as pd

KPIS = [
    KPI("arrived", "Trains arrived", "% of trains", True, ".1f"),
    KPI("deadlocked", "Trains in deadlock", "% of trains", False, ".1f"),
    KPI("delay", "Mean arrival delay", "steps late (arrived trains)", False, ".1f", among="arrived"),
    KPI("cancelled", "Trains cancelled", "% of trains", False, ".1f"),
    KPI("normalized_reward", "Flatland 3 normalised reward", "0..1", True, ".3f"),
]
INFO_KEYS = ("arrived", "deadlocked", "delay", "cancelled", "normalized_reward", "flatland_steps", "trains")


def episode_kpis(record: EpisodeRecord) -> dict[str, np.ndarray]:
    return {k.name: record.final(k.name) for k in KPIS}


def episode_trace(record: EpisodeRecord, index: int) -> pd.DataFrame:
    """Per decision step of one episode: Flatland time and the running KPIs."""
    import pandas as pd

    steps = int(record.lengths[index])
    frame = {"step": np.arange(steps)}
    for key in INFO_KEYS:
        if key in record.info:
            frame[key] = np.asarray(record.info[key])[:steps, index].astype(float)
    return pd.DataFrame(frame)
