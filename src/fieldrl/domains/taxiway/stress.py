"""Stress axes of the taxiway domain: the traffic a run's policies are tested under, moved away from
the traffic they trained on (``fieldrl stress``; :attr:`TaxiwayDomain.stress_axes`).

Only the world moves: how many movements arrive per hour, which share of them are departures, and the
separation minimum every controller must keep. The airport layout, the cell length, the number of
agent slots and the foresight horizon (everything the observation and action spaces are made of) stay
as the run trained them, so the trained networks load unchanged.

Default points and ranges, in the domain's units (see ``docs/taxiway.md``, *Stress axes*):

* **traffic**: a multiple of the setting's own rate (``movements_per_hour``, else its named
  ``density``). 0.5, 0.75, 1, 1.5 and 2: a quiet hour at half the traffic, the trained rate, and the
  peak or a recovery after a disruption at one and a half and twice. On the small airport at ``low``
  (20 movements/h) that is 10-40 movements/h, the top just above its ``medium`` density (35/h); on
  the large airport 20-80 (``low``, 40/h) up to 50-200 (``high``, 100/h). Allowed 0.25-2: twice the
  large airport's ``high`` density is the params model's cap of 200 movements/h.
* **departure share**: 0.2, 0.35, 0.5, 0.65, 0.8 of the movements; hub airports work in banks, an
  arrival bank brings mostly arrivals and the departure bank after it mostly departures (every
  shipped scenario trains at 0.5). Allowed 0-1.
* **separation minimum**: 1, 2, 3, 4 cells (with 60 m cells: closer than 60, 120, 180, 240 m is a
  conflict); 2 is the shipped default. Larger minima stand for low-visibility procedures, which space
  taxiing aircraft farther apart; every controller (and the shield) is told the new minimum, as
  controllers are told when procedures change. Conflicts are counted against the minimum in force at
  that point. Allowed 1-4 whole cells.
"""

from __future__ import annotations

from typing import Any

from fieldrl.domains.base import StressAxis, field_axis
from fieldrl.domains.taxiway.params import TaxiwayParams

#: traffic as a multiple of the setting's own rate: default points, and the range allowed
TRAFFIC_POINTS = (0.5, 0.75, 1.0, 1.5, 2.0)
TRAFFIC_RANGE = (0.25, 2.0)
DEPARTURE_POINTS = (0.2, 0.35, 0.5, 0.65, 0.8)
SEPARATION_POINTS = (1.0, 2.0, 3.0, 4.0)
SEPARATION_RANGE = (1.0, 4.0)


def scenario_rate(raw: dict[str, Any]) -> float | None:
    """Movements per hour that raw params give (as :meth:`TaxiwayParams.rate`), or None where the
    raw params cannot say (a misspelt density: the params model names the problem)."""
    try:
        return float(TaxiwayParams.model_construct(**raw).rate())
    except (KeyError, TypeError, ValueError):
        return None


def scale_traffic(raw: dict[str, Any], factor: float) -> dict[str, Any]:
    """Raw params with the traffic at ``factor`` x the setting's own rate.

    At 1 the params are returned as they were (the trained point replays the plain evaluation);
    otherwise ``movements_per_hour`` is set, which overrides a named ``density``.
    """
    if factor == 1.0:
        return dict(raw)
    rate = scenario_rate(raw)
    if rate is None:
        return dict(raw)
    return {**raw, "movements_per_hour": rate * factor}


def traffic_axis() -> StressAxis:
    """Traffic density as a multiple of the rate the run trained at (trained value 1)."""
    return StressAxis(
        label="Traffic multiple",
        unit="× the trained movements per hour",
        points=TRAFFIC_POINTS,
        low=TRAFFIC_RANGE[0],
        high=TRAFFIC_RANGE[1],
        trained=lambda params: 1.0,
        apply=scale_traffic,
        fmt="g",
    )


def stress_axes() -> dict[str, StressAxis]:
    """The taxiway domain's stress axes by name."""
    return {
        "traffic": traffic_axis(),
        "departure_share": field_axis(
            "departure_share",
            "Share of departures",
            "fraction of movements",
            DEPARTURE_POINTS,
            0.0,
            1.0,
            fmt="g",
        ),
        "separation": field_axis(
            "separation_cells",
            "Separation minimum",
            "cells (60 m each by default)",
            SEPARATION_POINTS,
            SEPARATION_RANGE[0],
            SEPARATION_RANGE[1],
            fmt="g",
        ),
    }
