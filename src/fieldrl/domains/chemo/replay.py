"""The chemotherapy replay (``fieldrl replay``): one patient's course drawn as it unfolds.

Top: tumour and normal cells as % of the patient's start (the line normal cells must not cross is
marked: below 70 % the patient dies); bottom: the dose given each step (fraction of the maximum dose),
the drug level in the blood and the immune cells (model units). Same units as the report's trajectory
figure (:mod:`fieldrl.domains.chemo.report`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from fieldrl.reportkit.figures import stacked_panels
from fieldrl.simulators.chemo import DEATH_FRACTION, DT

TUMOUR_COLOR = "#d62728"
NORMAL_COLOR = "#2ca02c"
DOSE_COLOR = "#1f77b4"
DRUG_COLOR = "#9467bd"
IMMUNE_COLOR = "#ff7f0e"


def snapshot(envs: Any, index: int) -> dict[str, Any]:
    """Patient ``index`` of a :class:`~fieldrl.domains.chemo.env.ChemoEvalEnvs` now: day, tumour and
    normal cells (% of the start), immune cells and drug level (model units), whether the patient died."""
    batch = envs._batch  # the eval envs' own engine: its state is the patient's hidden state
    n, t, i, b = (float(x) for x in batch.state[index])
    n0, t0 = (float(x) for x in batch.init_state[index, :2])
    return {
        "day": float(batch.t[index]) * DT,
        "last_day": float(envs.max_t) * DT,
        "tumour": 100.0 * t / t0,
        "normal": 100.0 * n / n0,
        "immune": i,
        "drug": b,
        "died": bool(n < DEATH_FRACTION * n0),
    }


def _dose(snap: dict[str, Any]) -> float:
    action = snap.get("action")
    if action is None:
        return 0.0
    return float(np.clip(np.asarray(action, dtype=float).reshape(-1)[0], 0.0, 1.0))


def _panels(ax: Any) -> tuple[Any, Any]:
    """The cells panel above and the drug panel below, inside ``ax``."""
    return stacked_panels(ax, upper_from=0.42, lower_height=0.34, xlabel_y=-0.3)


def key(ax: Any, entries: Sequence[tuple[str, str]], x: float = 0.01) -> None:
    """Coloured words naming the lines, in a row at the top of ``ax`` (a legend costs ten times more to
    draw, and a replay draws hundreds of frames)."""
    for label, color in entries:
        ax.text(x, 0.97, label, color=color, fontsize=6, transform=ax.transAxes, va="top")
        x += 0.035 + 0.0145 * len(label)


def draw(ax: Any, history: Sequence[dict[str, Any]], title: str) -> None:
    """The course so far on ``ax`` (split into the cells above and the drug below), its title ``title``."""
    latest = history[-1]
    days = np.array([h["day"] for h in history])
    ax.axis("off")
    ax.set_title(title, fontsize=9, y=1.0)  # a fixed place: placing it anew costs more than the plot
    cells, drug = _panels(ax)
    tumour = np.array([h["tumour"] for h in history])
    normal = np.array([h["normal"] for h in history])
    cells.plot(days, tumour, color=TUMOUR_COLOR, lw=1.3)
    cells.plot(days, normal, color=NORMAL_COLOR, lw=1.3)
    cells.plot(days[-1:], tumour[-1:], "o", color=TUMOUR_COLOR, ms=3)
    cells.plot(days[-1:], normal[-1:], "o", color=NORMAL_COLOR, ms=3)
    cells.axhline(100.0 * DEATH_FRACTION, color="#555555", lw=0.7, ls=":")
    top = max(130.0, 1.15 * float(max(tumour.max(), normal.max())))
    cells.set_ylim(0.0, top)
    cells.set_xlim(0.0, latest["last_day"])
    cells.set_ylabel("% of start", fontsize=7)
    cells.tick_params(labelsize=6, labelbottom=False)
    key(cells, [("tumour", TUMOUR_COLOR), ("normal cells", NORMAL_COLOR), ("death line", "#555555")])
    if latest["died"]:
        cells.text(
            0.98, 0.97, f"died on day {latest['day']:.1f}", transform=cells.transAxes,
            ha="right", va="top", fontsize=7, color=TUMOUR_COLOR, fontweight="bold",
        )  # fmt: skip
    doses = np.array([_dose(h) for h in history])
    # the dose of step s is given over [day(s-1), day(s)): drawn as steps ending at each snapshot
    drug.fill_between(days, doses, step="pre", color=DOSE_COLOR, alpha=0.35, lw=0)
    drug.plot(days, [h["drug"] for h in history], color=DRUG_COLOR, lw=1.0)
    drug.plot(days, [h["immune"] for h in history], color=IMMUNE_COLOR, lw=1.0)
    high = max(1.05, 1.2 * max(max(h["drug"] for h in history), max(h["immune"] for h in history)))
    drug.set_ylim(0.0, high)
    drug.set_xlim(0.0, latest["last_day"])
    drug.set_xlabel("day", fontsize=7)
    drug.set_ylabel("model units", fontsize=7)
    drug.tick_params(labelsize=6)
    key(
        drug,
        [("dose (fraction of max)", DOSE_COLOR), ("drug level", DRUG_COLOR), ("immune cells", IMMUNE_COLOR)],
    )


def divergence(a: dict[str, Any], b: dict[str, Any]) -> float:
    """How far apart the two episodes are now: see ``ChemoDomain.replay_divergence``."""
    return abs(float(a["tumour"]) - float(b["tumour"])) + (100.0 if a["died"] != b["died"] else 0.0)
