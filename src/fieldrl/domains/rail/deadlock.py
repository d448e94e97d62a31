"""Which trains can never move again, as Flatland moves trains.

Flatland's motion check (``flatland.envs.agent_chains.MotionCheck``, Flatland 4) moves a closed
circle of three or more trains at once when each wants the cell the next one leaves: nobody has to
go first. Only two trains that want each other's cells (a head-on meeting on single track) block
each other for good. So a train is deadlocked when it can never move: none of the exits it may
still take leads to a free cell, to a train that will move, or round such a circle.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import islice

#: circles examined at most per call (stuck clusters are small; this bounds a pathological one)
MAX_CIRCLES = 10_000


def deadlocked(
    blockers: Sequence[list[int] | None],
) -> set[int]:
    """Trains stuck for good.

    :param blockers: per train, ``None`` if it is off the map or done (never deadlocked), else the
        train occupying the next cell of *each* exit the train may still take (``-1`` where that
        cell is free). Deadlocked: head-on pairs and the trains queued behind them, never a circle
        of three or more (Flatland rotates it), nor a train that can follow one.
    """
    on_map = {i for i, b in enumerate(blockers) if b is not None and b}
    movable = {i for i, b in enumerate(blockers) if b is not None and (not b or -1 in b)}
    movable |= {j for i in on_map for j in blockers[i] or () if j >= 0 and j not in on_map}
    while True:
        grown = _follow(blockers, on_map, movable)
        circle = _circle(blockers, on_map - movable)
        if not grown and not circle:
            return on_map - movable
        movable |= circle


def _follow(blockers: Sequence[list[int] | None], on_map: set[int], movable: set[int]) -> bool:
    """Add every train that can follow a movable one (in place); True if any was added."""
    added = False
    changed = True
    while changed:
        changed = False
        for i in on_map - movable:
            if any(j in movable for j in blockers[i] or ()):
                movable.add(i)
                changed = added = True
    return added


def _circle(blockers: Sequence[list[int] | None], stuck: set[int]) -> set[int]:
    """The trains of one circle of three or more among ``stuck`` (each can enter the next's cell)."""
    import networkx as nx

    graph = nx.DiGraph()
    graph.add_edges_from((i, j) for i in stuck for j in blockers[i] or () if j in stuck)
    for cycle in islice(nx.simple_cycles(graph), MAX_CIRCLES):
        if len(cycle) >= 3:
            return set(cycle)
    return set()
