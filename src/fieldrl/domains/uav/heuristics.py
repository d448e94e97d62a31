"""Baseline offloading rules: centralised controllers that hand each env a full slot plan.

They read the simulators through ``bind_envs`` (the runner calls it after reset) and give every
episode a :class:`Plan` (server, shares and offloaded fraction of each task) through
``env.set_plan``; their returned actions are ignored. UAVs fly the same SOCP waypoints as the
full pipeline unless ``trajectory: hover`` is set, so the rules differ from the pipeline only in
who serves which task and how much is offloaded.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from pydantic import Field

from fieldrl.domains.base import HeuristicSpec, Settings
from fieldrl.domains.uav.pipeline import SHARE_MODES
from fieldrl.domains.uav.rectifier import equal_shares
from fieldrl.policies.base import Policy
from fieldrl.simulators.uav.engine import LOCAL, Allocation, UavWorld
from fieldrl.simulators.uav.params import UavParams

if TYPE_CHECKING:  # loaded where used: checking a scenario needs none of this
    from fieldrl.domains.uav.env import UavParallelEnv


class RuleSettings(Settings):
    trajectory: Literal["socp", "hover"] = Field(
        "socp", description="How the UAVs fly under this rule: SOCP waypoints, or hovering in place."
    )


def _equal(world: UavWorld, server: np.ndarray) -> Allocation:
    present = world.tasks.present
    server = np.where(present, server, LOCAL)
    share = equal_shares(server, present, world.m + 1)
    return Allocation(server, share, share.copy())


def balanced_ratio(world: UavWorld, alloc: Allocation) -> np.ndarray:
    """Offloaded fraction that equalises local and remote time, ``T_loc / (T_loc + T_rem)``."""
    terms = world.remote_terms(alloc)
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = terms["t_local"] / (terms["t_local"] + terms["t_remote"])
    return np.where(alloc.server >= 0, np.nan_to_num(ratio), 0.0)


def all_local(world: UavWorld, rng: np.random.Generator) -> tuple[Allocation, np.ndarray]:
    alloc = _equal(world, np.full(world.n, LOCAL))
    return alloc, np.zeros(world.n)


def nearest_server(world: UavWorld, rng: np.random.Generator) -> tuple[Allocation, np.ndarray]:
    alloc = _equal(world, np.argmin(world.server_distance(), axis=1))
    return alloc, np.where(alloc.server >= 0, 1.0, 0.0)


def random_rule(world: UavWorld, rng: np.random.Generator) -> tuple[Allocation, np.ndarray]:
    alloc = _equal(world, rng.integers(world.m + 1, size=world.n))
    return alloc, np.where(alloc.server >= 0, rng.random(world.n), 0.0)


def greedy_rate(world: UavWorld, rng: np.random.Generator) -> tuple[Allocation, np.ndarray]:
    alloc = _equal(world, np.argmax(world.spectral_efficiency(), axis=1))
    return alloc, balanced_ratio(world, alloc)


Rule = Callable[[UavWorld, np.random.Generator], tuple[Allocation, np.ndarray]]


class PlanHeuristic(Policy):
    """Apply ``rule`` to every live episode each step (centralised; needs ``bind_envs``)."""

    def __init__(self, name: str, rule: Rule, trajectory: str):
        self.name = name
        self.rule = rule
        self.trajectory = trajectory
        self.envs: Any = None
        self.rngs: list[np.random.Generator] = []

    def reset(self, n_envs: int) -> None:
        self.envs = None

    def bind_envs(self, envs: Any) -> None:
        self.envs = envs
        self.rngs = [np.random.default_rng([int(s), 17]) for s in envs.seeds]

    def act(self, obs: np.ndarray, episode_start: np.ndarray) -> np.ndarray:

        from fieldrl.domains.uav.env import Plan

        if self.envs is None:
            raise RuntimeError(f"{self.name} is a centralised rule: the runner must call bind_envs first")
        for i, env in enumerate(self.envs.envs):
            sim: UavParallelEnv = env
            if sim.agents:
                alloc, ratio = self.rule(sim.world, self.rngs[i])
                sim.set_plan(Plan(alloc, ratio, self.trajectory))
        return np.zeros(obs.shape[:2], dtype=np.int64)


class FixedSettings(Settings):
    admit: int = Field(
        3, ge=0, le=200, description="Tasks each UAV admits (the largest admit level <= this)."
    )
    shares: Literal["equal", "demand"] = Field("demand", description="How a UAV splits its band and CPU.")


class FixedAllocation(Policy):
    """The full pipeline (SOCP, rectifier, LP) driven by one fixed allocation action instead of DRL.

    Not centralised: it returns the same discrete action for every UAV, so it measures what the
    learned allocation adds to the optimisation stages. Only meaningful with ``pipeline: true``.
    """

    def __init__(self, name: str, action: int):
        self.name = name
        self.action = int(action)

    def reset(self, n_envs: int) -> None:
        pass

    def act(self, obs: np.ndarray, episode_start: np.ndarray) -> np.ndarray:
        return np.full(obs.shape[:2], self.action, dtype=np.int64)


def _fixed(settings: FixedSettings, params: UavParams, name: str) -> FixedAllocation:
    levels = list(params.admit_levels)
    index = max((i for i, k in enumerate(levels) if k <= settings.admit), key=lambda i: levels[i], default=0)
    return FixedAllocation(name, index * len(SHARE_MODES) + SHARE_MODES.index(settings.shares))


def _spec(rule: Rule, description: str) -> HeuristicSpec:
    return HeuristicSpec(
        RuleSettings,
        lambda s, p, name: PlanHeuristic(name, rule, s.trajectory),
        description,
        imitable=False,  # the rule hands the simulator a whole plan; its actions are placeholders
    )


HEURISTICS: dict[str, HeuristicSpec] = {
    "all-local": _spec(all_local, "Every task runs on its vehicle."),
    "nearest": _spec(
        nearest_server, "Offload every task entirely to the nearest server (UAV or BS), equal shares."
    ),
    "random": _spec(random_rule, "Random server and random offloaded fraction, equal shares."),
    "greedy": _spec(
        greedy_rate,
        "Best instantaneous link, equal shares, fraction that equalises local and remote time.",
    ),
    "pipeline-fixed": HeuristicSpec(
        FixedSettings,
        _fixed,
        "The full pipeline (SOCP, rectifier, LP) with a fixed admission count instead of the learned one.",
    ),
}
