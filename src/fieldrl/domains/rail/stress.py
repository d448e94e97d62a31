"""Stress axes of the rail domain (``fieldrl stress``): how often trains break down, and how many run.

Both move a field of the Flatland configuration (:class:`~fieldrl.domains.rail.params.FlatlandConfig`)
through ``params.flatland``, on top of the ``level`` preset; every other field (network size, cities,
speeds, breakdown lengths) stays the setting's. Neither changes what a policy sees or does per train:
the observation (``OBS_SIZE`` floats, plus the advice's 8) and the action space (8 semi-hierarchical or
5 monolithic actions) are per train, and the shared network is applied to every train on its own, so
a network trained with 7 trains runs unchanged with 4 or 14.

The values are in the domain's own units (steps, trains), not factors: what a stakeholder reads in the
figure and sentence is "a breakdown every 135 steps" or "14 trains". The default points are centred on
level 0 (7 trains, a breakdown every 540 steps per train), the level every built-in stressed setting
runs; a scenario on another level names its own points in its ``stress:`` section.

At the value the setting already has, ``apply`` returns the params untouched, so that point replays the
plain evaluation exactly. Elsewhere it adds ``flatland: {field: value}`` and drops ``curriculum``: the
curriculum only samples training levels (evaluation always plays ``level``) and the params model does
not allow it beside ``flatland``. A saved ``env_file`` fixes the trains and its own breakdown settings;
the params model refuses ``flatland`` beside it, so any other point is refused at validation.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from fieldrl.domains.base import SIMULATOR_CHECKS
from fieldrl.domains.rail.levels import MAX_TRAINS, read_env_file
from fieldrl.domains.rail.params import RailParams

#: Mean steps between breakdowns of one train: a quarter, half, as, twice and four times level 0's 540.
#: A level-0 episode runs about 200 steps, so a train breaks down (20-50 steps each time) in roughly
#: 77 %, 52 %, 31 %, 17 % and 9 % of episodes at these points: from "most trains lose time" to "rare".
MALFUNCTION_POINTS = (135.0, 270.0, 540.0, 1080.0, 2160.0)
#: 10 steps: a breakdown every 10 steps leaves a train broken nearly all the time (shorter is no
#: timetable left to dispatch); 10^7: FlatlandConfig's limit, no breakdown in any episode (Flatland's
#: own "no malfunctions" is 0, which has no place on an axis ordered by how rare breakdowns are).
MALFUNCTION_RANGE = (10.0, 1e7)
#: Trains on level 0's network (the network does not depend on the number of trains): about half,
#: three quarters, as trained, 1.4x and twice its 7 trains. More trains on the same track means more
#: meetings on single track, the dispatchers' hard case.
TRAIN_POINTS = (4.0, 5.0, 7.0, 10.0, 14.0)
#: one train up to FlatlandConfig's limit; validation builds the configuration, so a number Flatland
#: cannot place on the network is refused with its reason
TRAIN_RANGE = (1.0, float(MAX_TRAINS))


def _saved(params: RailParams) -> dict[str, Any]:
    assert params.env_file is not None
    return read_env_file(Path(params.env_file))


def trained_malfunction_interval(params: RailParams) -> float:
    """Mean steps between breakdowns of one train in ``params`` (0: none): the configuration's, or
    for a saved environment 1 / its malfunction rate."""
    if params.env_file is None:
        return float(params.configuration().malfunction_interval)
    saved = _saved(params).get("malfunction")
    rate = float(saved[0]) if saved is not None else 0.0
    return float(round(1.0 / rate)) if rate > 0 else 0.0


def trained_trains(params: RailParams) -> float:
    """Number of trains in ``params``: the configuration's, or the saved environment's."""
    if params.env_file is None:
        return float(params.configuration().trains)
    return float(len(_saved(params)["agents"]))


def _read(raw: dict[str, Any]) -> RailParams:
    """``raw`` as params, without building the network (the value is all that is read here)."""
    token = SIMULATOR_CHECKS.set(False)
    try:
        return RailParams.model_validate(raw)
    finally:
        SIMULATOR_CHECKS.reset(token)


def _as_field(value: float) -> int | float:
    """An integral value as an int; anything else as it is, for the params model to refuse (strict)."""
    return int(value) if float(value).is_integer() else value


def _flatland_axis_apply(
    field: str, trained: Callable[[RailParams], float]
) -> Callable[[dict[str, Any], float], dict[str, Any]]:
    """``apply`` of an axis that sets ``flatland.<field>``: raw params untouched at the trained value."""

    def apply(raw: dict[str, Any], value: float) -> dict[str, Any]:
        if value == trained(_read(raw)):
            return raw
        world = {k: v for k, v in raw.items() if k != "curriculum"}  # training only; see module doc
        world["flatland"] = {**(raw.get("flatland") or {}), field: _as_field(value)}
        return world

    return apply


apply_malfunction_interval = _flatland_axis_apply("malfunction_interval", trained_malfunction_interval)
apply_trains = _flatland_axis_apply("trains", trained_trains)
