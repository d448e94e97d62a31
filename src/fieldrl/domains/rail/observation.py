"""fieldrl's fast observation builder: vectorised look-ahead along shortest paths.

Per episode it reuses Flatland's distance map (``distance[train, r, c, d]`` = cells to the train's
target) and the network tables of :class:`RailNetwork`. Per call it rolls every train's greedy
shortest path forward ``horizon`` cells for each of its exits (left/forward/right) *at once* with
numpy fancy indexing, and reads an occupancy grid of the trains on the map along those paths:
opposing trains (heading against the path), trains ahead (same heading), the next switch.

Replaces Flatland's ``TreeObsForRailEnv`` (a Python tree search per train per step).

Layout of one observation (``OBS_SIZE`` floats):

* 0-3   decision type one-hot: none, dispatch, route, every-step (monolithic);
* 4-18  the train: max speed, malfunction steps left/50, off map, moving, stopped/malfunction,
  distance to target / max steps, slack to the timetable / max steps, time / max steps,
  start cell occupied, trains on map / all, arrived / all, deadlocked / all, trains / 100,
  cancelled / all, departed before / all;
* 19-42 for each exit (left, forward, right): allowed, extra distance via it vs the best exit / 10,
  opposing trains within the horizon / 5, cells to the first opposing train / horizon (1 if none),
  trains ahead / 5, cells to the first train ahead / horizon, cells to the next switch / horizon,
  distance to target via it / max steps.
"""

from __future__ import annotations

import numpy as np

from fieldrl.domains.rail.network import DC, DR, TURNS, RailNetwork

OWN = 19
PER_OPTION = 8
OBS_SIZE = OWN + 3 * PER_OPTION
INF = 10**6


class PathLookahead:
    """Greedy shortest paths of many (train, start configuration) pairs, rolled forward together."""

    def __init__(self, net: RailNetwork, distance: np.ndarray, horizon: int = 40):
        self.net = net
        self.horizon = horizon
        h, w = net.height, net.width
        # pad the distance map by one cell on every side so neighbours never index out of bounds
        dist = np.full((distance.shape[0], h + 2, w + 2, 4), INF, dtype=np.int64)
        finite = np.where(np.isfinite(distance), distance, INF).astype(np.int64)
        dist[:, 1:-1, 1:-1, :] = finite
        self.dist = dist
        trans = np.zeros((h + 2, w + 2, 4, 4), dtype=bool)
        trans[1:-1, 1:-1] = net.trans
        self.trans = trans
        choice = np.zeros((h + 2, w + 2, 4), dtype=bool)
        choice[1:-1, 1:-1] = net.choice
        self.choice = choice

    def distance(self, train: np.ndarray, r: np.ndarray, c: np.ndarray, d: np.ndarray) -> np.ndarray:
        return self.dist[train, r + 1, c + 1, d]

    def roll(
        self, train: np.ndarray, r: np.ndarray, c: np.ndarray, d: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Paths starting *at* configurations ``(r, c, d)``: rows, cols, headings, valid; each ``(M, K)``."""
        m, k = len(train), self.horizon
        rows = np.zeros((m, k), dtype=np.int64)
        cols = np.zeros((m, k), dtype=np.int64)
        heads = np.zeros((m, k), dtype=np.int64)
        valid = np.zeros((m, k), dtype=bool)
        pr, pc, pd = r + 1, c + 1, d.copy()
        alive = np.ones(m, dtype=bool)
        four = np.arange(4)
        for step in range(k):
            rows[:, step], cols[:, step], heads[:, step] = pr - 1, pc - 1, pd
            valid[:, step] = alive
            at_target = self.dist[train, pr, pc, pd] == 0
            alive &= ~at_target
            nr = pr[:, None] + DR[None, :]
            nc = pc[:, None] + DC[None, :]
            np.clip(nr, 0, self.dist.shape[1] - 1, out=nr)
            np.clip(nc, 0, self.dist.shape[2] - 1, out=nc)
            cand = self.dist[train[:, None], nr, nc, four[None, :]]
            cand = np.where(self.trans[pr, pc, pd], cand, INF)
            best = cand.argmin(axis=1)
            alive &= cand[np.arange(m), best] < INF
            pr = np.where(alive, nr[np.arange(m), best], pr)
            pc = np.where(alive, nc[np.arange(m), best], pc)
            pd = np.where(alive, best, pd)
        return rows, cols, heads, valid


def _first(mask: np.ndarray, horizon: int) -> np.ndarray:
    """Index of the first True per row, ``horizon`` where there is none."""
    has = mask.any(axis=1)
    return np.where(has, mask.argmax(axis=1), horizon)


def option_features(
    look: PathLookahead,
    train: np.ndarray,
    r: np.ndarray,
    c: np.ndarray,
    d: np.ndarray,
    occ_train: np.ndarray,
    occ_head: np.ndarray,
    max_steps: int,
) -> np.ndarray:
    """Features ``(M, PER_OPTION - 2)`` of the paths starting at ``(r, c, d)`` for ``train``.

    Returns: opposing count, first opposing, ahead count, first ahead, next switch, distance via.
    """
    k = look.horizon
    rows, cols, heads, valid = look.roll(train, r, c, d)
    other = occ_train[rows, cols]
    other_head = occ_head[rows, cols]
    present = valid & (other >= 0) & (other != train[:, None])
    exit_head = np.concatenate([heads[:, 1:], heads[:, -1:]], axis=1)
    exit_head = np.where(np.concatenate([valid[:, 1:], valid[:, -1:]], axis=1), exit_head, heads)
    opposing = present & (other_head == (exit_head + 2) % 4)
    ahead = present & (other_head == heads)
    switch = valid & look.choice[rows + 1, cols + 1, heads]
    switch[:, 0] = False
    dist = look.distance(train, r, c, d)
    out = np.empty((len(train), 6), dtype=np.float32)
    out[:, 0] = opposing.sum(axis=1) / 5.0
    out[:, 1] = _first(opposing, k) / k
    out[:, 2] = ahead.sum(axis=1) / 5.0
    out[:, 3] = _first(ahead, k) / k
    out[:, 4] = _first(switch, k) / k
    out[:, 5] = np.minimum(dist, 4 * max_steps) / max_steps
    return out


def build_observations(
    look: PathLookahead,
    configs: np.ndarray,
    on_map: np.ndarray,
    occ_train: np.ndarray,
    occ_head: np.ndarray,
    own: np.ndarray,
    max_steps: int,
) -> np.ndarray:
    """Observations of all trains: ``configs[i] = (r, c, d)`` (current, or initial if off map).

    :param own: ``(n, OWN)`` the per-train part (decision one-hot and scalars), filled by the env.
    :return: ``(n, OBS_SIZE)`` float32.
    """
    n = len(configs)
    obs = np.zeros((n, OBS_SIZE), dtype=np.float32)
    obs[:, :OWN] = own
    r, c, d = configs[:, 0], configs[:, 1], configs[:, 2]
    idx = np.arange(n)
    # exits: on the map, each allowed turn leads into a neighbour cell; off the map the train
    # enters at its start configuration, which is the only ("forward") option
    starts_r, starts_c, starts_d, owner, slot, allowed = [], [], [], [], [], np.zeros((n, 3), dtype=bool)
    for j, t in enumerate(TURNS):
        d_out = (d + t) % 4
        ok = look.trans[r + 1, c + 1, d, d_out] & on_map
        ok_off = ~on_map if j == 1 else np.zeros(n, dtype=bool)
        allowed[:, j] = ok | ok_off
        starts_r.append(np.where(on_map, r + DR[d_out], r))
        starts_c.append(np.where(on_map, c + DC[d_out], c))
        starts_d.append(np.where(on_map, d_out, d))
        owner.append(idx)
        slot.append(np.full(n, j))
    sr, sc, sd = (np.clip(np.concatenate(x), 0, None) for x in (starts_r, starts_c, starts_d))
    sr = np.minimum(sr, look.net.height - 1)
    sc = np.minimum(sc, look.net.width - 1)
    tr = np.concatenate(owner)
    feats = option_features(look, tr, sr, sc, sd, occ_train, occ_head, max_steps)
    feats = feats.reshape(3, n, 6).transpose(1, 0, 2)
    via = feats[:, :, 5] * max_steps
    via = np.where(allowed, via, np.inf)
    best = via.min(axis=1, keepdims=True)
    extra = np.where(allowed, np.minimum(via - best, 50.0) / 10.0, 0.0)
    for j in range(3):
        base = OWN + j * PER_OPTION
        obs[:, base] = allowed[:, j]
        obs[:, base + 1] = extra[:, j]
        obs[:, base + 2 : base + 8] = np.where(allowed[:, j : j + 1], feats[:, j, :], 0.0)
    return obs
