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
classes a saved environment holds (:data:`PICKLE_ALLOWED`) and refuses anything else. A few bytes
of pickle can also ask for gigabytes (an array's shape, a list of a list's repeats), so the file
is read within :data:`ENV_FILE_MAX_BYTES` and what unpickling builds within :data:`ENV_FILE_BUDGET`,
judged before each allocation; the environment it holds within the limits of your own
configuration (:data:`MAX_GRID_SIDE`, :data:`MAX_TRAINS`, :data:`MAX_STEPS`).
"""

from __future__ import annotations

import io
import math
import pickle
import re
import warnings
from dataclasses import dataclass, replace
from decimal import Decimal
from fractions import Fraction
from functools import lru_cache
from numbers import Integral
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # loaded where used: checking a scenario needs none of this
    from flatland.envs.rail_env import RailEnv

#: largest grid side, trains and episode steps of a configuration or a saved environment: 6x the grid,
#: 6x the trains and 200x the steps of the biggest Flatland 3 test level (80 trains on 35 x 30)
MAX_GRID_SIDE = 200
MAX_TRAINS = 500
MAX_STEPS = 10**5
#: largest environment file read: the biggest built-in level saved is 39 kB, 2.7 MB with its
#: distance maps (which Flatland recomputes on loading anyway)
ENV_FILE_MAX_BYTES = 64 << 20
#: memory unpickling one file may build, counted before each allocation: the file itself, 256 bytes
#: per pickle opcode (more than any one opcode builds: an empty set is 216) and the bytes of every
#: array, string and container a call in the file asks for. The biggest built-in level counts 5.6 MB
#: (11 MB with distance maps); a 4 GiB array hidden in 15 kB is refused before it is allocated
ENV_FILE_BUDGET = 256 << 20
_OPCODE_BYTES = 256
#: bytes counted per element of a list, tuple, set or dict built by a call (pointer, hash slot, and
#: the element itself when it is made from an array or string)
_ELEMENT_BYTES = 64
#: largest decimal exponent of a number built from text or a Decimal: CPython's own limit on the
#: digits of an int (``sys.get_int_max_str_digits``); ``Fraction('1e999999999')`` would run for hours
_MAX_EXPONENT = 4300

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


class _TooBig(ValueError):
    """What an environment file asks for is beyond :data:`ENV_FILE_BUDGET` (or is not sizeable)."""


def _array_bytes(shape: Any, dtype: Any) -> int:
    """Bytes of a numpy array of ``shape`` and ``dtype`` (shape x itemsize), without making it."""
    import numpy as np

    dims = (shape,) if isinstance(shape, int) else shape
    if not isinstance(dims, tuple | list) or not all(
        isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in dims
    ):
        raise _TooBig(f"it asks for an array of shape {str(shape)[:40]}, which is not a shape")
    return math.prod(dims) * np.dtype(dtype).itemsize


def _exponent_problem(args: tuple[Any, ...]) -> str | None:
    """Why a number made from ``args`` would take unbounded time or memory (a huge exponent), or None."""
    for arg in args:
        if isinstance(arg, Decimal) and arg.is_finite() and abs(arg.adjusted()) > _MAX_EXPONENT:
            return f"a number with exponent {arg.adjusted()}"
        if isinstance(arg, str):
            for exponent in re.findall(r"[eE]\s*[+-]?\s*(\d+)", arg[:1000]):
                if len(exponent) > 5 or int(exponent) > _MAX_EXPONENT:
                    return f"the number {arg[:40]!r}"
    return None


def _counted(load: Any) -> Any:
    """``load`` (one opcode's handler) charging :data:`_OPCODE_BYTES` to the unpickler's budget first."""

    def counted(self: _EnvUnpickler) -> None:
        self.spent += _OPCODE_BYTES
        if self.spent > ENV_FILE_BUDGET:
            self.charge(0, "it holds too many objects")
        load(self)

    return counted


class _EnvUnpickler(pickle._Unpickler):
    """Unpickles only :data:`PICKLE_ALLOWED`, charging what it builds to :data:`ENV_FILE_BUDGET`.

    Python's own (pure Python) unpickler, so that every opcode can be counted and every call the
    file makes (``REDUCE``, ``NEWOBJ``, ``BUILD`` ...) judged before it runs: numpy arrays by
    shape x itemsize, containers by length, strings only from scalars, numbers by exponent.
    """

    dispatch = dict(pickle._Unpickler.dispatch)

    def __init__(self, data: bytes) -> None:
        super().__init__(io.BytesIO(data))
        self.spent = len(data)

    def charge(self, n_bytes: int, what: str) -> None:
        self.spent += n_bytes
        if self.spent > ENV_FILE_BUDGET:
            raise _TooBig(
                f"unpickling it would build more than {ENV_FILE_BUDGET >> 20} MiB, fieldrl's budget for a "
                f"saved environment (the biggest built-in level takes 6 MB); {what}"
            )

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in PICKLE_ALLOWED:
            raise ValueError(
                f"it refers to {module}.{name}, which is not part of a saved Flatland environment "
                "(fieldrl does not load arbitrary pickles: they can run code)"
            )
        return super().find_class(module, name)

    def judge(self, func: Any, args: tuple[Any, ...]) -> None:
        """Charge (or refuse) the call ``func(*args)`` the file asks for, before it is made."""
        import numpy as np

        name = getattr(func, "__name__", "")
        if func is np.ndarray or (isinstance(func, type) and issubclass(func, np.ndarray)):
            shape, dtype = (args[0] if args else ()), (args[1] if len(args) > 1 else float)
            self.charge(_array_bytes(shape, dtype), f"an array of shape {str(shape)[:40]}")
        elif name == "_reconstruct" and len(args) == 3:
            self.charge(_array_bytes(args[1], args[2]), f"an array of shape {str(args[1])[:40]}")
        elif name == "scalar" and args:
            self.charge(np.dtype(args[0]).itemsize, "a numpy scalar")
        elif any(func is kind for kind in (list, tuple, set, frozenset, dict)) or name == "OrderedDict":
            size = len(args[0]) if args and hasattr(args[0], "__len__") else (0 if not args else None)
            if size is None:
                raise _TooBig(f"it builds a {name} from a {type(args[0]).__name__}, which cannot be sized")
            self.charge(size * _ELEMENT_BYTES, f"a {name} of {size:,} elements")
        elif func is str and args and not isinstance(args[0], str | bytes | int | float | Decimal | Fraction):
            raise _TooBig(
                f"it makes text of a {type(args[0]).__name__}, which a saved environment never does"
            )
        elif any(func is kind for kind in (int, float, Fraction, Decimal)):
            problem = _exponent_problem(args)
            if problem:
                raise _TooBig(f"it builds {problem}; allowed: exponents up to {_MAX_EXPONENT}")

    def _instantiate(self, klass: Any, args: Any) -> None:
        self.judge(klass, tuple(args))
        super()._instantiate(klass, args)

    def _load_reduce(self) -> None:
        self.judge(self.stack[-2], tuple(self.stack[-1]))
        pickle._Unpickler.load_reduce(self)

    def _load_newobj(self) -> None:
        self.judge(self.stack[-2], tuple(self.stack[-1]))
        pickle._Unpickler.load_newobj(self)

    def _load_newobj_ex(self) -> None:
        self.judge(self.stack[-3], tuple(self.stack[-2]))
        pickle._Unpickler.load_newobj_ex(self)

    def _load_build(self) -> None:
        import numpy as np

        state, inst = self.stack[-1], self.stack[-2]
        if isinstance(inst, type):
            raise ValueError(
                f"it sets attributes of the class {inst.__name__}, which a saved environment never does"
            )
        if isinstance(inst, np.ndarray) and isinstance(state, tuple) and len(state) in (4, 5):
            shape, dtype = state[-4], state[-3]  # (version,) shape, dtype, is_fortran, data
            self.charge(_array_bytes(shape, dtype), f"an array of shape {str(shape)[:40]}")
        pickle._Unpickler.load_build(self)

    dispatch[pickle.REDUCE[0]] = _load_reduce
    dispatch[pickle.NEWOBJ[0]] = _load_newobj
    dispatch[pickle.NEWOBJ_EX[0]] = _load_newobj_ex
    dispatch[pickle.BUILD[0]] = _load_build
    dispatch = {code: _counted(load) for code, load in dispatch.items()}


@lru_cache(maxsize=8)
def _env_dict(path: str, mtime_ns: int) -> dict[str, Any]:
    size = Path(path).stat().st_size
    if size > ENV_FILE_MAX_BYTES:
        raise ValueError(
            f"{size:,} bytes; allowed: at most {ENV_FILE_MAX_BYTES >> 20} MiB (save the environment "
            "without distance maps: Flatland recomputes them)"
        )
    data = Path(path).read_bytes()
    try:
        env_dict = _EnvUnpickler(data).load()
    except ValueError:
        raise
    except Exception as exc:  # a damaged or foreign file: unpickling raises many kinds
        raise ValueError(
            f"not a saved Flatland environment ({type(exc).__name__}: {str(exc)[:120]})"
        ) from None
    if not isinstance(env_dict, dict) or "grid" not in env_dict or not env_dict.get("agents"):
        raise ValueError("not a saved Flatland environment (no rail grid or no trains)")
    _check_size(env_dict)
    return env_dict


def _check_size(env_dict: dict[str, Any]) -> None:
    """Refuse an environment beyond what your own configuration may ask for (grid, trains, steps)."""
    grid, agents = env_dict["grid"], env_dict["agents"]
    try:
        height, widths = len(grid), {len(row) for row in grid}
    except TypeError:
        raise ValueError("not a saved Flatland environment (the rail grid is not rows of cells)") from None
    if len(widths) != 1 or not height:
        raise ValueError("not a saved Flatland environment (the rail grid's rows differ in length)")
    width = widths.pop()
    if max(height, width) > MAX_GRID_SIDE:
        raise ValueError(f"a {width} x {height} grid; allowed: at most {MAX_GRID_SIDE} cells a side")
    if not isinstance(agents, list) or len(agents) > MAX_TRAINS:
        count = len(agents) if hasattr(agents, "__len__") else agents
        raise ValueError(f"{count} trains; allowed: a list of at most {MAX_TRAINS}")
    steps = env_dict.get("max_episode_steps")
    if steps is not None and (not isinstance(steps, Integral) or not 0 < steps <= MAX_STEPS):
        raise ValueError(f"max_episode_steps {steps!r}; allowed: 1 to {MAX_STEPS:,}")


def read_env_file(path: Path) -> dict[str, Any]:
    """The state saved in a Flatland environment file (``RailEnvPersister.save(env, "x.pkl")``).

    :raises ValueError: not a ``.pkl``, names a class outside :data:`PICKLE_ALLOWED`, is larger than
        :data:`ENV_FILE_MAX_BYTES` or would build more than :data:`ENV_FILE_BUDGET`, or is not an
        environment (no grid or no trains) within :data:`MAX_GRID_SIDE`, :data:`MAX_TRAINS` and
        :data:`MAX_STEPS`.
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
