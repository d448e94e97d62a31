"""Named, composable reward terms (a small registry, as sumo-rl's ``reward_fns``).

Each term maps one junction's :class:`StepStats` for the last decision interval to a number
(higher is better). The reward is ``sum(weight[name] * term(stats))`` over the scenario's
weights. With ``weights: auto`` (the default) the two delay terms weigh every waiting person
alike, whatever their mode (what "mean person delay" measures), and the max-wait and fairness
terms are scaled by how many people are waiting at the junction right now, so they keep pace with
the delay sums as demand rises and fall silent when the junction is empty.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

#: person-seconds per reward unit (keeps per-step rewards near 1 at moderate demand)
SCALE = 100.0


@dataclass
class StepStats:
    """What one junction saw over one decision interval."""

    vehicle_wait_s: float = 0.0  # vehicle-seconds spent halting on its approaches
    pedestrian_wait_s: float = 0.0  # person-seconds spent waiting at its crossings
    vehicles_waiting: int = 0  # halting vehicles at the end of the interval
    pedestrians_waiting: int = 0  # waiting pedestrians at the end of the interval
    vehicle_max_wait: float = 0.0  # longest current wait of a vehicle on its approaches (s)
    pedestrian_max_wait: float = 0.0  # longest current wait of a pedestrian at its crossings (s)
    vehicle_mean_wait: float = 0.0  # mean current wait of its halting vehicles (s)
    pedestrian_mean_wait: float = 0.0  # mean current wait of its waiting pedestrians (s)


def jain(values: list[float]) -> float:
    """Jain's fairness index of non-negative values: 1 when all equal, 1/n when one takes all."""
    total = sum(values)
    square = sum(v * v for v in values)
    return 1.0 if square == 0 else total * total / (len(values) * square)


TERMS: dict[str, Callable[[StepStats], float]] = {
    "vehicle_delay": lambda s: -s.vehicle_wait_s / SCALE,
    "pedestrian_delay": lambda s: -s.pedestrian_wait_s / SCALE,
    "max_vehicle_wait": lambda s: -s.vehicle_max_wait / SCALE,
    "max_pedestrian_wait": lambda s: -s.pedestrian_max_wait / SCALE,
    "fairness": lambda s: -(1.0 - jain([s.vehicle_mean_wait, s.pedestrian_mean_wait])),
    "queue": lambda s: -(s.vehicles_waiting + s.pedestrians_waiting) / 10.0,
}

DESCRIPTIONS = {
    "vehicle_delay": "minus vehicle-seconds of halting on the junction's approaches / 100",
    "pedestrian_delay": "minus person-seconds of waiting at the junction's crossings / 100",
    "max_vehicle_wait": "minus the longest current vehicle wait (s) / 100",
    "max_pedestrian_wait": "minus the longest current pedestrian wait (s) / 100",
    "fairness": "minus (1 - Jain's index of the two modes' mean current waits)",
    "queue": "minus (halting vehicles + waiting pedestrians) / 10",
}


def auto_weights(stats: StepStats) -> dict[str, float]:
    """Default weights, adapted to the demand now at the junction."""
    waiting = stats.vehicles_waiting + stats.pedestrians_waiting
    scale = waiting / 10.0
    return {
        "vehicle_delay": 1.0,
        "pedestrian_delay": 1.0,
        "max_vehicle_wait": 0.5 * scale,
        "max_pedestrian_wait": 0.5 * scale,
        "fairness": 0.2 * scale,
    }


def reward(stats: StepStats, weights: Mapping[str, float] | None) -> float:
    w = auto_weights(stats) if weights is None else weights
    return float(sum(weight * TERMS[name](stats) for name, weight in w.items() if weight))
