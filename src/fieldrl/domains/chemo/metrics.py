"""Episode KPIs of the chemotherapy domain, in clinical units beside the DTR-Bench return."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from fieldrl.domains.base import KPI, EpisodeRecord
from fieldrl.simulators.chemo import DT

if TYPE_CHECKING:  # loaded where used: checking a scenario needs none of this
    import pandas as pd

KPIS: list[KPI] = [
    KPI("return", "Return (DTR-Bench reward)", "", higher_is_better=True),
    KPI("tumour_burden", "Final tumour burden", "% of initial", higher_is_better=False),
    KPI("normal_cells", "Lowest normal-cell count", "% of initial", higher_is_better=True),
    KPI("survival", "Survival", "%", higher_is_better=True, binary=True),
    # less drug is not better in itself (no treatment gives none): a trade-off, reported but not ranked
    KPI("total_dose", "Total dose", "max-dose days", higher_is_better=False, ranked=False),
]


def episode_kpis(record: EpisodeRecord) -> dict[str, np.ndarray]:
    """KPI values for each episode of ``record``, name -> ``(n,)`` array.

    Reads ``info["state"]`` ``(steps, n, 4)``, ``info["dose"]`` ``(steps, n)`` and
    ``initial_info["state"]`` ``(n, 4)``; steps after an episode's end are masked out
    with ``record.active``.
    """
    active = np.asarray(record.active, dtype=bool)
    states = np.asarray(record.info["state"], dtype=np.float64)
    doses = np.asarray(record.info["dose"], dtype=np.float64).reshape(active.shape)
    init = np.asarray(record.initial_info["state"], dtype=np.float64)
    n0, t0 = init[:, 0], init[:, 1]
    cols = np.arange(active.shape[1])

    final = states[record.last_step, cols] if len(states) else init
    final = np.where(active.any(axis=0)[:, None], final, init)
    normal = np.where(active, states[..., 0], np.inf).min(axis=0, initial=np.inf)
    died = np.where(active, np.asarray(record.terminated, dtype=bool), False).any(axis=0)
    return {
        "return": np.asarray(record.returns, dtype=np.float64),
        "tumour_burden": final[:, 1] / t0 * 100.0,
        "normal_cells": np.minimum(normal, n0) / n0 * 100.0,
        "survival": np.where(died, 0.0, 100.0),
        "total_dose": np.where(active, doses, 0.0).sum(axis=0) * DT,
    }


def episode_trace(record: EpisodeRecord, index: int) -> pd.DataFrame:
    """Per-step trace of episode ``index``, starting with the initial state at day 0.

    Columns: ``day``, ``tumour`` and ``normal`` (% of initial), ``immune`` (I),
    ``drug`` (B) and ``dose`` (the dose given over the step that starts at ``day``; 0 on the
    last row, after the episode ended).
    """
    import pandas as pd

    length = int(np.asarray(record.active, dtype=bool)[:, index].sum())
    init = np.asarray(record.initial_info["state"], dtype=np.float64)[index]
    states = np.asarray(record.info["state"], dtype=np.float64)[:length, index]
    states = np.vstack([init[None, :], states])
    doses = np.asarray(record.info["dose"], dtype=np.float64)[:length, index].reshape(-1)
    return pd.DataFrame(
        {
            "day": np.arange(length + 1) * DT,
            "tumour": states[:, 1] / init[1] * 100.0,
            "normal": states[:, 0] / init[0] * 100.0,
            "immune": states[:, 2],
            "drug": states[:, 3],
            "dose": np.concatenate([doses, [0.0]]),
        }
    )
