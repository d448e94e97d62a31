"""What every application domain provides to the rest of fieldrl.

A domain is a plain object (usually a module-level instance of a ``Domain``
subclass). Evaluation, training and reports only talk to this interface, so a
new domain never changes the runner.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
from pydantic import BaseModel

from fieldrl.policies.base import Policy

if TYPE_CHECKING:  # pandas and gymnasium load where they are used: checking a scenario needs neither
    import gymnasium as gym
    import pandas as pd

#: False while a scenario is checked without building anything (``fieldrl validate`` without
#: ``--build``): params validators then skip the checks that start a simulator (SUMO, Flatland),
#: which ``run`` and ``validate --build`` still make before anything is written.
SIMULATOR_CHECKS: ContextVar[bool] = ContextVar("simulator_checks", default=True)


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


@dataclass(frozen=True)
class HeuristicSpec:
    """A named baseline controller and the settings it accepts.

    :param settings_model: pydantic model (``extra="forbid"``) validating the
        ``settings`` mapping of a scenario's heuristic entry.
    :param build: ``build(settings, params, name) -> Policy``.
    :param description: one line for ``fieldrl list`` and the report appendix.
    :param oracle: an exact optimiser that knows what no practitioner can (the model, the future): a
        reference, never "the best standard policy"; reports name it as the optimum it is.
    """

    settings_model: type[BaseModel]
    build: Callable[[BaseModel, BaseModel, str], Policy]
    description: str
    oracle: bool = False


class EvalEnvs(Protocol):
    """A fixed batch of episodes, one per seed, stepped in lockstep without autoreset.

    After an environment finishes, its entries in later steps are ignored by the
    runner (``active`` mask); implementations may return anything there.
    """

    n: int

    def reset(self) -> np.ndarray: ...

    def step(
        self, actions: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, np.ndarray]]:
        """Return ``obs, reward, terminated, truncated, info`` with a leading batch axis.

        ``info`` maps names to arrays of shape ``(n, ...)``; the domain's
        ``episode_kpis`` reads them.
        """
        ...


@dataclass
class EpisodeRecord:
    """Everything the runner saw for a batch of episodes, stacked over time.

    Arrays have shape ``(steps, n, ...)``; ``active[t, i]`` is True while episode
    ``i`` was still running at step ``t`` (including its final step).
    """

    rewards: np.ndarray
    actions: np.ndarray
    active: np.ndarray
    terminated: np.ndarray
    info: dict[str, np.ndarray] = field(default_factory=dict)
    initial_info: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def lengths(self) -> np.ndarray:
        return self.active.sum(axis=0)

    @property
    def returns(self) -> np.ndarray:
        return np.where(self.active, self.rewards, 0.0).sum(axis=0)


class Domain:
    """Base class for application domains; subclasses fill in the class attributes.

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
    params_model: type[BaseModel]
    kpis: Sequence[KPI]
    heuristics: dict[str, HeuristicSpec]
    headline_kpis: Sequence[str] = ()
    glossary: dict[str, str] = {}
    #: params fields that name a user's file; a relative path is relative to the scenario file
    file_params: Sequence[str] = ()

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

    def held_out_params(self, params: BaseModel, eval_seeds: Sequence[int]) -> BaseModel:
        """``params`` as the held-out evaluation on ``eval_seeds`` (scenario order) uses them.

        Default: unchanged. A domain whose held-out cases come from the user (chemo's patient
        cohort) binds them to the seeds here, and raises ``ValueError`` if it cannot; the scenario
        loader calls this at validation, so the problem is found before anything runs.
        """
        return params

    def make_env(self, params: BaseModel, seed: int | None = None) -> gym.Env:
        """A single Gymnasium environment (reset it with ``seed`` for reproducibility)."""
        raise NotImplementedError

    def make_train_vec_env(self, params: BaseModel, n_envs: int, seed: int) -> Any:
        """A Stable-Baselines3 ``VecEnv`` for training; override where a batched engine pays.

        No ``Monitor`` here: training adds one ``VecMonitor`` around whatever this returns.
        """
        from stable_baselines3.common.vec_env import DummyVecEnv

        venv = DummyVecEnv([partial(self.make_env, params) for _ in range(n_envs)])
        venv.seed(seed)
        return venv

    def make_eval_envs(
        self, params: BaseModel, seeds: Sequence[int], cases: Sequence[int] | None = None
    ) -> EvalEnvs:
        """One episode per seed, stepped together; override where a batched engine pays.

        :param seeds: the env seed of each episode.
        :param cases: the held-out evaluation seed each episode belongs to (several episodes of
            one case when ``episodes_per_seed > 1``); ``None`` means every episode is its own case.
            Domains whose held-out case is more than a seed (e.g. a whole problem) read it here.
        """
        return LockstepEnvs([self.make_env(params) for _ in seeds], seeds, self.info_keys)

    #: keys of ``info`` (numeric, fixed shape) that ``LockstepEnvs`` stacks for ``episode_kpis``.
    info_keys: Sequence[str] = ()

    #: metrics beyond the KPIs that ``episode_kpis`` returns and that are computation times
    #: measured on this machine (they differ from run to run, unlike everything else).
    extra_wall_clock_metrics: Sequence[str] = ()

    def wall_clock_metrics(self) -> set[str]:
        """Names of the result metrics that are machine-dependent computation times."""
        return {k.name for k in self.kpis if k.wall_clock} | set(self.extra_wall_clock_metrics)

    def episode_kpis(self, record: EpisodeRecord) -> dict[str, np.ndarray]:
        """KPI values for every episode in ``record``: name -> array of shape ``(n,)``."""
        raise NotImplementedError

    def episode_trace(self, record: EpisodeRecord, index: int) -> pd.DataFrame:
        """Per-step trace of one episode for the report's domain figures (optional)."""
        import pandas as pd

        return pd.DataFrame({"step": np.arange(int(record.lengths[index]))})

    def report_section(self, context: Any) -> list[Any]:
        """Reportlab flowables with the domain's own figures and findings (optional)."""
        return []

    def heuristic_problem(self, use: str, params: BaseModel) -> str | None:
        """Why heuristic ``use`` cannot run with ``params``, in words naming the params field; or None.

        For combinations the settings and parameter models cannot see one by one (each is
        validated on its own); :func:`check_heuristics` asks this for every heuristic entry
        and variant when a scenario is validated. Default: every heuristic fits every params.
        """
        return None

    def checked_params(self, params: BaseModel) -> Any:
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


class LockstepEnvs:
    """Step a list of Gymnasium envs together, one seeded episode each, no autoreset."""

    def __init__(self, envs: Sequence[gym.Env], seeds: Sequence[int], info_keys: Sequence[str]):
        self.envs = list(envs)
        self.seeds = [int(s) for s in seeds]
        self.n = len(self.envs)
        self.info_keys = tuple(info_keys)
        self._done = np.zeros(self.n, dtype=bool)
        self._last_obs: list[Any] = []

    def _stack_info(self, infos: Sequence[dict[str, Any]]) -> dict[str, np.ndarray]:
        return {k: np.stack([np.asarray(i[k], dtype=float) for i in infos]) for k in self.info_keys}

    def reset(self) -> np.ndarray:
        results = [env.reset(seed=s) for env, s in zip(self.envs, self.seeds, strict=True)]
        self._done[:] = False
        self._last_obs = [o for o, _ in results]
        self.initial_info = self._stack_info([i for _, i in results])
        self._last_info = [i for _, i in results]
        return np.stack(self._last_obs)

    def step(self, actions: np.ndarray):
        rewards = np.zeros(self.n)
        terminated = np.zeros(self.n, dtype=bool)
        truncated = np.zeros(self.n, dtype=bool)
        for i, env in enumerate(self.envs):
            if self._done[i]:
                continue
            obs, r, term, trunc, info = env.step(actions[i])
            self._last_obs[i], self._last_info[i] = obs, info
            rewards[i], terminated[i], truncated[i] = r, term, trunc
            self._done[i] = term or trunc
        return (
            np.stack(self._last_obs),
            rewards,
            terminated,
            truncated,
            self._stack_info(self._last_info),
        )


def check_heuristics(scenario: Any, source: str) -> None:
    """Raise a ``ScenarioError`` for the first heuristic entry its domain refuses with some variant's params.

    ``scenario`` is a structurally valid :class:`~fieldrl.scenario.Scenario` (params already
    checked); the error names ``policies.heuristics[i].use``, its value, why, and which
    heuristics that variant does allow.
    """
    from fieldrl.domains import get_domain
    from fieldrl.errors import ScenarioError

    domain = get_domain(scenario.domain)
    for variant in scenario.variant_names:
        params = domain.params_model.model_validate(scenario.variant_params(variant))
        for i, entry in enumerate(scenario.policies.heuristics):
            problem = domain.heuristic_problem(entry.use, params)
            if problem is None:
                _check_build(domain, entry, params, source, f"policies.heuristics[{i}]", variant)
                continue
            allowed = [h for h in sorted(domain.heuristics) if domain.heuristic_problem(h, params) is None]
            where = "" if variant == "default" else f" (variant {variant})"
            raise ScenarioError(
                source,
                f"policies.heuristics[{i}].use",
                entry.use,
                f"{problem}{where}; heuristics allowed with these params: {', '.join(allowed) or 'none'}",
            )


def _check_build(
    domain: Domain, entry: Any, params: BaseModel, source: str, where: str, variant: str
) -> None:
    """Build the heuristic once, so that a setting only its constructor can judge (a portfolio index
    beyond the frontier, say) is refused at validation rather than in the middle of a run."""
    from fieldrl.errors import ScenarioError

    spec = domain.heuristics[entry.use]
    settings = spec.settings_model.model_validate(entry.settings)
    try:
        spec.build(settings, params, entry.label)
    except (ValueError, TypeError, KeyError, IndexError) as exc:
        shown = f" (variant {variant})" if variant != "default" else ""
        text = " ".join(str(exc).split()) or type(exc).__name__
        raise ScenarioError(source, f"{where}.settings", entry.settings, f"{text}{shown}") from None
