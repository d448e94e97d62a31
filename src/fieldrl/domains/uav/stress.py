"""Stress axes of the ``uav`` domain (``fieldrl stress``): how the world a run's trained policies are
replayed in is moved away from the one they trained in. Numpy/pydantic only.

Both axes (task load, number of vehicles) keep every policy's observation and action spaces: an
observation describes a UAV's ``n_observed`` best-linked tasks (a fixed count) and an action picks
one of the fixed ``admit_levels`` (and share modes), whatever the number of vehicles or the task
sizes. Neither touches a controller's own settings (pipeline, rectifier, admission levels, observed
vehicles, solver).

Worth knowing when reading a load stress map: the learned allocation's task-size feature is a task's
bits divided by the largest size of the world it runs in (``bits_max_mbit x load``, in the env), so
that feature does not show the learned policy that the load moved; the LP, the rectifier and the
flight paths, which work on the tasks' real sizes, do.
"""

from __future__ import annotations

from typing import Any


def with_vehicles(raw: dict[str, Any], value: float) -> dict[str, Any]:
    """``raw`` params with ``value`` vehicles on the roads. A count that is not whole is passed on as
    it is, so the params model (strict integers) refuses it in one line instead of it being rounded."""
    count: float | int = int(value) if float(value).is_integer() else value
    return {**raw, "n_vehicles": count}


def trained_vehicles(params: Any) -> float:
    """The number of vehicles the run trained (and was evaluated) with."""
    return float(params.n_vehicles)
