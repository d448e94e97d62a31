"""Dispatchers practitioners would write, as centralised ``Policy`` objects reading the Flatland env.

All four answer the semi-hierarchical env's decisions (dispatch: depart / hold / cancel; routing:
left / forward / right / stop). They read ``envs.envs[i]`` (:class:`RailParallelEnv`, hence the
Flatland ``RailEnv`` inside) through ``bind_envs``, and always run unshielded (the reservation rule
they share with the env's shield lives in :mod:`fieldrl.domains.rail.reservation`).

* ``greedy-shortest-route`` (formerly ``shortest-path``, still accepted): every train departs as soon
  as it may and, at each switch, takes the exit with the shortest remaining route to its target
  (Flatland's distance map, so the route is re-chosen at every switch); nothing is reserved.
* ``flatland-shortest-path``: Flatland's own ``ShortestPathPolicy`` (``flatland.envs.rail_env_policies``)
  answering the same decisions: every train departs at once and follows the one path the policy fixes
  at its first decision. That path enters the target from the first listed direction with a path,
  not necessarily the shortest, so it arrives less often than ``greedy-shortest-route``; it is here
  so that results compare with published Flatland numbers.
* ``deadlock-avoiding``: a train departs only if no train on the map travels any cell-to-cell edge of
  its shortest path in the opposite direction (a directed-edge reservation: each train reserves the
  edges of its remaining path and frees them as it passes). Waiting trains are released in priority
  order (least timetable slack first), each release reserving its path before the next is checked,
  so two opposing trains are never released onto one single track.
* ``priority-reroute``: as above, but each waiting train may take any of its ``k`` shortest paths
  (Flatland's ``get_k_shortest_paths``), the shortest conflict-free one; the release order is a
  setting (FIFO by scheduled departure, least slack, or fastest first); trains that can no longer
  arrive before the episode's step limit are cancelled instead of clogging the network.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from pydantic import Field

from fieldrl.domains.base import HeuristicSpec, NoSettings, Settings
from fieldrl.domains.rail.actions import (
    CANCEL,
    DEPART,
    DISPATCH,
    FORWARD,
    HOLD,
    LEFT,
    NOOP,
    RIGHT,
    ROUTE,
    STOP,
)
from fieldrl.domains.rail.reservation import (
    Cell,
    EpisodePlan,
    k_paths,
    planned_turn,
    release_decisions,
    shortest_turn,
    slack_key,
)
from fieldrl.policies.base import Policy

if TYPE_CHECKING:  # loaded where used: checking a scenario needs none of this
    from fieldrl.domains.rail.env import RailParallelEnv

#: a dispatcher's decision as a Flatland action, for the monolithic env (cancel = never depart)
MONOLITHIC = {DEPART: 2, HOLD: 0, CANCEL: 0, LEFT: 1, FORWARD: 2, RIGHT: 3, STOP: 4}


class PrioritySettings(Settings):
    k: int = Field(4, ge=1, le=10, description="Alternative shortest paths tried per waiting train.")
    order: Literal["fifo", "slack", "speed"] = Field(
        "slack",
        description="Release order of waiting trains: fifo (scheduled departure), slack (least timetable "
        "slack first) or speed (fastest first).",
    )
    cancel_late: bool = Field(
        True, description="Cancel a waiting train that can no longer arrive before the step limit."
    )


class _Dispatcher(Policy):
    """Shared plumbing: bind to the eval envs, walk the slots, answer pending decisions."""

    def __init__(self, name: str):
        self.name = name
        self.envs: Any = None
        self.plans: list[EpisodePlan] = []

    def reset(self, n_envs: int) -> None:
        self.n_envs = int(n_envs)

    def bind_envs(self, envs: Any) -> None:
        for env in envs.envs:
            env.disable_shield()  # a dispatcher is judged on its own rules, not the learned policy's shield
        self._attach(envs)

    def observe_envs(self, envs: Any) -> None:
        """Asked about another policy's episodes: the learned policy's shield stays as it is."""
        self._attach(envs)

    def _attach(self, envs: Any) -> None:
        """Read the episodes of ``envs`` from now on (per-episode state starts afresh)."""
        self.envs = envs
        self.plans = [EpisodePlan(env) for env in envs.envs]

    def act(self, obs: np.ndarray, episode_start: np.ndarray) -> np.ndarray:
        if self.envs is None:
            raise RuntimeError(f"{self.name} is a centralised dispatcher: the runner must call bind_envs")
        n, slots = obs.shape[0], obs.shape[1]
        actions = np.zeros((n, slots), dtype=np.int64)
        for e in range(n):
            env: RailParallelEnv = self.envs.envs[e]
            if env.fl is None or not env.agents:
                continue
            slot_of = {a: s for s, a in enumerate(self.envs.slot_agents(e)) if a is not None}
            chosen = self.decide(e, env)
            if env.mode == "monolithic":  # every train acts every step with a Flatland action
                chosen = {
                    env.index[a]: MONOLITHIC.get(chosen[env.index[a]])
                    if env.index[a] in chosen
                    else env.default_flatland_action(env.index[a])
                    for a in env.agents
                }
            for i, action in chosen.items():
                slot = slot_of.get(env.names[i])
                if slot is not None:
                    actions[e, slot] = action
        return actions

    def decide(self, e: int, env: RailParallelEnv) -> dict[int, int]:
        raise NotImplementedError

    shortest_turn = staticmethod(shortest_turn)


class ShortestPath(_Dispatcher):
    """All trains depart at once and take the exit nearest their target."""

    def decide(self, e: int, env: RailParallelEnv) -> dict[int, int]:
        out = {}
        for i in np.flatnonzero(env.pending != 0):
            out[int(i)] = DEPART if env.pending[i] == DISPATCH else self.shortest_turn(env, int(i))
        return out


class FlatlandShortestPath(_Dispatcher):
    """Flatland's ``ShortestPathPolicy``: depart at once, then follow the path it fixes per train."""

    def _attach(self, envs: Any) -> None:
        super()._attach(envs)
        self._policies: list[Any] = [None] * len(envs.envs)
        self._episodes: list[Any] = [None] * len(envs.envs)

    def _policy(self, e: int, env: RailParallelEnv) -> Any:
        if self._episodes[e] is not env.fl:  # a new episode: Flatland's policy caches paths per train
            from flatland.envs.rail_env_policies import ShortestPathPolicy

            self._policies[e], self._episodes[e] = ShortestPathPolicy(), env.fl
        return self._policies[e]

    def decide(self, e: int, env: RailParallelEnv) -> dict[int, int]:
        out = {}
        for i in np.flatnonzero(env.pending != 0):
            i = int(i)
            out[i] = DEPART if env.pending[i] == DISPATCH else self._exit(e, env, i)
        return out

    def _exit(self, e: int, env: RailParallelEnv, i: int) -> int:
        """The exit Flatland's policy takes: its action applied by Flatland's own rail rules.

        A Flatland ``MOVE_LEFT`` where no left exit exists goes straight on, so the action is turned
        into the cell it leads to, and that into this env's exit, rather than read as "left".
        """
        agent = env.fl.agents[i]
        try:
            action = self._policy(e, env).act_many([i], [env.fl])[i]
            (cell, _), _ = env.fl.rail.apply_action_independent(action, agent.current_configuration)
        except Exception:  # noqa: BLE001 - no way on along its path (its assert, "Invalid state", None)
            return self.shortest_turn(env, i)
        conf = env.config(i)
        turn = env.net.turn_to(*conf, cell) if conf is not None else None
        return LEFT + turn if turn is not None else self.shortest_turn(env, i)


class ReservationDispatcher(_Dispatcher):
    """Release a waiting train only onto paths no train travels the opposite way (see module doc)."""

    def __init__(self, name: str, k: int = 1, order: str = "slack", cancel_late: bool = False):
        super().__init__(name)
        self.k, self.order, self.cancel_late = k, order, cancel_late
        self._paths: list[dict[int, list[list[Cell]]]] = []
        self._observing = False

    def bind_envs(self, envs: Any) -> None:
        super().bind_envs(envs)
        self._observing = False

    def _attach(self, envs: Any) -> None:
        super()._attach(envs)
        self._paths = [{} for _ in envs.envs]

    def observe_envs(self, envs: Any) -> None:
        """Asked about the states another policy drives: reservations are those of the trains as they
        really move (the env's own plan, which records every departure and exit taken), not of the
        trains this dispatcher would have released."""
        super().observe_envs(envs)
        self._observing = True
        for env in envs.envs:
            env.keep_plan(self.k)

    def candidates(self, e: int, env: RailParallelEnv, i: int) -> list[list[Cell]]:
        cache = self._paths[e]
        if i not in cache:
            cache[i] = k_paths(env, i, self.k)
        return cache[i]

    def priority(self, e: int, env: RailParallelEnv, i: int) -> tuple[float, ...]:
        agent = env.fl.agents[i]
        if self.order == "fifo":
            return (agent.earliest_departure, i)
        slack = slack_key(env, i, len(self.candidates(e, env, i)[0]))
        if self.order == "speed":
            return (-float(agent.speed_counter.max_speed), *slack)
        return slack

    def decide(self, e: int, env: RailParallelEnv) -> dict[int, int]:
        plan = env.kept_plan().copy() if self._observing else self.plans[e]
        plan.update()
        out, paths = release_decisions(
            env,
            plan,
            lambda i: self.candidates(e, env, i),
            lambda i: self.priority(e, env, i),
            self.cancel_late,
        )
        for i, path in paths.items():
            plan.reserve(i, path)
        for i in np.flatnonzero(env.pending == ROUTE):
            out[int(i)] = planned_turn(env, plan, int(i))
        return out


HEURISTICS: dict[str, HeuristicSpec] = {
    "greedy-shortest-route": HeuristicSpec(
        NoSettings,
        lambda s, p, name: ShortestPath(name),
        "Every train departs as soon as it may and, at each switch, takes the exit with the shortest "
        "remaining route to its target; nothing reserved.",
    ),
    "flatland-shortest-path": HeuristicSpec(
        NoSettings,
        lambda s, p, name: FlatlandShortestPath(name),
        "Flatland's own ShortestPathPolicy: every train departs at once and follows one fixed path (which "
        "may enter the target from a longer side); for comparison with published Flatland numbers.",
    ),
    "shortest-path": HeuristicSpec(
        NoSettings,
        lambda s, p, name: ShortestPath(name),
        "Former name of greedy-shortest-route, kept so older scenario files still run (it is not "
        "Flatland's ShortestPathPolicy: that is flatland-shortest-path).",
    ),
    "deadlock-avoiding": HeuristicSpec(
        NoSettings,
        lambda s, p, name: ReservationDispatcher(name, k=1, order="slack", cancel_late=False),
        "Shortest paths; a train waits while any train on the map uses an edge of its path in the opposite "
        "direction; waiting trains released by least slack.",
    ),
    "priority-reroute": HeuristicSpec(
        PrioritySettings,
        lambda s, p, name: ReservationDispatcher(name, k=s.k, order=s.order, cancel_late=s.cancel_late),
        "As deadlock-avoiding, choosing the shortest conflict-free of k shortest paths, a configurable "
        "release order, and cancelling trains that can no longer arrive in time.",
    ),
}

__all__ = ["HEURISTICS", "NOOP", "FlatlandShortestPath", "ReservationDispatcher", "ShortestPath"]
