"""Stress axes of the traffic domain: the generated demand moved away from the scenario's own.

Both axes scale the hourly rates of every demand period (``periods``) by a factor; the scenario's
own demand is 1 by definition, and at exactly 1 the params are left as they were, so that point
replays the plain evaluation. Away from 1 the run's own periods are kept in ``timing_periods``:
the standard timings that are computed from the demand (Webster's program, and the Webster stage
a learned policy with ``advice`` sees) stay those the run was set up with, as a plan timed from
last year's counts does when traffic grows. Only the world moves, never a controller's timing.

A network that brings its own routes (``route_file``, a sumocfg or RESCO network) has no periods
to scale: both axes refuse it with one line (:func:`own_routes`) rather than run as a no-op, and
the params model refuses ``timing_periods`` there too.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ValidationError

from fieldrl.domains.base import SIMULATOR_CHECKS
from fieldrl.domains.traffic.params import DEFAULT_PERIODS, TrafficParams

#: the rates each axis scales (fields of a demand period)
VEHICLE_RATES = ("vehicles_main", "vehicles_side")
PEDESTRIAN_RATES = ("pedestrians",)


def _periods(raw: dict[str, Any], key: str) -> list[dict[str, Any]]:
    """The raw params' periods under ``key`` as plain dicts (the defaults where not given)."""
    given = raw.get(key)
    periods = DEFAULT_PERIODS if given is None else given
    return [p.model_dump() if isinstance(p, BaseModel) else dict(p) for p in periods]


def scale_rates(raw: dict[str, Any], factor: float, rates: tuple[str, ...]) -> dict[str, Any]:
    """``raw`` with the ``rates`` of every demand period times ``factor`` and the standard timings kept
    at the run's own demand; ``raw`` itself (a copy) at a factor of exactly 1."""
    if factor == 1.0:
        return dict(raw)
    own = raw.get("timing_periods")
    scaled = [{**p, **{r: p[r] * factor for r in rates}} for p in _periods(raw, "periods")]
    return {**raw, "periods": scaled, "timing_periods": own if own is not None else _periods(raw, "periods")}


def scale_vehicles(raw: dict[str, Any], factor: float) -> dict[str, Any]:
    """Every vehicle rate (main road and side streets) times ``factor``; pedestrians unchanged."""
    return scale_rates(raw, factor, VEHICLE_RATES)


def scale_pedestrians(raw: dict[str, Any], factor: float) -> dict[str, Any]:
    """Every pedestrian rate times ``factor``; vehicles unchanged."""
    return scale_rates(raw, factor, PEDESTRIAN_RATES)


def trained_factor(params: Any) -> float:
    """The factor the run's own params are at: 1, its own demand, by definition."""
    return 1.0


def own_routes(raw: dict[str, Any]) -> str | None:
    """Why the demand axes cannot move this world (its network brings its own routes), or None."""
    token = SIMULATOR_CHECKS.set(False)  # whether routes are given needs no simulator
    try:
        params = TrafficParams.model_validate(raw)
    except ValidationError:
        return None  # not valid params at all: the params model says why
    finally:
        SIMULATOR_CHECKS.reset(token)
    if not params.own_demand:
        return None
    return (
        "this network brings its own routes (route_file, or a sumocfg or RESCO network naming route files), "
        "so there is no generated demand (periods) to scale"
    )
