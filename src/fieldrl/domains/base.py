"""What every application domain provides to the rest of fieldrl: the written domain contract.

A domain is a plain object (usually a module-level instance of a ``Domain`` subclass). Evaluation,
training and reports only talk to this interface, so a new domain never changes the runner. Everything
they use is declared here, with its default: nothing is probed for with ``getattr``.

* :class:`Domain` (generic in its pydantic parameter model ``P``): name, parameters, envs, heuristics,
  KPIs, the per-episode trace and the report section. A domain holds no state between calls:
  what ``episode_trace`` needs from the simulators travels in the :class:`EpisodeRecord`.
* :class:`EvalEnvs`: a fixed batch of held-out episodes stepped in lockstep, as the runner plays them;
  :class:`LockstepEnvs` is the one lockstep loop (over Gymnasium envs here; over PettingZoo parallel
  envs in :class:`~fieldrl.domains.multiagent.ParallelLockstepEnvs`).
* :class:`Settings`: the base of every heuristic's settings model (:class:`NoSettings` for none).
* Multi-agent domains subclass :class:`~fieldrl.domains.multiagent.ParallelDomain`, which derives their
  training and evaluation envs from one ``make_parallel_env``.

:func:`fieldrl.testing.check_domain` checks a domain against this contract.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

import numpy as np
from pydantic import BaseModel, ConfigDict

from fieldrl.domains.speed import DEFAULT_SPEED, Speed
from fieldrl.policies.base import Policy

if TYPE_CHECKING:  # pandas and gymnasium load where they are used: checking a scenario needs neither
    import gymnasium as gym
    import pandas as pd

    from fieldrl.reportkit.context import ReportContext

#: False while a scenario is checked without building anything (``fieldrl validate`` without
#: ``--build``): params validators then skip the checks that start a simulator (SUMO, Flatland),
#: which ``run`` and ``validate --build`` still make before anything is written.
SIMULATOR_CHECKS: ContextVar[bool] = ContextVar("simulator_checks", default=True)

#: a domain's scenario parameter model
P = TypeVar("P", bound=BaseModel)


@dataclass(frozen=True)
class KPI:
    """An episode-level key performance indicator in the domain's own units.

    :param name: column-safe identifier, e.g. ``tumour_burden``.
    :param label: words a stakeholder reads, e.g. ``Final tumour burden``.
    :param unit: unit shown beside values, e.g. ``% of initial``.
    :param higher_is_better: direction used for "best" and for findings.
    :param fmt: format spec used in tables.
    :param wall_clock: a computation time measured on this machine: it varies from run to run,
        so it is left out of determinism checks and never decides which policy is "best".
    :param among: name of the KPI whose share this one is averaged over (e.g. arrival delay over the
        trains that ``arrived``). Findings do not call a policy better or worse on it when the two
        policies clearly differ on that share: the averages are over different populations.
    :param binary: each episode's value is yes or no (0 or 100 %, e.g. survival): its mean is a rate, and
        an interquartile mean of it means nothing, so reports leave the IQM out.
    :param ranked: False for a measure that is a trade-off rather than a goal (e.g. the drug given):
        reports describe it as higher or lower, never better or worse, and mark no best policy on it.
        Computation times (``wall_clock``) are never ranked either.
    """

    name: str
    label: str
    unit: str
    higher_is_better: bool
    fmt: str = ".3g"
    wall_clock: bool = False
    among: str | None = None
    binary: bool = False
    ranked: bool = True


class Settings(BaseModel):
    """Base of every heuristic's settings model: a scenario's ``settings`` mapping, unknown keys refused."""

    model_config = ConfigDict(extra="forbid")


class NoSettings(Settings):
    """No settings."""


@dataclass(frozen=True)
class HeuristicSpec:
    """A named baseline controller and the settings it accepts.

    :param settings_model: a :class:`Settings` model validating the ``settings`` mapping of a
        scenario's heuristic entry (:class:`NoSettings` for none).
    :param build: ``build(settings, params, name) -> Policy``.
    :param description: one line for ``fieldrl list`` and the report appendix.
    :param oracle: an exact optimiser that knows what no practitioner can (the model, the future): a
        reference, never "the best standard policy"; reports name it as the optimum it is.
    :param imitable: False for a controller whose actions are not its decisions (e.g. one that hands the
        simulator its own program and ignores the action), so there is nothing to behaviour-clone.
    :param not_askable: why this controller cannot be asked what it would do in a state another policy
        is driving (a program running inside the simulator, a planner whose plan is its own earlier
        decisions), in words that follow "it"; None where it can be. Decision differences then compare
        the learned policy with the best standard policy that can be asked.
    """

    settings_model: type[Settings]
    build: Callable[[Any, Any, str], Policy]
    description: str
    oracle: bool = False
    imitable: bool = True
    not_askable: str | None = None

    @property
    def why_not_askable(self) -> str | None:
        """Why the controller cannot be asked about another policy's states; None where it can be."""
        if self.not_askable is None and not self.imitable:
            return "hands the simulator whole plans: its actions are not its decisions"
        return self.not_askable


@dataclass(frozen=True)
class StressAxis:
    """A condition of the world a run's trained policies are tested under, moved away from where they
    trained (``fieldrl stress``): nothing is retrained, only the held-out episodes are played again.

    :param label: words for the report and the figure's axis, e.g. ``Observation noise``.
    :param unit: unit of the values, e.g. ``x the scenario's demand`` ("" for none).
    :param points: the values tested by default, in increasing order.
    :param low: smallest value allowed.
    :param high: largest value allowed.
    :param trained: ``params -> value`` the run's own params have (where training and the plain
        held-out evaluation were); a stress point at this value is the plain evaluation again.
    :param apply: ``(raw params, value) -> raw params`` of the world at ``value``: only the world
        changes, never a policy's own settings; the domain's params model validates the result.
    :param fmt: format spec of a value in tables and sentences.
    :param log: values that grow by factors (an interval between breakdowns): the stress map's axis
        is logarithmic.
    :param problem: ``raw params -> why the axis cannot move this world, or None`` (a market drawn
        anew every episode has no frontier to shift); such an axis is refused when named and left out
        of a stress test that names none.
    """

    label: str
    unit: str
    points: tuple[float, ...]
    low: float
    high: float
    trained: Callable[[Any], float]
    apply: Callable[[dict[str, Any], float], dict[str, Any]]
    fmt: str = ".3g"
    log: bool = False
    problem: Callable[[dict[str, Any]], str | None] = lambda raw: None


def field_axis(
    field: str,
    label: str,
    unit: str,
    points: Sequence[float],
    low: float,
    high: float,
    trained: Callable[[Any], float] | None = None,
    fmt: str = ".3g",
) -> StressAxis:
    """A :class:`StressAxis` that sets one params field to the value (``trained``: how to read the
    run's own value where the field alone does not hold it, e.g. a preset's default)."""
    return StressAxis(
        label,
        unit,
        tuple(float(v) for v in points),
        low,
        high,
        trained or (lambda params: float(getattr(params, field))),
        lambda raw, value: {**raw, field: value},
        fmt,
    )


class EvalEnvs(Protocol):
    """A fixed batch of episodes, one per seed, stepped in lockstep without autoreset.

    After an environment finishes, its entries in later steps are ignored by the runner (``active``
    mask); implementations may return anything there. A class may subclass this protocol to take the
    defaults of :meth:`final_extras` and :meth:`close`.

    :ivar n: number of episodes.
    :ivar initial_info: set by ``reset``: arrays of shape ``(n, ...)`` describing each episode's start
        (e.g. chemo's initial cell counts); ``episode_kpis`` reads them from ``record.initial_info``.
    """

    n: int
    initial_info: dict[str, np.ndarray]

    def reset(self) -> np.ndarray:
        """Start every episode (each with its own seed); return observations with a leading batch axis."""
        ...

    def step(
        self, actions: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, np.ndarray]]:
        """Return ``obs, reward, terminated, truncated, info`` with a leading batch axis.

        ``info`` maps names to arrays of shape ``(n, ...)``; the domain's
        ``episode_kpis`` reads them.
        """
        ...

    def final_extras(self) -> dict[str, Any]:
        """What the domain's ``episode_trace`` needs from the simulators beyond the per-step ``info``.

        The runner calls this once every episode has ended, before :meth:`close`, and hands the result
        over as ``EpisodeRecord.extras`` (rail: each episode's network and train moves, for the map).
        Default: nothing.
        """
        return {}

    def close(self) -> None:
        """Free the simulators; the runner calls it when the batch ends, also after an error.

        Default: nothing to free.
        """
        return None


@dataclass
class EpisodeRecord:
    """Everything the runner saw for a batch of episodes, stacked over time.

    Arrays have shape ``(steps, n, ...)``; ``active[t, i]`` is True while episode
    ``i`` was still running at step ``t`` (including its final step).

    :param extras: what the eval envs handed over once every episode had ended
        (:meth:`EvalEnvs.final_extras`); domain-specific, read by the domain's ``episode_trace``.
    """

    rewards: np.ndarray
    actions: np.ndarray
    active: np.ndarray
    terminated: np.ndarray
    info: dict[str, np.ndarray] = field(default_factory=dict)
    initial_info: dict[str, np.ndarray] = field(default_factory=dict)
    extras: dict[str, Any] = field(default_factory=dict)

    @property
    def n(self) -> int:
        """Number of episodes."""
        return int(np.shape(self.active)[1])

    @property
    def lengths(self) -> np.ndarray:
        return self.active.sum(axis=0)

    @property
    def returns(self) -> np.ndarray:
        return np.where(self.active, self.rewards, 0.0).sum(axis=0)

    @property
    def last_step(self) -> np.ndarray:
        """Index of each episode's last active step, shape ``(n,)`` (0 for an episode with no steps)."""
        active = np.asarray(self.active, dtype=bool)
        if active.shape[0] == 0:
            return np.zeros(active.shape[1], dtype=np.intp)
        last = active.shape[0] - 1 - np.argmax(active[::-1], axis=0)
        return np.where(active.any(axis=0), last, 0)

    def final(self, key: str, dtype: Any = float) -> np.ndarray:
        """``info[key]`` at each episode's last active step, shape ``(n, ...)`` (a running total's end)."""
        return np.asarray(self.info[key], dtype=dtype)[self.last_step, np.arange(self.n)]


class Domain(ABC, Generic[P]):
    """Base class for application domains; subclasses fill in the class attributes.

    Declare the parameter model as the type argument and as ``params_model``:
    ``class ChemoDomain(Domain[ChemoParams]): params_model = ChemoParams``.

    :param name: registry name used in scenario files (``domain: chemo``).
    :param title: human title for reports.
    :param params_model: pydantic model of the domain's scenario parameters.
    :param kpis: KPIs in report order; the first is the default primary KPI.
    :param heuristics: baseline controllers by name.
    :param headline_kpis: the measures the domain's stakeholder reads first (page 1 of the report), in
        that order; empty means the primary KPI and the next measured ones.
    :param glossary: terms the report uses that a stakeholder may not know, each explained in a sentence
        (page 1, "How to read this").
    """

    name: str
    title: str
    params_model: type[P]
    kpis: Sequence[KPI]
    heuristics: dict[str, HeuristicSpec]
    headline_kpis: Sequence[str] = ()
    glossary: dict[str, str] = {}
    #: params fields that name a user's file; a relative path is relative to the scenario file
    file_params: Sequence[str] = ()
    #: keys of ``info`` (numeric, fixed shape) that the eval envs stack for ``episode_kpis``.
    info_keys: Sequence[str] = ()
    #: metrics beyond the KPIs that ``episode_kpis`` returns and that are computation times
    #: measured on this machine (they differ from run to run, unlike everything else).
    extra_wall_clock_metrics: Sequence[str] = ()
    #: held-out episodes the runner plays in one batch of :meth:`make_eval_envs` (fewer where each
    #: episode holds a heavy simulator; 1 where only one simulation may run per process, as libsumo)
    eval_batch_size: int = 256
    #: heuristics (their ``use`` names) that can shield a learned policy at run time (a learned entry's
    #: ``shield:``); empty: the domain has no runtime shield
    shield_heuristics: Sequence[str] = ()
    #: params a learned entry may set for itself (its ``params:``): the controller's own design
    #: (decision interval, reward), never the world all policies are compared in; name -> what it is
    policy_params: dict[str, str] = {}
    #: the choices ``fieldrl tune`` tries for some of :attr:`policy_params`: name -> {label: value}
    #: (labels, not values, go to the sampler: a reward's weights are a dict)
    tunable_policy_params: dict[str, dict[str, Any]] = {}
    #: conditions of the world ``fieldrl stress`` can move away from training: name -> axis
    stress_axes: dict[str, StressAxis] = {}
    #: how fast it trains and plays, as measured (``fieldrl list``'s and ``validate``'s rough time): write
    #: it as a literal ``speed = Speed(...)`` in the class body, which ``fieldrl list`` reads from source
    #: without importing the domain (:func:`~fieldrl.domains.speed.declared_speed`)
    speed: Speed = DEFAULT_SPEED

    def resolve_files(self, params: dict[str, Any], folder: Path) -> dict[str, Any]:
        """Raw params (or a variant's overrides) with every :attr:`file_params` path made absolute.

        The scenario loader calls this with the scenario file's folder (the working folder for a
        scenario given as text), so the run folder's snapshot finds the file from anywhere. A value
        with a scheme (traffic's ``sumo-rl:<path>``) is left as it is.
        """
        resolved = dict(params)
        for key in self.file_params:
            value = resolved.get(key)
            if isinstance(value, str) and value and not Path(value).is_absolute() and ":" not in value:
                resolved[key] = os.path.normpath(Path(folder).absolute() / value)
        return resolved

    def input_files(self, params: dict[str, Any]) -> dict[str, Path]:
        """The user's files a simulation with these params reads: where each is named -> its path.

        ``params`` are raw, already resolved by :meth:`resolve_files` and validated. fieldrl pins
        each file by SHA-256 in the run folder, so a file changed after the run started is refused
        by ``evaluate``, ``--resume`` and ``report`` instead of silently used. Default: the
        :attr:`file_params` that are set; a domain whose files name further files (a SUMO
        configuration's network and additional files) lists those too.
        """
        return {
            key: Path(value)
            for key in self.file_params
            if isinstance(value := params.get(key), str) and value
        }

    def held_out_params(self, params: P, eval_seeds: Sequence[int]) -> P:
        """``params`` as the held-out evaluation on ``eval_seeds`` (scenario order) uses them.

        Default: unchanged. A domain whose held-out cases come from the user (chemo's patient
        cohort) binds them to the seeds here, and raises ``ValueError`` if it cannot; the scenario
        loader calls this at validation, so the problem is found before anything runs.
        """
        return params

    def make_env(self, params: P, seed: int | None = None) -> gym.Env:
        """A single-agent Gymnasium environment (reset it with ``seed`` for reproducibility).

        Optional for multi-agent domains (:class:`~fieldrl.domains.multiagent.ParallelDomain`), which
        build PettingZoo parallel envs instead.
        """
        raise NotImplementedError(f"the {self.name} domain has no single-agent Gymnasium env")

    def make_train_vec_env(self, params: P, n_envs: int, seed: int) -> Any:
        """A Stable-Baselines3 ``VecEnv`` for training; override where a batched engine pays.

        No ``Monitor`` here: training adds one ``VecMonitor`` around whatever this returns.
        """
        from stable_baselines3.common.vec_env import DummyVecEnv

        venv = DummyVecEnv([partial(self.make_env, params) for _ in range(n_envs)])
        venv.seed(seed)
        return venv

    def make_eval_envs(self, params: P, seeds: Sequence[int], cases: Sequence[int] | None = None) -> EvalEnvs:
        """One episode per seed, stepped together; override where a batched engine pays.

        :param seeds: the env seed of each episode.
        :param cases: the held-out evaluation seed each episode belongs to (several episodes of
            one case when ``episodes_per_seed > 1``); ``None`` means every episode is its own case.
            Domains whose held-out case is more than a seed (e.g. a whole problem) read it here.
        """
        return LockstepEnvs([self.make_env(params) for _ in seeds], seeds, self.info_keys)

    def wall_clock_metrics(self) -> set[str]:
        """Names of the result metrics that are machine-dependent computation times."""
        return {k.name for k in self.kpis if k.wall_clock} | set(self.extra_wall_clock_metrics)

    @abstractmethod
    def episode_kpis(self, record: EpisodeRecord) -> dict[str, np.ndarray]:
        """KPI values for every episode in ``record``: name -> array of shape ``(n,)``.

        Every KPI in :attr:`kpis` is there; more metrics may be (e.g. the wall-clock ones of
        :attr:`extra_wall_clock_metrics`).
        """

    def episode_trace(self, record: EpisodeRecord, index: int) -> pd.DataFrame:
        """Per-step trace of one episode for the report's domain figures (optional).

        Reads only ``record`` (its ``extras`` hold what the eval envs handed over at the end).
        """
        import pandas as pd

        return pd.DataFrame({"step": np.arange(int(record.lengths[index]))})

    def report_section(self, context: ReportContext) -> list[Any]:
        """Reportlab flowables with the domain's own figures and findings (optional).

        :param context: the run's numbers behind accessors, and the means to add figures and text.
        """
        return []

    # -- side-by-side replays (``fieldrl replay``)
    def replay_snapshot(self, envs: EvalEnvs, index: int) -> dict[str, Any]:
        """Plain data (numbers, lists, numpy arrays; nothing that holds the simulator) describing episode
        ``index`` of ``envs`` as it stands now: one replay frame's state.

        Called after ``reset`` and after every step. The replay adds ``step``, ``reward`` (of the last
        step), ``return`` (so far) and ``action`` (the action that led here; None after reset) itself.
        A ``clock`` (the simulator's time, a number comparable between policies) makes the replay show
        both episodes at the same time rather than the same step: where policies decide at different
        intervals, or the simulator skips idle steps. Default: nothing more.
        """
        return {}

    def draw_replay(self, ax: Any, history: Sequence[dict[str, Any]], title: str) -> None:
        """Draw the latest snapshot of ``history`` (every snapshot of the episode so far, oldest first)
        on the matplotlib axes ``ax``, titled ``title``. Default: the return so far, step by step."""
        steps = [h["step"] for h in history]
        ax.plot(steps, [h["return"] for h in history], color="#1f77b4")
        ax.set_xlabel("step")
        ax.set_ylabel("return so far")
        ax.set_title(title, fontsize=9)

    def replay_divergence(self, a: dict[str, Any], b: dict[str, Any]) -> float:
        """How far apart two policies' episodes are at the same step (``a``, ``b``: their snapshots),
        for choosing the storyboard's moments. Default: the gap between their returns so far."""
        return abs(float(a.get("return", 0.0)) - float(b.get("return", 0.0)))

    # -- decision differences (what the learned policy does differently from a standard one)
    def decision_features(self, envs: EvalEnvs, n_features: int) -> list[str]:
        """Names of one agent's ``n_features`` observation features, in order, for the rules that say
        *when* a learned policy decides differently (``envs``: the held-out episodes just reset).
        Default: ``obs[0]``, ``obs[1]``, ... ; a domain names them in its stakeholder's words."""
        return [f"obs[{i}]" for i in range(n_features)]

    def effective_actions(self, envs: EvalEnvs, actions: np.ndarray) -> np.ndarray:
        """``actions`` as the simulator will read them now (a choice the env ignores made plain), so that
        two policies are not told apart by choices that change nothing. Default: as they are."""
        return actions

    def ask_problem(self, use: str, params: P) -> str | None:
        """Why heuristic ``use`` cannot be asked what it would do in another policy's states under
        ``params``, in words that follow "it"; None where it can. Default: the heuristic's own
        :attr:`HeuristicSpec.why_not_askable`; a domain adds what depends on the setting."""
        return self.heuristics[use].why_not_askable

    def action_words(self, envs: EvalEnvs) -> list[str] | None:
        """Words for the actions of ``envs`` (the held-out episodes just reset): a discrete action's
        values (``["hold", "go"]``), a multi-discrete action's parts, a continuous action's dimensions
        (``["dose"]``); or None (numbers)."""
        return None

    def heuristic_problem(self, use: str, params: P) -> str | None:
        """Why heuristic ``use`` cannot run with ``params``, in words naming the params field; or None.

        For combinations the settings and parameter models cannot see one by one (each is
        validated on its own); :func:`fieldrl.scenario_checks.check_heuristics` asks this for every
        heuristic entry and variant when a scenario is validated. Default: every heuristic fits every
        params.
        """
        return None

    def environment_safeguard(self, params: P) -> str | None:
        """The safeguard this domain's environment itself puts between a learned action and the world
        under ``params`` (a repair or a veto the policy was evaluated behind, e.g. the UAV pipeline's
        rectifier), in words; None where the action is taken as the policy gives it. A bundle holds the
        network alone, so ``fieldrl export`` refuses a policy evaluated behind one."""
        return None

    def shielded_policy(self, label: str, learned: Policy, shield: Policy, patience: int) -> Policy:
        """``learned`` acting through the runtime shield ``shield`` (one of :attr:`shield_heuristics`)."""
        raise NotImplementedError(f"the {self.name} domain has no runtime shield")

    def checked_params(self, params: BaseModel) -> P:
        """``params`` if it is this domain's parameter model (a programming error otherwise)."""
        if not isinstance(params, self.params_model):
            raise TypeError(
                f"{self.name} domain needs {self.params_model.__name__}, got {type(params).__name__}"
            )
        return params

    def kpi(self, name: str) -> KPI:
        for k in self.kpis:
            if k.name == name:
                return k
        raise KeyError(name)


class LockstepEnvs(EvalEnvs):
    """Step a list of envs together, one seeded episode each, no autoreset: fieldrl's one lockstep loop.

    This class steps single-agent Gymnasium envs; subclasses change what one episode's reset and step
    are (:class:`~fieldrl.domains.multiagent.ParallelLockstepEnvs`: PettingZoo parallel envs with agent
    slots) through :meth:`_reset_episode`, :meth:`_step_episode`, :meth:`_observations` and :meth:`_info`.
    """

    def __init__(self, envs: Sequence[Any], seeds: Sequence[int], info_keys: Sequence[str]):
        self.envs = list(envs)
        self.seeds = [int(s) for s in seeds]
        self.n = len(self.envs)
        self.info_keys = tuple(info_keys)
        self.initial_info: dict[str, np.ndarray] = {}
        self._done = np.zeros(self.n, dtype=bool)
        self._last_obs: list[Any] = [None] * self.n
        self._last_info: list[dict[str, Any]] = [{} for _ in self.envs]

    # -- the loop
    def reset(self) -> np.ndarray:
        for i, (env, seed) in enumerate(zip(self.envs, self.seeds, strict=True)):
            self._reset_episode(i, env, seed)
        self._done[:] = False
        self.initial_info = self._info()
        return self._observations()

    def step(
        self, actions: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, np.ndarray]]:
        actions = np.asarray(actions)
        rewards = np.zeros(self.n)
        terminated = np.zeros(self.n, dtype=bool)
        truncated = np.zeros(self.n, dtype=bool)
        for i, env in enumerate(self.envs):
            if self._done[i]:
                continue
            rewards[i], terminated[i], truncated[i] = self._step_episode(i, env, actions[i])
            self._done[i] = terminated[i] or truncated[i]
        return self._observations(), rewards, terminated, truncated, self._info()

    def close(self) -> None:
        """Close every episode's simulator, even if one fails to close (its error is raised after)."""
        errors = []
        for env in self.envs:
            try:
                env.close()
            except Exception as exc:
                errors.append(exc)
        if errors:
            raise errors[0]

    # -- one episode (Gymnasium envs)
    def _reset_episode(self, i: int, env: Any, seed: int) -> None:
        self._last_obs[i], self._last_info[i] = env.reset(seed=seed)

    def _step_episode(self, i: int, env: Any, action: Any) -> tuple[float, bool, bool]:
        """Step episode ``i`` (still running) with its action; return ``reward, terminated, truncated``."""
        obs, reward, terminated, truncated, info = env.step(action)
        self._last_obs[i], self._last_info[i] = obs, info
        return reward, terminated, truncated

    def _observations(self) -> np.ndarray:
        return np.stack(self._last_obs)

    def _info(self) -> dict[str, np.ndarray]:
        """The :attr:`info_keys` of every episode's latest info, stacked."""
        return {k: np.stack([np.asarray(i[k], dtype=float) for i in self._last_info]) for k in self.info_keys}
