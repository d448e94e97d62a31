"""Standard signal controllers behind fieldrl's batched ``Policy`` protocol.

SUMO's own programs (fixed-time, Webster-timed fixed-time, actuated) run inside SUMO: the policy
only hands each junction to the program in ``bind_envs``. The others decide every interval from
the simulator's state (read through the bound ``TrafficEnv``s) and return stage requests, which
the env turns into safe transitions exactly as for learned policies.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import ConfigDict, Field, model_validator

from fieldrl.domains.base import HeuristicSpec, NoSettings, Settings
from fieldrl.policies.base import Policy

if TYPE_CHECKING:  # loaded where used: checking a scenario needs none of this
    from fieldrl.domains.traffic.env import TrafficEnv


class _Settings(Settings):
    """Settings taken as written: no number from a string, no integer from a float."""

    model_config = ConfigDict(strict=True)


class PedestrianActuatedSettings(_Settings):
    ped_max_wait_s: float = Field(
        40.0, ge=0.0, le=600.0, description="Serve a crossing once someone has waited this long (s)."
    )
    ped_call_count: int = Field(
        6, ge=1, le=200, description="Serve a crossing once this many people wait at it."
    )


class ActuatedSettings(_Settings):
    min_green_s: int | None = Field(
        None, ge=1, le=120, description="Actuated minimum green (s); None = the scenario's min_green_s."
    )
    max_green_s: int | None = Field(
        None, ge=5, le=600, description="Actuated maximum green (s); None = the scenario's max_green_s."
    )

    @model_validator(mode="after")
    def _order(self) -> ActuatedSettings:
        if (
            self.min_green_s is not None
            and self.max_green_s is not None
            and self.max_green_s < self.min_green_s
        ):
            raise ValueError(f"max_green_s ({self.max_green_s}) must be >= min_green_s ({self.min_green_s})")
        return self


class _EnvPolicy(Policy):
    """Base: binds the eval envs; subclasses choose a stage per junction."""

    def __init__(self, name: str):
        self.name = name
        self._envs: Any = None

    def reset(self, n_envs: int) -> None:
        self._envs = None

    def bind_envs(self, envs: Any) -> None:
        self._envs = envs

    def act(self, obs: np.ndarray, episode_start: np.ndarray) -> np.ndarray:
        n, slots = obs.shape[0], obs.shape[1]
        actions = np.zeros((n, slots), dtype=np.int64)
        if self._envs is None:
            return actions
        for i, env in enumerate(self._envs.envs):
            if not env.agents:
                continue
            for s, agent in enumerate(self._envs.slot_agents(i)):
                if agent is not None and agent in env.agents:
                    actions[i, s] = self.choose(env, agent)
        return actions

    def choose(self, env: TrafficEnv, agent: str) -> int:
        raise NotImplementedError


class SumoProgram(_EnvPolicy):
    """Let SUMO run one of its programs at every junction (actions are ignored)."""

    def __init__(
        self, name: str, program_id: str, min_green_s: int | None = None, max_green_s: int | None = None
    ):
        super().__init__(name)
        self.program_id = program_id
        self.limits = (min_green_s, max_green_s)

    def bind_envs(self, envs: Any) -> None:
        super().bind_envs(envs)
        for env in envs.envs:
            env.use_program(self.program_id)
            if self.limits != (None, None):
                env.set_green_limits(self.program_id, *self.limits)

    def choose(self, env: TrafficEnv, agent: str) -> int:
        return 0

    def realised_actions(self) -> np.ndarray:
        """What the program did, read back as the actions a policy in control would have taken:
        per (episode, agent slot) the stage each junction shows now, -1 while it changes stage
        (the warm start then takes the next stage shown) or where there is no junction.

        SUMO ignores this policy's actions, so a behaviour-cloning warm start from a program
        (Webster, say) learns these instead (``fieldrl.policies.imitation.collect`` calls it after
        every step)."""
        envs = self._envs
        out = np.full((len(envs.envs), envs.n_slots), -1, dtype=np.int64)
        for i, env in enumerate(envs.envs):
            for s, agent in enumerate(envs.slot_agents(i)):
                if agent is not None and env._handle is not None:
                    out[i, s] = env.displayed_stage(agent)
        return out


class WebsterTimed(_EnvPolicy):
    """Webster's cycle and splits (the ``webster`` program's) run on fieldrl's own stage
    controller: each stage keeps its Webster green, then the next stage Webster shows is asked
    for. Unlike the SUMO program it pays the controller's clearances, all-red included, as every
    controller fieldrl drives does (see ``TrafficEnv.advised_stage``)."""

    def choose(self, env: TrafficEnv, agent: str) -> int:
        return env.advised_stage(agent)


def _best(scores: list[float], mask: np.ndarray, current: int) -> int:
    allowed = [k for k in range(len(scores)) if mask[k]]
    if len(allowed) == 1:
        return allowed[0]
    best = max(allowed, key=lambda k: (scores[k], k == current))
    return int(best)


class MaxPressure(_EnvPolicy):
    """Varaiya's max-pressure: the stage whose green links have the largest sum of
    (queue on the incoming lane - queue on the outgoing lane). Vehicles only, as published."""

    def choose(self, env: TrafficEnv, agent: str) -> int:
        ctl = env.controllers[agent]
        lay = ctl.layout
        pressure = {
            i: env.queue(agent, src) - env.halting(dst)
            for i, (src, dst) in zip(lay.vehicle_links, lay.link_lanes, strict=True)
        }
        scores = [float(sum(pressure[i] for i in lay.green(k) if i in pressure)) for k in range(lay.n_stages)]
        return _best(scores + [-np.inf] * (env.n_stages - lay.n_stages), env.action_mask(agent), ctl.stage)


class LongestQueueFirst(_EnvPolicy):
    """The stage serving the most halting vehicles on its green approach lanes."""

    def choose(self, env: TrafficEnv, agent: str) -> int:
        ctl = env.controllers[agent]
        lay = ctl.layout
        scores = []
        for k in range(lay.n_stages):
            lanes = {
                src
                for i, (src, _) in zip(lay.vehicle_links, lay.link_lanes, strict=True)
                if i in lay.green(k)
            }
            scores.append(float(sum(env.queue(agent, lane) for lane in lanes)))
        return _best(scores + [-np.inf] * (env.n_stages - lay.n_stages), env.action_mask(agent), ctl.stage)


class PedestrianActuated(_EnvPolicy):
    """Gap-actuated control with pedestrian calls.

    After min green, the current stage is held while vehicles keep arriving on its green lanes
    (a moving vehicle within ``gap_m`` of the stop line or a queue still discharging), up to max
    green, as an actuated controller's gap-out does. A crossing where someone has waited
    ``ped_max_wait_s`` or ``ped_call_count`` people wait places a call that ends the green early:
    the next stage is the one serving the calling crossings (the exclusive pedestrian stage only
    when it serves more of them than any vehicle stage). On gap-out the controller serves the
    stage with the most people waiting, vehicles and pedestrians counted alike.
    """

    gap_m = 40.0

    def __init__(self, name: str, ped_max_wait_s: float, ped_call_count: int):
        super().__init__(name)
        self.ped_max_wait_s, self.ped_call_count = ped_max_wait_s, ped_call_count

    def choose(self, env: TrafficEnv, agent: str) -> int:
        ctl = env.controllers[agent]
        lay, mask = ctl.layout, env.action_mask(agent)
        if mask.sum() == 1:
            return int(np.flatnonzero(mask)[0])
        waits = [env.crossing_waits(c) for c in lay.crossings]
        served_now = lay.crossing_served(ctl.stage)
        calls = [
            j
            for j, (count, longest) in enumerate(waits)
            if not served_now[j] and (longest >= self.ped_max_wait_s or count >= self.ped_call_count)
        ]
        people, vehicle_stage = [], []
        for k in range(lay.n_stages):
            lanes = _green_lanes(lay, k)
            served = lay.crossing_served(k)
            vehicle_stage.append(bool(lanes))
            people.append(
                sum(env.halting(lane) for lane in lanes)
                + sum(waits[j][0] for j in range(len(served)) if served[j])
            )
        others = [k for k in range(lay.n_stages) if mask[k] and k != ctl.stage]
        if calls and others:
            covered = {k: sum(lay.crossing_served(k)[j] for j in calls) for k in others}
            best = max(others, key=lambda k: (covered[k], vehicle_stage[k], people[k]))
            if covered[best] > 0:
                return int(best)
        lanes_now = _green_lanes(lay, ctl.stage)
        arriving = sum(env.approaching(lane, self.gap_m) + env.halting(lane) for lane in lanes_now)
        if arriving > 0 and mask[ctl.stage]:
            return ctl.stage
        waiting_elsewhere = [k for k in others if people[k] > 0]
        if not waiting_elsewhere:
            return ctl.stage if mask[ctl.stage] else others[0]
        return int(max(waiting_elsewhere, key=lambda k: people[k]))


def _green_lanes(lay: Any, stage: int) -> set[str]:
    green = lay.green(stage)
    return {src for i, (src, _) in zip(lay.vehicle_links, lay.link_lanes, strict=True) if i in green}


HEURISTICS: dict[str, HeuristicSpec] = {
    "fixed-time": HeuristicSpec(
        NoSettings,
        lambda s, p, name: SumoProgram(name, "0"),
        "SUMO's fixed-time program as netconvert builds it (90 s cycle, 5 s pedestrian clearance, "
        "3 s yellow).",
        # SUMO runs its own program and ignores the actions; a warm start learns the stages it showed
        not_askable="runs inside SUMO",
    ),
    "webster": HeuristicSpec(
        NoSettings,
        lambda s, p, name: SumoProgram(name, "webster"),
        "Fixed-time with Webster cycle and splits for the busiest period (SUMO tlsCycleAdaptation.py), "
        "pedestrian walk and clearance minimums kept.",
        # SUMO runs its own program and ignores the actions; a warm start learns the stages it showed
        not_askable="runs inside SUMO",
    ),
    "webster-timed": HeuristicSpec(
        NoSettings,
        lambda s, p, name: WebsterTimed(name),
        "Webster's cycle and splits run on fieldrl's signal controller, with the same clearances "
        "(all-red included) as every controller it drives; generated demand only.",
    ),
    "actuated": HeuristicSpec(
        ActuatedSettings,
        lambda s, p, name: SumoProgram(name, "actuated", s.min_green_s, s.max_green_s),
        "SUMO's gap-based actuated control on the same phases (min/max green from the scenario unless "
        "set in its settings).",
        # SUMO runs its own program and ignores the actions; a warm start learns the stages it showed
        not_askable="runs inside SUMO",
    ),
    "max-pressure": HeuristicSpec(
        NoSettings, lambda s, p, name: MaxPressure(name), "Max-pressure (Varaiya 2013) over vehicle queues."
    ),
    "longest-queue-first": HeuristicSpec(
        NoSettings,
        lambda s, p, name: LongestQueueFirst(name),
        "Serve the stage with the longest vehicle queue.",
    ),
    "pedestrian-actuated": HeuristicSpec(
        PedestrianActuatedSettings,
        lambda s, p, name: PedestrianActuated(name, s.ped_max_wait_s, s.ped_call_count),
        "Gap-actuated with pedestrian calls (longest wait or crowd size at a crossing).",
    ),
}
