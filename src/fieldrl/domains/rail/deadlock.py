"""Which trains can never move again: a greatest fixed point over "blocked by" relations."""

from __future__ import annotations

from collections.abc import Sequence


def deadlocked(
    blockers: Sequence[list[int] | None],
) -> set[int]:
    """Trains stuck for good.

    :param blockers: per train, ``None`` if it is off the map or done (never deadlocked), else the
        train occupying the next cell of *each* exit the train may still take (``-1`` where that
        cell is free). A train is deadlocked when every exit is blocked by a deadlocked train:
        head-on pairs, circles of trains, and trains queued behind either.
    """
    stuck = {i for i, b in enumerate(blockers) if b is not None and b and all(j >= 0 for j in b)}
    changed = True
    while changed:
        changed = False
        for i in list(stuck):
            if any(j not in stuck for j in blockers[i]):  # type: ignore[union-attr]
                stuck.discard(i)
                changed = True
    return stuck
