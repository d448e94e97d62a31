"""The five Flatland 3 test levels (``Test_00`` .. ``Test_04``) built with Flatland's own generators.

Sizes, trains and cities are Flatland 3's published environment configurations; malfunctions last
20-50 steps with the mean intervals of the Flatland 3 tests; speeds follow Flatland's default mixed
profile (a quarter of the trains each at speed 1, 1/2, 1/3, 1/4). Rail network, timetable and
malfunctions are drawn from one seed, so a seed fixes the whole episode up to the controller's actions.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

from flatland.core.env_observation_builder import DummyObservationBuilder
from flatland.envs.line_generators import sparse_line_generator
from flatland.envs.malfunction_generators import MalfunctionParameters, ParamMalfunctionGen
from flatland.envs.rail_env import RailEnv
from flatland.envs.rail_generators import sparse_rail_generator

#: Flatland's default mixed speed profile (speed -> share of trains).
SPEED_PROFILE: dict[float, float] = {1.0: 0.25, 0.5: 0.25, 1.0 / 3.0: 0.25, 0.25: 0.25}


@dataclass(frozen=True)
class Level:
    """One Flatland 3 test configuration.

    :param trains: number of trains.
    :param width: grid columns (Flatland's ``x_dim``).
    :param height: grid rows (Flatland's ``y_dim``).
    :param cities: maximum number of cities the sparse generator tries to place.
    :param malfunction_interval: mean steps between malfunctions of one train.
    """

    trains: int
    width: int
    height: int
    cities: int
    malfunction_interval: int
    malfunction_min: int = 20
    malfunction_max: int = 50
    max_rails_between_cities: int = 2
    max_rail_pairs_in_city: int = 2


LEVELS: tuple[Level, ...] = (
    Level(7, 30, 30, 2, 540),
    Level(10, 30, 30, 2, 900),
    Level(20, 30, 30, 3, 1800),
    Level(50, 30, 35, 3, 4500),
    Level(80, 35, 30, 5, 7200),
)


def make_rail_env(level: Level, seed: int, obs_builder: object | None = None) -> RailEnv:
    """A Flatland ``RailEnv`` for ``level``, reset with ``seed`` (network, timetable, malfunctions)."""
    env = RailEnv(
        width=level.width,
        height=level.height,
        rail_generator=sparse_rail_generator(
            max_num_cities=level.cities,
            grid_mode=False,
            max_rails_between_cities=level.max_rails_between_cities,
            max_rail_pairs_in_city=level.max_rail_pairs_in_city,
        ),
        line_generator=sparse_line_generator(speed_ratio_map=SPEED_PROFILE, line_length=2),
        malfunction_generator=ParamMalfunctionGen(
            MalfunctionParameters(
                malfunction_rate=1.0 / level.malfunction_interval,
                min_duration=level.malfunction_min,
                max_duration=level.malfunction_max,
            )
        ),
        number_of_agents=level.trains,
        obs_builder_object=obs_builder if obs_builder is not None else DummyObservationBuilder(),
        random_seed=seed,
    )
    with warnings.catch_warnings():  # "Could not set all required cities!" is expected on small grids
        warnings.simplefilter("ignore", UserWarning)
        env.reset(random_seed=seed)
    return env
