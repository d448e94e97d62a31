"""Flatland configurations built with Flatland's own generators: the five Flatland 3 test levels
(``Test_00`` .. ``Test_04``) as named presets, any configuration of your own, or a saved environment.

Sizes, trains and cities of the presets are Flatland 3's published environment configurations;
malfunctions last 20-50 steps with the mean intervals of the Flatland 3 tests; speeds follow
Flatland's default mixed profile (a quarter of the trains each at speed 1, 1/2, 1/3, 1/4). Rail
network, timetable and malfunctions are drawn from one seed, so a seed fixes the whole episode up to
the controller's actions.

A saved environment (:func:`load_rail_env`, a ``.pkl`` written by Flatland's ``RailEnvPersister``)
fixes the network and the timetable; the seed then draws only the malfunctions. Pickles run code
when loaded, so the file is read by an unpickler that builds only the Flatland, numpy and standard
classes a saved environment holds (:data:`PICKLE_ALLOWED`) and refuses anything else.
"""

from __future__ import annotations

import io
import pickle
import warnings
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # loaded where used: checking a scenario needs none of this
    from flatland.envs.rail_env import RailEnv

#: Flatland's default mixed speed profile (speed -> share of trains).
SPEED_PROFILE: dict[float, float] = {1.0: 0.25, 0.5: 0.25, 1.0 / 3.0: 0.25, 0.25: 0.25}
DEFAULT_SPEEDS: tuple[tuple[float, float], ...] = tuple(SPEED_PROFILE.items())


@dataclass(frozen=True)
class Level:
    """One Flatland 3 test configuration.

    :param trains: number of trains.
    :param width: grid columns (Flatland's ``x_dim``).
    :param height: grid rows (Flatland's ``y_dim``).
    :param cities: maximum number of cities the sparse generator tries to place.
    :param malfunction_interval: mean steps between malfunctions of one train (0: none).
    :param malfunction_min: shortest malfunction, steps.
    :param malfunction_max: longest malfunction, steps.
    :param max_rails_between_cities: most parallel rails on a connection between two cities.
    :param max_rail_pairs_in_city: most pairs of station rails in a city.
    :param grid_mode: cities on a regular grid instead of at random places.
    :param speed_profile: ``(speed, share of trains)`` pairs, shares summing to 1.
    :param step_limit: episode length in steps; None: Flatland's own (from the timetable).
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
    grid_mode: bool = False
    speed_profile: tuple[tuple[float, float], ...] = DEFAULT_SPEEDS
    step_limit: int | None = None

    def with_changes(self, **changes: Any) -> Level:
        """This configuration with some fields replaced (None values keep the preset's)."""
        return replace(self, **{k: v for k, v in changes.items() if v is not None})


LEVELS: tuple[Level, ...] = (
    Level(7, 30, 30, 2, 540),
    Level(10, 30, 30, 2, 900),
    Level(20, 30, 30, 3, 1800),
    Level(50, 30, 35, 3, 4500),
    Level(80, 35, 30, 5, 7200),
)


def make_rail_env(level: Level, seed: int, obs_builder: object | None = None) -> RailEnv:
    """A Flatland ``RailEnv`` for ``level``, reset with ``seed`` (network, timetable, malfunctions).

    :raises ValueError: Flatland's generators cannot build the configuration (their own message).
    """
    from flatland.core.env_observation_builder import DummyObservationBuilder
    from flatland.envs.line_generators import sparse_line_generator
    from flatland.envs.malfunction_generators import (
        MalfunctionParameters,
        NoMalfunctionGen,
        ParamMalfunctionGen,
    )
    from flatland.envs.rail_env import RailEnv
    from flatland.envs.rail_generators import sparse_rail_generator

    malfunctions = (
        ParamMalfunctionGen(
            MalfunctionParameters(
                malfunction_rate=1.0 / level.malfunction_interval,
                min_duration=level.malfunction_min,
                max_duration=level.malfunction_max,
            )
        )
        if level.malfunction_interval > 0
        else NoMalfunctionGen()
    )
    env = RailEnv(
        width=level.width,
        height=level.height,
        rail_generator=sparse_rail_generator(
            max_num_cities=level.cities,
            grid_mode=level.grid_mode,
            max_rails_between_cities=level.max_rails_between_cities,
            max_rail_pairs_in_city=level.max_rail_pairs_in_city,
        ),
        line_generator=sparse_line_generator(speed_ratio_map=dict(level.speed_profile), line_length=2),
        malfunction_generator=malfunctions,
        number_of_agents=level.trains,
        obs_builder_object=obs_builder if obs_builder is not None else DummyObservationBuilder(),
        random_seed=seed,
    )
    with warnings.catch_warnings():  # "Could not set all required cities!" is expected on small grids
        warnings.simplefilter("ignore", UserWarning)
        env.reset(random_seed=seed)
    if level.step_limit is not None:
        env._max_episode_steps = int(level.step_limit)
    return env


#: the globals a saved Flatland environment's pickle may name: Flatland's data classes, numpy arrays
#: and scalars, fractions and plain containers; nothing that runs code of the file's choosing
PICKLE_ALLOWED: frozenset[tuple[str, str]] = frozenset(
    [
        ("builtins", name)
        for name in ("set", "frozenset", "list", "tuple", "dict", "int", "float", "bool", "str", "slice")
    ]
    + [("collections", "OrderedDict"), ("fractions", "Fraction"), ("decimal", "Decimal")]
    + [("numpy", "dtype"), ("numpy", "ndarray"), ("numpy.core.multiarray", "scalar")]
    + [("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct")]
    + [("numpy._core.multiarray", "scalar"), ("numpy.random._pickle", "__randomstate_ctor")]
    + [("numpy.random._pickle", "__bit_generator_ctor"), ("numpy.random.mtrand", "RandomState")]
    + [
        ("flatland.core.grid.grid4", "Grid4TransitionsEnum"),
        ("flatland.envs.agent_utils", "Agent"),
        ("flatland.envs.agent_utils", "EnvAgent"),
        ("flatland.envs.agent_utils", "RailAgentStatus"),
        ("flatland.envs.malfunction_generators", "MalfunctionParameters"),
        ("flatland.envs.malfunction_generators", "MalfunctionProcessData"),
        ("flatland.envs.rail_trainrun_data_structures", "Waypoint"),
        ("flatland.envs.step_utils.action_saver", "ActionSaver"),
        ("flatland.envs.step_utils.malfunction_handler", "MalfunctionHandler"),
        ("flatland.envs.step_utils.speed_counter", "SpeedCounter"),
        ("flatland.envs.step_utils.state_machine", "TrainStateMachine"),
        ("flatland.envs.step_utils.states", "StateTransitionSignals"),
        ("flatland.envs.step_utils.states", "TrainState"),
    ]
    + [("flatland.envs.stations_links", n) for n in ("Fibre", "Gate", "Link", "Pin", "Station")]
    + [("flatland.envs.stations_links", n) for n in ("StationsLinks", "StoppingPoint")]
)


class _EnvUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in PICKLE_ALLOWED:
            raise ValueError(
                f"it refers to {module}.{name}, which is not part of a saved Flatland environment "
                "(fieldrl does not load arbitrary pickles: they can run code)"
            )
        return super().find_class(module, name)


@lru_cache(maxsize=8)
def _env_dict(path: str, mtime_ns: int) -> dict[str, Any]:
    data = Path(path).read_bytes()
    try:
        env_dict = _EnvUnpickler(io.BytesIO(data)).load()
    except ValueError:
        raise
    except Exception as exc:  # a damaged or foreign file: unpickling raises many kinds
        raise ValueError(
            f"not a saved Flatland environment ({type(exc).__name__}: {str(exc)[:120]})"
        ) from None
    if not isinstance(env_dict, dict) or "grid" not in env_dict or not env_dict.get("agents"):
        raise ValueError("not a saved Flatland environment (no rail grid or no trains)")
    return env_dict


def read_env_file(path: Path) -> dict[str, Any]:
    """The state saved in a Flatland environment file (``RailEnvPersister.save(env, "x.pkl")``).

    :raises ValueError: not a ``.pkl``, names a class outside :data:`PICKLE_ALLOWED`, or is not an
        environment (no grid or no trains).
    """
    if path.suffix != ".pkl":
        raise ValueError(
            f"expected a .pkl written by Flatland's RailEnvPersister.save, got {path.suffix or 'no suffix'!r}"
        )
    return _env_dict(str(path), path.stat().st_mtime_ns)


def load_rail_env(path: Path, seed: int, obs_builder: object | None = None) -> RailEnv:
    """The saved environment at ``path`` (network, trains, timetable as saved), malfunctions from ``seed``."""
    from copy import deepcopy

    from flatland.core.env_observation_builder import DummyObservationBuilder
    from flatland.envs import line_generators, malfunction_generators, rail_generators, timetable_generators
    from flatland.envs.persistence import RailEnvPersister
    from flatland.envs.rail_env import RailEnv

    env_dict = deepcopy(read_env_file(path))  # set_full_state rewrites the agents in place
    grid = env_dict["grid"]
    env = RailEnv(
        width=len(grid[0]),
        height=len(grid),
        rail_generator=rail_generators.rail_from_file(env_dict=env_dict),
        line_generator=line_generators.line_from_file(env_dict=env_dict),
        timetable_generator=timetable_generators.timetable_from_file(env_dict=env_dict),
        malfunction_generator=malfunction_generators.FileMalfunctionGen(env_dict=env_dict),
        obs_builder_object=obs_builder if obs_builder is not None else DummyObservationBuilder(),
    )
    RailEnvPersister.set_full_state(env, env_dict)
    env.obs_builder.reset(env)
    env.reset(regenerate_rail=False, regenerate_schedule=False, random_seed=seed)
    return env
