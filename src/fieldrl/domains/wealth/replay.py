"""The wealth replay (``fieldrl replay``): one investor's wealth, year by year, against the goals.

Top: wealth at the start of each year (before that year's goal), and each goal at the year it falls
due, one tick per level at its cost (where goal costs inflate: at the prices of its year, or today's
for a goal still ahead): green where a level was taken, red where a goal due has passed untaken, grey
where it is still ahead. Bottom: the portfolio chosen each year (0 is the safest of the frontier, the
highest the riskiest).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from fieldrl.reportkit.figures import stacked_panels

WEALTH_COLOR = "#1f77b4"
TAKEN_COLOR = "#2ca02c"
MISSED_COLOR = "#d62728"
AHEAD_COLOR = "#8c8c8c"
PORTFOLIO_COLOR = "#ff7f0e"


def snapshot(envs: Any, index: int) -> dict[str, Any]:
    """Investor ``index`` of a :class:`~fieldrl.domains.wealth.envs.WealthEvalEnvs` now: the year,
    wealth, utility so far, the problem's goals (time and levels as ``[cost, utility]``) and the level
    of each taken (0: none), the price index and the number of portfolios."""
    group = next(g for g in envs.groups if index in g.rows)
    row = int(np.flatnonzero(group.rows == index)[0])
    batch, problem = group.batch, group.problem
    return {
        "year": int(batch.t[row]),
        "horizon": int(problem.T),
        "W0": float(problem.W0),
        "wealth": float(batch.wealth[row]),
        "utility": float(batch.utility[row]),
        "price_index": float(batch.price_index[row]),
        "portfolios": int(problem.k),
        "goals": [[int(g.time), [[float(c), float(u)] for c, u in g.levels]] for g in problem.goals],
        "taken": [int(level) for level in batch.goals_taken[row]],
    }


def _portfolio(snap: dict[str, Any]) -> float:
    action = snap.get("action")
    if action is None:
        return float("nan")
    chosen = float(np.asarray(action, dtype=float).reshape(-1)[1])
    return float(np.clip(chosen, 0, snap["portfolios"] - 1))


def _panels(ax: Any) -> tuple[Any, Any]:
    """The wealth panel above and the portfolio panel below, inside ``ax``."""
    return stacked_panels(ax, upper_from=0.36, lower_height=0.26, xlabel_y=-0.38)


def draw(ax: Any, history: Sequence[dict[str, Any]], title: str) -> None:
    """Wealth so far against the goals on ``ax`` (the portfolios chosen below), titled ``title``."""
    latest = history[-1]
    horizon, w0 = latest["horizon"], latest["W0"]
    ax.axis("off")
    ax.set_title(title, fontsize=9, y=1.0)  # a fixed place: placing it anew costs more than the plot
    money, risk = _panels(ax)
    years = [h["year"] for h in history]
    wealth = [h["wealth"] for h in history]
    money.plot(years, wealth, "o-", color=WEALTH_COLOR, lw=1.3, ms=3, label="wealth")
    top = max(wealth)
    ended = latest["year"] >= horizon
    # a goal is paid at the prices of its year; one still ahead is shown at today's
    prices = {h["year"]: h["price_index"] for h in history}
    for (time, levels), taken in zip(latest["goals"], latest["taken"], strict=True):
        for level, (cost, _) in enumerate(levels, start=1):
            due = time < latest["year"] or ended
            shown = cost * prices.get(time, latest["price_index"])
            if taken == level:
                color, width = TAKEN_COLOR, 2.5
            elif taken:  # another level of this goal was taken
                color, width = AHEAD_COLOR, 0.8
            else:
                color, width = (MISSED_COLOR if due else AHEAD_COLOR), 1.2
            money.hlines(shown, time - 0.35, time + 0.35, color=color, lw=width)
            top = max(top, shown)
    reached = sum(1 for level in latest["taken"] if level > 0)
    said = f"goals reached {reached} of {len(latest['goals'])}, utility {latest['utility']:.3g}"
    money.text(0.02, 0.96, said, transform=money.transAxes, va="top", fontsize=7)
    for x, label, color in (
        (0.6, "goal taken", TAKEN_COLOR),
        (0.76, "missed", MISSED_COLOR),
        (0.87, "ahead", AHEAD_COLOR),
    ):
        money.text(x, 0.96, label, color=color, fontsize=6, transform=money.transAxes, va="top")
    money.set_xlim(-0.6, horizon + 0.6)
    money.set_ylim(0.0, 1.12 * top if top > 0 else 1.0)
    money.set_ylabel(f"wealth (W0 = {w0:.3g})", fontsize=7)
    money.tick_params(labelsize=6, labelbottom=False)
    chosen = [_portfolio(h) for h in history[1:]]
    if chosen:  # the portfolio of year y is chosen at y and held until y + 1
        risk.step(years[:-1], chosen, where="post", color=PORTFOLIO_COLOR, lw=1.3)
        risk.plot(years[len(chosen) - 1 : len(chosen)], chosen[-1:], "o", color=PORTFOLIO_COLOR, ms=3)
    risk.set_ylim(-0.5, latest["portfolios"] - 0.5)
    risk.set_xlim(-0.6, horizon + 0.6)
    risk.set_xlabel("year", fontsize=7)
    risk.set_ylabel("portfolio\n(0 safest)", fontsize=7)
    risk.tick_params(labelsize=6)


def divergence(a: dict[str, Any], b: dict[str, Any]) -> float:
    """How far apart the two episodes are now: see ``WealthDomain.replay_divergence``."""
    goals = abs(sum(1 for x in a["taken"] if x > 0) - sum(1 for x in b["taken"] if x > 0))
    wealth = abs(float(a["wealth"]) - float(b["wealth"])) / float(a["W0"])
    return abs(float(a["utility"]) - float(b["utility"])) + goals + 0.1 * wealth
