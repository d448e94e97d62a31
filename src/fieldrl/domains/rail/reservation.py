"""Directed-edge reservations along planned paths: the dispatchers' rule and the env's shield.

A train that departs reserves every cell-to-cell edge of its planned path and frees them as it
passes. A path *conflicts* when some other train holds one of its edges in the opposite direction:
two such trains would meet head-on on a single track, the way Flatland deadlocks form.

:class:`EpisodePlan` is that bookkeeping for one episode. The deadlock-avoiding and priority
dispatchers (:mod:`fieldrl.domains.rail.heuristics`) decide with it; :class:`Shield` lets a learned
policy decide while the same rule masks the departures and exits that would create a head-on
conflict (shielded RL: Alshiekh et al., "Safe Reinforcement Learning via Shielding", AAAI 2018),
and :meth:`Shield.advice` says what the priority dispatcher would decide in the learned policy's
own state (the env's ``advice`` observation: a learned policy anchored on the dispatcher).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from fieldrl.domains.rail.actions import CANCEL, DEPART, DISPATCH, HOLD, LEFT, NOOP, ROUTE
from fieldrl.domains.rail.network import DC, DR, TURNS

if TYPE_CHECKING:
    from fieldrl.domains.rail.env import RailParallelEnv

Cell = tuple[int, int]


def greedy_path(env: RailParallelEnv, i: int, start: tuple[int, int, int] | None = None) -> list[Cell]:
    """Cells of train ``i``'s shortest path from ``start`` (default: its origin), by the distance map."""
    r, c, d = (int(x) for x in (env.initial[i] if start is None else start))
    dist = env.fl.distance_map.get()[i]
    cells = [(r, c)]
    for _ in range(4 * (env.net.height + env.net.width) + 50):
        if dist[r, c, d] == 0:
            break
        best, best_d = None, np.inf
        for d_out in range(4):
            if env.net.trans[r, c, d, d_out]:
                value = dist[r + DR[d_out], c + DC[d_out], d_out]
                if value < best_d:
                    best, best_d = d_out, value
        if best is None or not np.isfinite(best_d):
            break
        r, c, d = r + int(DR[best]), c + int(DC[best]), best
        cells.append((r, c))
    return cells


def k_paths(env: RailParallelEnv, i: int, k: int) -> list[list[Cell]]:
    """Up to ``k`` shortest paths of train ``i`` (Flatland's k-shortest-paths search), shortest first."""
    from flatland.envs.rail_env_shortest_paths import get_k_shortest_paths

    if k == 1:
        return [greedy_path(env, i)]
    agent = env.fl.agents[i]
    (pos, d) = agent.initial_configuration
    target = next(iter(agent.targets))[0]
    found = get_k_shortest_paths(None, pos, d, target, k=k, rail=env.fl.rail)
    paths = [[tuple(w.position) for w in p] for p in found]
    return paths or [greedy_path(env, i)]


def edges(path: list[Cell]) -> list[tuple[Cell, Cell]]:
    return list(zip(path[:-1], path[1:], strict=True))


def start_free(env: RailParallelEnv, i: int) -> bool:
    """True if no train stands on train ``i``'s origin cell."""
    start = (int(env.initial[i][0]), int(env.initial[i][1]))
    return all((conf := env.config(j)) is None or conf[:2] != start for j in range(env.n))


class EpisodePlan:
    """Planned paths, progress along them and the directed-edge reservations of one episode."""

    def __init__(self, env: RailParallelEnv):
        self.env = env
        self.path: dict[int, list[Cell]] = {}
        self.at: dict[int, int] = {}
        self.reserved: Counter[tuple[Cell, Cell]] = Counter()

    def copy(self) -> EpisodePlan:
        """An independent plan with the same paths, progress and reservations."""
        twin = EpisodePlan(self.env)
        twin.path = {i: list(p) for i, p in self.path.items()}
        twin.at = dict(self.at)
        twin.reserved = Counter(self.reserved)
        return twin

    def reserve(self, i: int, path: list[Cell]) -> None:
        self.path[i], self.at[i] = path, 0
        self.reserved.update(edges(path))

    def release(self, i: int, upto: int) -> None:
        """Free train ``i``'s edges before path index ``upto`` (all of them if ``upto`` is past the end)."""
        path, start = self.path[i], self.at[i]
        for e in edges(path[start : min(upto, len(path) - 1) + 1]):
            self.reserved[e] -= 1
            if self.reserved[e] <= 0:
                del self.reserved[e]
        self.at[i] = upto

    def drop(self, i: int) -> None:
        """Forget train ``i``'s plan and free what it still holds."""
        if i in self.path:
            self.release(i, len(self.path[i]))
            del self.path[i], self.at[i]

    def update(self) -> None:
        """Follow each planned train along its path; drop trains that arrived or left their path."""
        from flatland.envs.step_utils.states import TrainState

        env = self.env
        for i in list(self.path):
            if env.state(i) == TrainState.DONE:
                self.drop(i)
                continue
            conf = env.config(i)
            if conf is None:
                continue
            cell, path, at = (conf[0], conf[1]), self.path[i], self.at[i]
            if path[at] == cell:
                continue
            try:
                j = path.index(cell, at)
            except ValueError:  # off its plan: keep nothing reserved
                self.drop(i)
                continue
            self.release(i, j)

    def conflicts(self, path: list[Cell], ignore: int | None = None) -> bool:
        """True if some train (other than ``ignore``) holds an edge of ``path`` in the opposite direction."""
        own: Counter[tuple[Cell, Cell]] = Counter()
        if ignore is not None and ignore in self.path:
            own.update(edges(self.path[ignore][self.at[ignore] :]))
        return any(self.reserved[(b, a)] - own[(b, a)] > 0 for a, b in edges(path))

    def next_cell(self, i: int) -> Cell | None:
        if i not in self.path:
            return None
        path, at = self.path[i], self.at[i]
        return path[at + 1] if at + 1 < len(path) else None


def slack_key(env: RailParallelEnv, i: int, shortest: int) -> tuple[float, int]:
    """Release order "least timetable slack first": steps to spare if train ``i`` left now on a
    path of ``shortest`` cells (ties by train number)."""
    agent = env.fl.agents[i]
    travel = shortest / float(agent.speed_counter.max_speed)
    return agent.latest_arrival - env.fl._elapsed_steps - travel, i


def release_decisions(
    env: RailParallelEnv,
    plan: EpisodePlan,
    candidates: Callable[[int], list[list[Cell]]],
    priority: Callable[[int], tuple[float, ...]],
    cancel_late: bool,
) -> tuple[dict[int, int], dict[int, list[Cell]]]:
    """The reservation dispatchers' decisions for the trains waiting to depart, and the path of
    each departure (not yet reserved in ``plan``).

    In ``priority`` order, a train that could no longer arrive before the step limit is cancelled
    (with ``cancel_late``), one whose origin is occupied or whose every candidate path meets a
    reservation head-on is held, and the others depart on their first free path, each such path
    counting as reserved when the next train is checked.
    """
    out: dict[int, int] = {}
    chosen: dict[int, list[Cell]] = {}
    taken: Counter[tuple[Cell, Cell]] = Counter()
    t = env.fl._elapsed_steps
    for i in sorted((int(i) for i in np.flatnonzero(env.pending == DISPATCH)), key=priority):
        paths = candidates(i)
        speed = float(env.fl.agents[i].speed_counter.max_speed)
        if cancel_late and t + len(paths[0]) / speed + 1 > env.max_steps:
            out[i] = CANCEL
            continue
        free = None
        if start_free(env, i):
            free = next(
                (p for p in paths if not plan.conflicts(p) and not any(taken[(b, a)] for a, b in edges(p))),
                None,
            )
        if free is None:
            out[i] = HOLD
            continue
        taken.update(edges(free))
        chosen[i] = free
        out[i] = DEPART
    return out, chosen


def shortest_turn(env: RailParallelEnv, i: int) -> int:
    """Train ``i``'s exit at a switch nearest its target."""
    return LEFT + int(np.argmin(env.option_distances(i)))


def planned_turn(env: RailParallelEnv, plan: EpisodePlan, i: int) -> int:
    """Train ``i``'s exit at a switch: towards the next cell of its plan, else the one nearest its target."""
    nxt, conf = plan.next_cell(i), env.config(i)
    turn = env.net.turn_to(*conf, nxt) if (nxt is not None and conf is not None) else None
    return LEFT + turn if turn is not None else shortest_turn(env, i)


class Shield:
    """Masks a learned policy's departures and exits that the reservation rule forbids.

    * A train may depart only if its origin cell is free and one of its ``k`` shortest paths
      conflicts with no reservation; departing reserves the first such path.
    * At a switch it may take its planned exit, or another exit whose shortest continuation
      conflicts with no other train's reservation (it is then re-planned along that one); it may
      always stop.
    """

    def __init__(self, env: RailParallelEnv, k: int):
        self.env = env
        self.k = k
        self.plan = EpisodePlan(env)
        self._candidates: dict[int, list[list[Cell]]] = {}

    def departure_path(self, i: int) -> list[Cell] | None:
        env = self.env
        if not start_free(env, i):
            return None
        return next((p for p in self.candidates(i) if not self.plan.conflicts(p, ignore=i)), None)

    def exit_paths(self, i: int) -> list[list[Cell] | None]:
        """Per exit (left, forward, right): the path it commits train ``i`` to, None if forbidden.

        The planned exit's path is the plan itself (an empty list: nothing changes).
        """
        env = self.env
        conf = env.config(i)
        out: list[list[Cell] | None] = [None, None, None]
        if conf is None:
            return out
        r, c, d = conf
        planned = self.plan.next_cell(i)
        dist = env.fl.distance_map.get()[i]
        for j, t in enumerate(TURNS):
            d_out = (d + t) % 4
            if not env.net.trans[r, c, d, d_out]:
                continue
            nr, nc = r + int(DR[d_out]), c + int(DC[d_out])
            if planned == (nr, nc):
                out[j] = []
                continue
            if not np.isfinite(dist[nr, nc, d_out]):
                continue
            path = [(r, c), *greedy_path(env, i, (nr, nc, d_out))]
            if not self.plan.conflicts(path, ignore=i):
                out[j] = path
        return out

    def candidates(self, i: int) -> list[list[Cell]]:
        """Train ``i``'s ``k`` shortest paths from its origin (computed once per episode)."""
        if i not in self._candidates:
            self._candidates[i] = k_paths(self.env, i, self.k)
        return self._candidates[i]

    def advice(self) -> np.ndarray:
        """What the priority dispatcher (``priority-reroute`` with its defaults: least slack first,
        ``k`` paths, late trains cancelled) decides for every pending decision, from this plan.

        One action per train (``NOOP`` where nothing is pending), decided as the dispatcher decides
        (:func:`release_decisions`, :func:`planned_turn`), so a policy that always takes the advice
        runs the dispatcher's episode (tested).
        """
        env = self.env
        out = np.full(env.n, NOOP, dtype=np.int64)
        decided, _ = release_decisions(
            env, self.plan, self.candidates, lambda i: slack_key(env, i, len(self.candidates(i)[0])), True
        )
        for i, action in decided.items():
            out[i] = action
        for i in np.flatnonzero(env.pending == ROUTE):
            out[i] = planned_turn(env, self.plan, int(i))
        return out

    def depart(self, i: int) -> bool:
        """Reserve a departure path for train ``i``; False if none is free any more."""
        path = self.departure_path(i)
        if path is None:
            return False
        self.plan.drop(i)
        self.plan.reserve(i, path)
        return True

    def take_exit(self, i: int, j: int) -> bool:
        """Commit train ``i`` to exit ``j`` (re-planning if it is not the planned one); False if forbidden."""
        path = self.exit_paths(i)[j]
        if path is None:
            return False
        if path:
            self.plan.drop(i)
            self.plan.reserve(i, path)
        return True
