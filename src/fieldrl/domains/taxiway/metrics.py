"""Episode KPIs of the taxiway domain and the per-step trace the report draws on the airport map."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from fieldrl.domains.base import KPI, EpisodeRecord
from fieldrl.simulators.airport.engine import CONFLICT_KINDS

if TYPE_CHECKING:  # loaded where used: checking a scenario needs none of this
    import pandas as pd

KPIS: list[KPI] = [
    KPI("conflicts_per_100", "Conflicts per 100 movements", "per 100", higher_is_better=False, fmt=".2f"),
    KPI("taxi_time_min", "Mean taxi time", "min", higher_is_better=False, fmt=".2f"),
    KPI("delay_pct", "Delay over unimpeded taxi time", "%", higher_is_better=False, fmt=".1f"),
    KPI(
        "throughput_per_hour",
        "Throughput (movements completed)",
        "per hour",
        higher_is_better=True,
        fmt=".1f",
    ),
    KPI("crossing_wait_s", "Runway-crossing wait per movement", "s", higher_is_better=False, fmt=".1f"),
    KPI("completed_pct", "Movements completed", "%", higher_is_better=True, fmt=".1f"),
    KPI("decision_ms", "Computation time per decision", "ms", False, ".3f", wall_clock=True),
    KPI("return", "Return (summed team reward)", "", higher_is_better=True, fmt=".1f"),
]

#: how often a runtime shield overrode the learned policy (NaN for every policy without one)
SHIELD_KEYS = ("shield_overrides_per_100", "shield_unstuck_per_100", "shield_override_pct")
#: episode-level numbers read at each episode's last active step (``TaxiwayEnv.episode_info``)
SCALAR_KEYS = (
    "conflicts_per_100",
    "taxi_time_min",
    "delay_pct",
    "throughput_per_hour",
    "crossing_wait_s",
    "completed_pct",
    "decision_ms",
    "plan_ms",
    "plan_failures",
    "planner_fallbacks",
    "separation_conflicts",
    "head_on_conflicts",
    "runway_conflicts",
    "movements",
    *SHIELD_KEYS,
)
MAX_EVENTS = 8  # conflicts recorded per episode and step for the map


def episode_kpis(record: EpisodeRecord) -> dict[str, np.ndarray]:
    out = {k.name: record.final(k.name) for k in KPIS if k.name in record.info}
    out["return"] = np.asarray(record.returns, dtype=float)
    for extra in (
        "plan_ms",
        "plan_failures",
        "planner_fallbacks",
        "runway_conflicts",
        "head_on_conflicts",
        "separation_conflicts",
    ):
        if extra in record.info:
            out[extra] = record.final(extra)
    for extra in SHIELD_KEYS:  # shielded policies only
        if extra in record.info and np.isfinite(values := record.final(extra)).any():
            out[extra] = values
    return out


def episode_trace(record: EpisodeRecord, index: int) -> pd.DataFrame:
    """Aircraft positions of episode ``index`` (rows ``kind == "aircraft"``: step, slot, x, y),
    every conflict of the whole batch (rows ``kind`` = conflict kind: step, episode, x, y) and
    where aircraft of the whole batch were still taxiing when their period ended (``"stranded"``)."""
    import pandas as pd

    active = np.asarray(record.active, dtype=bool)
    frames = []
    if "slot_x" in record.info:
        steps = int(active[:, index].sum())
        xs = np.asarray(record.info["slot_x"], dtype=float)[:steps, index]
        ys = np.asarray(record.info["slot_y"], dtype=float)[:steps, index]
        step, slot = np.nonzero(np.isfinite(xs))
        frames.append(
            pd.DataFrame(
                {
                    "kind": "aircraft",
                    "episode": index,
                    "step": step,
                    "slot": slot,
                    "x": xs[step, slot],
                    "y": ys[step, slot],
                }
            )
        )
    if "ev_x" in record.info:
        ex = np.asarray(record.info["ev_x"], dtype=float)
        ey = np.asarray(record.info["ev_y"], dtype=float)
        ek = np.asarray(record.info["ev_kind"], dtype=float)
        ok = np.isfinite(ex) & active[:, :, None]
        step, ep, k = np.nonzero(ok)
        frames.append(
            pd.DataFrame(
                {
                    "kind": [CONFLICT_KINDS[int(c)] for c in ek[step, ep, k]],
                    "episode": ep,
                    "step": step,
                    "slot": -1,
                    "x": ex[step, ep, k],
                    "y": ey[step, ep, k],
                }
            )
        )
    if "slot_x" in record.info:  # aircraft still taxiing at the end of the period: stranded
        last = record.last_step
        sx = np.asarray(record.info["slot_x"], dtype=float)
        sy = np.asarray(record.info["slot_y"], dtype=float)
        ep, slot = np.nonzero(np.isfinite(sx[last, np.arange(active.shape[1])]))
        frames.append(
            pd.DataFrame(
                {
                    "kind": "stranded",
                    "episode": ep,
                    "step": last[ep],
                    "slot": slot,
                    "x": sx[last[ep], ep, slot],
                    "y": sy[last[ep], ep, slot],
                }
            )
        )
    if not frames:
        return pd.DataFrame({"step": np.arange(int(active[:, index].sum()))})
    return pd.concat(frames, ignore_index=True)
