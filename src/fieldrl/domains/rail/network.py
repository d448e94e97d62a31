"""The rail network as numpy tables, built once per episode for fast look-ahead.

Flatland configurations are ``((row, col), heading)`` with headings 0=N, 1=E, 2=S, 3=W; a train
heading ``d`` in a cell may leave in every direction ``d'`` whose transition bit is set, entering the
neighbour cell with heading ``d'``. Left/forward/right are ``d-1``, ``d``, ``d+1`` (mod 4).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # loaded where used: checking a scenario needs none of this
    from flatland.envs.rail_env import RailEnv

DR = np.array([-1, 0, 1, 0])
DC = np.array([0, 1, 0, -1])
#: routing options in order: left, forward, right -> heading offset
TURNS = (-1, 0, 1)


class RailNetwork:
    """Transition table ``trans[r, c, d, d']`` and the cells where a train has a real choice.

    :param env: a reset Flatland ``RailEnv``.
    """

    def __init__(self, env: RailEnv):
        self.height, self.width = env.height, env.width
        trans = np.zeros((self.height, self.width, 4, 4), dtype=bool)
        rows, cols = np.nonzero(env.rail.grid)
        for r, c in zip(rows.tolist(), cols.tolist(), strict=True):
            for d in range(4):
                trans[r, c, d] = env.rail.get_transitions(((r, c), d))
        self.trans = trans
        self.n_out = trans.sum(axis=3)
        #: a routing decision exists where a train heading d can leave by more than one exit
        self.choice = self.n_out > 1

    def options(self, r: int, c: int, d: int) -> np.ndarray:
        """Booleans for (left, forward, right): which turns the rail allows from ``(r, c)`` heading ``d``."""
        return np.array([self.trans[r, c, d, (d + t) % 4] for t in TURNS])

    def next_config(self, r: int, c: int, d_out: int) -> tuple[int, int, int]:
        return r + int(DR[d_out]), c + int(DC[d_out]), d_out

    def turn_to(self, r: int, c: int, d: int, target: tuple[int, int]) -> int | None:
        """Index (0 left, 1 forward, 2 right) of the exit from ``(r, c, d)`` into cell ``target``."""
        for i, t in enumerate(TURNS):
            d_out = (d + t) % 4
            if self.trans[r, c, d, d_out] and (r + DR[d_out], c + DC[d_out]) == tuple(target):
                return i
        return None
