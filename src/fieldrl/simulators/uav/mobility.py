"""Vehicles on a Manhattan road grid (seeded, batched over vehicles).

Roads run along ``x = k * spacing`` and ``y = k * spacing`` inside the square area. A vehicle
keeps its speed and heading; at every intersection it turns left or right with probability
``turn_prob`` (else goes straight), and at the edge of the area it turns back into it. This is the
Manhattan mobility model of ETSI TR 101 112 / 3GPP TR 36.885 urban grids, simplified to constant
per-vehicle speeds.
"""

from __future__ import annotations

import numpy as np

#: unit vectors of the four headings: +x, +y, -x, -y
HEADINGS = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0], [0.0, -1.0]])


class RoadGrid:
    """Positions, headings and speeds of ``n`` vehicles on a square road grid.

    :param area: side of the square (m).
    :param spacing: distance between parallel roads (m); the last road is at the largest
        multiple of ``spacing`` not beyond ``area``.
    """

    def __init__(self, area: float, spacing: float):
        self.area = float(area)
        self.spacing = float(spacing)
        self.lines = np.arange(0.0, self.area + 1e-9, self.spacing)
        self.edge = float(self.lines[-1])
        self.pos = np.zeros((0, 2))
        self.heading = np.zeros(0, dtype=np.int64)
        self.speed = np.zeros(0)

    def reset(self, n: int, rng: np.random.Generator, speed_min: float, speed_max: float) -> None:
        """Place ``n`` vehicles uniformly on the roads, heading along their road."""
        horizontal = rng.random(n) < 0.5  # on a road y = const, driving along x
        road = self.lines[rng.integers(len(self.lines), size=n)]
        along = rng.random(n) * self.edge
        self.pos = np.where(horizontal[:, None], np.c_[along, road], np.c_[road, along])
        forward = rng.random(n) < 0.5
        self.heading = np.where(horizontal, np.where(forward, 0, 2), np.where(forward, 1, 3)).astype(np.int64)
        self.speed = rng.uniform(speed_min, speed_max, size=n)

    def velocity(self) -> np.ndarray:
        return HEADINGS[self.heading] * self.speed[:, None]

    def _distance_to_next_node(self) -> np.ndarray:
        """Distance along the heading to the next intersection (or area edge) for every vehicle."""
        coord = np.where(self.heading % 2 == 0, self.pos[:, 0], self.pos[:, 1])
        sign = np.where(self.heading < 2, 1.0, -1.0)
        scaled = coord / self.spacing
        eps = 1e-9
        nxt = np.where(sign > 0, np.floor(scaled + eps) + 1.0, np.ceil(scaled - eps) - 1.0) * self.spacing
        nxt = np.clip(nxt, 0.0, self.edge)
        return np.abs(nxt - coord)

    def _turn(self, idx: np.ndarray, rng: np.random.Generator, turn_prob: float) -> None:
        """New headings at an intersection: straight, else left/right; never out of the area."""
        for i in idx:
            h = int(self.heading[i])
            options = [h] if rng.random() >= turn_prob else [(h + 1) % 4, (h + 3) % 4]
            options = [o for o in options if self._can_go(i, o)] or [
                o for o in ((h + 1) % 4, (h + 3) % 4, (h + 2) % 4) if self._can_go(i, o)
            ]
            self.heading[i] = options[int(rng.integers(len(options)))]

    def _can_go(self, i: int, heading: int) -> bool:
        x, y = self.pos[i]
        step = HEADINGS[heading]
        nx, ny = x + step[0], y + step[1]
        return -1e-6 <= nx <= self.edge + 1e-6 and -1e-6 <= ny <= self.edge + 1e-6

    def step(self, dt: float, rng: np.random.Generator, turn_prob: float) -> None:
        """Advance every vehicle by ``dt`` seconds along the grid."""
        remaining = self.speed * dt
        for _ in range(1000):
            moving = remaining > 1e-9
            if not moving.any():
                break
            to_node = self._distance_to_next_node()
            advance = np.where(moving, np.minimum(remaining, to_node), 0.0)
            self.pos += HEADINGS[self.heading] * advance[:, None]
            self.pos = np.clip(self.pos, 0.0, self.edge)
            remaining -= advance
            at_node = moving & (advance >= to_node - 1e-9)
            if at_node.any():
                self.pos[at_node] = np.round(self.pos[at_node] / self.spacing) * self.spacing
                self._turn(np.flatnonzero(at_node), rng, turn_prob)
