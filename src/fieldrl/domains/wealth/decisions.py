"""Words for decision differences in goals-based wealth management, and the choices the engine reads.

The observation's layout is :mod:`fieldrl.domains.wealth.env`'s: a head of nine entries, a block per
upcoming goal, with inflation two more entries, and with ``goal_gap`` two more after those.
"""

from __future__ import annotations

from typing import Any

import numpy as np

HEAD = [
    "years elapsed (share of the horizon)",
    "wealth / starting wealth",
    "ln(starting wealth) / 10",
    "infusion / starting wealth",
    "horizon (years / 20)",
    "lowest mean return",
    "highest mean return",
    "lowest volatility",
    "highest volatility",
]
PRICES = ["price index", "last year's inflation x 10"]
GAP = ["ln(wealth / next goal's cost)", "that gap / (volatility x sqrt(years to it + 1))"]


def features(envs: Any, n_features: int) -> list[str]:
    levels = int(envs.n_options) - 1
    block = 2 + 2 * levels
    priced = envs.inflation is not None
    gap = GAP if envs.goal_gap else []
    goals = (n_features - len(HEAD) - (len(PRICES) if priced else 0) - len(gap)) // block
    names = list(HEAD)
    for g in range(1, goals + 1):
        names += [f"goal {g} ahead", f"years to goal {g} (share)"]
        for j in range(1, levels + 1):
            names += [f"goal {g} level {j} cost / starting wealth", f"goal {g} level {j} utility / 20"]
    return names + (PRICES if priced else []) + gap


def action_words(envs: Any) -> list[str]:
    return ["goal level", "portfolio"]


def effective_actions(envs: Any, actions: np.ndarray) -> np.ndarray:
    """A goal level the engine would not take (none due, or unaffordable) made 0, as ``step`` does."""
    a = np.array(actions, dtype=np.int64).reshape(envs.n, 2)
    for g in envs.groups:
        b, p, rows = g.batch, g.problem, g.rows
        if b.done.all():
            continue
        option = np.clip(a[rows, 0], 0, p.n_options - 1)
        a[rows, 0] = np.where(b.feasible()[np.arange(len(rows)), option], option, 0)
        a[rows, 1] = np.clip(a[rows, 1], 0, p.k - 1)
    return a
