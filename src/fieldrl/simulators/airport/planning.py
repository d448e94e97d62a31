"""Space-time planning on the airport surface: reservation table, A* in the time-expanded graph, CBS.

Written here because no maintained Python library plans on a time-expanded graph with this
engine's conflict rules (separation balls, head-on segments, runway windows); the A* itself is
the textbook one (``heapq``), admissible with the static shortest-path distance as heuristic.

A plan is a list of positions, ``plan[k]`` being the aircraft's position at time ``t0 + k``,
ending at the goal node (where the aircraft leaves the surface). A plan that passes the
checks below causes none of the engine's conflicts with any reserved plan:

* separation: no reserved aircraft in a cell closer than ``separation`` at the same time;
* head-on: no reserved aircraft inside the same segment in the other direction at the same
  time, and no swap of two cells in one step;
* runway: not on a runway cell while the runway is active (known landing windows, committed
  take-offs, and take-offs the table has reserved for planned departures);
* take-off: a departure reaches its line-up point only at a time ``t`` such that
  ``[t, t + roll)`` overlaps no landing, no take-off and no reserved crossing of its runway,
  so the engine's take-off starts exactly then.
"""

from __future__ import annotations

import heapq
import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from fieldrl.simulators.airport.engine import SurfaceSim
from fieldrl.simulators.airport.layout import UNREACHABLE, Surface


@dataclass
class Reservations:
    """Who is where when, for every plan committed so far (times are absolute steps)."""

    cells: dict[int, dict[int, int]] = field(default_factory=dict)  # t -> cell -> aircraft
    edges: dict[int, dict[int, set[int]]] = field(default_factory=dict)  # t -> segment -> directions
    hops: set[tuple[int, int, int]] = field(default_factory=set)  # (t, cell from, cell to), arriving at t
    crossings: dict[int, set[int]] = field(default_factory=dict)  # runway -> times on its cells
    takeoffs: dict[int, list[tuple[int, int]]] = field(default_factory=dict)  # runway -> [start, end)

    def add(self, s: Surface, plan: list[int], t0: int, owner: int, roll: int, departure_runway: int) -> None:
        for k, p in enumerate(plan):
            t = t0 + k
            c = int(s.pos_cell[p])
            self.cells.setdefault(t, {})[c] = owner
            e = int(s.pos_edge[p])
            if e >= 0:
                self.edges.setdefault(t, {}).setdefault(e, set()).add(int(s.pos_dir[p]))
            r = int(s.cell_runway[c])
            if r >= 0:
                self.crossings.setdefault(r, set()).add(t)
            if k > 0 and plan[k - 1] != p:
                self.hops.add((t, int(s.pos_cell[plan[k - 1]]), c))
        if departure_runway >= 0:
            end = t0 + len(plan) - 1
            self.takeoffs.setdefault(departure_runway, []).append((end, end + roll))

    def prune(self, before: int) -> None:
        for t in [t for t in self.cells if t < before]:
            del self.cells[t]
        for t in [t for t in self.edges if t < before]:
            del self.edges[t]
        self.hops = {h for h in self.hops if h[0] >= before}


def runway_busy(sim: SurfaceSim, res: Reservations, r: int, t: int, owner: int) -> bool:
    """True if runway ``r`` is active at ``t`` (engine windows or reserved take-offs)."""
    if sim.runway_active(r, t, exclude=owner):
        return True
    return any(a <= t < b for a, b in res.takeoffs.get(r, ()))


def takeoff_free(sim: SurfaceSim, res: Reservations, r: int, t: int, owner: int) -> bool:
    """True if a take-off roll ``[t, t + roll)`` on ``r`` meets no landing, take-off or crossing."""
    roll = sim.cfg.roll_steps
    for a, b, o in sim.windows[r]:
        if o != owner and a < t + roll and t < b:
            return False
    if any(a < t + roll and t < b for a, b in res.takeoffs.get(r, ())):
        return False
    crossing = res.crossings.get(r, set())
    return not any(u in crossing for u in range(t, t + roll))


Constraint = Callable[[int, int, int], bool]  # (position before, position after, time after) -> forbidden


def plan_path(
    sim: SurfaceSim,
    res: Reservations,
    owner: int,
    start: int,
    goal: int,
    t0: int,
    max_expansions: int = 30000,
    extra_wait: int = 400,
    forbidden: Constraint | None = None,
    deadline: float | None = None,
) -> list[int] | None:
    """Shortest conflict-free plan from ``start`` at ``t0`` to ``goal`` (None if none found in the limits).

    :param forbidden: extra constraints (CBS); returns True for a forbidden move.
    :param deadline: ``time.perf_counter()`` value after which the search gives up.
    """
    s = sim.s
    dist = s.dist_to(goal)
    if dist[start] >= UNREACHABLE:
        return None
    m = sim.movements[owner]
    dep_runway = m.runway if m.departure else -1
    t_max = t0 + int(dist[start]) + extra_wait
    counter = itertools.count()
    heap = [(int(dist[start]), 0, next(counter), start, t0)]
    parent: dict[tuple[int, int], tuple[int, int] | None] = {(start, t0): None}
    expansions = 0
    while heap:
        _, _, _, p, t = heapq.heappop(heap)
        if p == goal:
            path = []
            node: tuple[int, int] | None = (p, t)
            while node is not None:
                path.append(node[0])
                node = parent[node]
            return path[::-1]
        expansions += 1
        if expansions > max_expansions or t >= t_max:
            continue
        if deadline is not None and expansions % 256 == 0 and time.perf_counter() > deadline:
            return None
        t1 = t + 1
        cells1 = res.cells.get(t1, {})
        edges1 = res.edges.get(t1, {})
        c0 = int(s.pos_cell[p])
        moves = [p] + [q for _, q in s.successors(p, goal) if dist[q] < UNREACHABLE]
        for q in moves:
            if (q, t1) in parent:
                continue
            c = int(s.pos_cell[q])
            if any(cells1.get(int(cc), owner) != owner for cc in s.ball[c]):
                continue
            e = int(s.pos_edge[q])
            if e >= 0 and (edges1.get(e, set()) - {int(s.pos_dir[q])}):
                continue
            if q != p and (t1, c, c0) in res.hops:
                continue
            r = int(s.cell_runway[c])
            if r >= 0 and runway_busy(sim, res, r, t1, owner):
                continue
            if q == goal and dep_runway >= 0 and not takeoff_free(sim, res, dep_runway, t1, owner):
                continue
            if forbidden is not None and forbidden(p, q, t1):
                continue
            parent[(q, t1)] = (p, t)
            g = t1 - t0
            heapq.heappush(heap, (g + int(dist[q]), -g, next(counter), q, t1))
    return None


def action_towards(s: Surface, p: int, q: int, goal: int) -> int:
    """The action that moves from position ``p`` to ``q`` (0 if ``q == p`` or not adjacent)."""
    if q == p:
        return 0
    for a, nq in s.successors(p, goal):
        if nq == q:
            return a
    return 0
