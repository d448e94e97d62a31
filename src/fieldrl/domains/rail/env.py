"""PettingZoo ``ParallelEnv`` over Flatland's ``RailEnv``: one agent per train.

Two decompositions (``mode``):

* ``semi`` (semi-hierarchical, after Castagna et al.): a train is asked only when a decision
  exists. A *dispatch* decision (depart now / hold / cancel) when it is ready to depart at its
  origin, and a *routing* decision (left / forward / right / stop, masked to the exits the rail
  allows) when it enters a switch cell with more than one exit. Between decisions every train
  follows the track; ``step`` applies the decisions and then advances Flatland until some train
  needs a decision or the episode ends. Trains with nothing to decide see a mask allowing only
  ``NOOP``. Held trains and trains stopped at a switch are asked again after ``hold_steps``.
* ``monolithic``: every live train acts every Flatland step with Flatland's 5 actions
  (do nothing, left, forward, right, stop), unmasked.

Both share one ``Discrete`` action space over all agents and one observation vector whose first
entries one-hot the decision type (see :mod:`fieldrl.domains.rail.observation`). Semi-hierarchical
actions: 0 NOOP, 1 DEPART, 2 HOLD, 3 CANCEL, 4 LEFT, 5 FORWARD, 6 RIGHT, 7 STOP. An action the mask
forbids (e.g. a random action from ``parallel_api_test``) is replaced by the default of the pending
decision: HOLD for dispatch, the shortest-path exit for routing.

Rewards (per train): +1 on arrival and -1 for every train that does not arrive, booked when that
is settled: when it becomes deadlocked, when it is cancelled, or at the step limit if it is still
on its way or has never departed. On top, Flatland's own reward divided by the episode's step limit
(lateness at arrival, cancellation and not-arrived penalties). The -1 for cancelled and never-arrived
trains matters: without it holding every train (or cancelling it) costs only Flatland's small
penalty, less than the risk of a deadlock, and PPO learns to run no trains at all.
The episode ends when Flatland's does, or earlier once every train has arrived, been cancelled or is
deadlocked (its Flatland end-of-episode penalty is then booked as at the step limit, since nothing
can change any more).
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import numpy as np
from flatland.envs.rail_env import RailEnv
from flatland.envs.step_utils.states import TrainState
from gymnasium import spaces
from pettingzoo import ParallelEnv

from fieldrl.domains.rail.actions import (  # noqa: F401  (re-exported: the env's action codes)
    CANCEL,
    DEPART,
    DISPATCH,
    EVERY,
    FORWARD,
    HOLD,
    LEFT,
    NONE,
    NOOP,
    RIGHT,
    ROUTE,
    STOP,
)
from fieldrl.domains.rail.deadlock import deadlocked
from fieldrl.domains.rail.levels import LEVELS, Level, load_rail_env, make_rail_env, read_env_file
from fieldrl.domains.rail.network import DC, DR, TURNS, RailNetwork
from fieldrl.domains.rail.observation import OBS_SIZE, OWN, PathLookahead, build_observations
from fieldrl.domains.rail.reservation import EpisodePlan, Shield

SEMI_ACTIONS = ("noop", "depart", "hold", "cancel", "left", "forward", "right", "stop")
#: Flatland actions
DO_NOTHING, MOVE_LEFT, MOVE_FORWARD, MOVE_RIGHT, STOP_MOVING = range(5)
ARRIVAL_BONUS = 1.0
DEADLOCK_PENALTY = 1.0
#: booked once for a train that is cancelled or has not arrived at the step limit
NOT_ARRIVED_PENALTY = 1.0
#: the advice's one-hot over the semi-hierarchical actions, appended to the observation
ADVICE_SIZE = 8


class RailParallelEnv(ParallelEnv):
    """Flatland rail dispatching as a PettingZoo parallel env.

    :param level: Flatland 3 test level 0-4 (used when ``curriculum`` is empty).
    :param mode: ``semi`` or ``monolithic`` (see module docstring).
    :param hold_steps: Flatland steps a held or stopped train waits before it is asked again.
    :param wait_cost: cost per Flatland step of a train standing still though it could be on its
        way (held at its origin after its earliest departure, or stopped on the map), times the step
        limit: a train kept waiting all episode costs ``wait_cost``.
    :param horizon: look-ahead cells of the observation builder.
    :param shield: semi mode only: mask departures and exits that would put a train head-on against
        another train's reserved path (:class:`~fieldrl.domains.rail.reservation.Shield`).
    :param shield_paths: shortest paths a shielded departure may choose from (the first free one).
    :param advice: semi mode only: append to each observation what the priority dispatcher would
        decide for this train now (one-hot over the 8 actions; :meth:`Shield.advice`), computed from
        a reservation plan the env keeps of every departure. A policy may follow it or not; one that
        always follows it is the dispatcher.
    :param team_reward: share of each train's reward that is the team's: every live train gets
        ``(1 - team_reward) * own + team_reward * (sum of all trains' rewards this step) / trains``.
        0 = its own reward only; 1 = the same team reward for every train, so a train that waits
        for others is credited with what they gain.
    :param curriculum: training only: levels sampled at each reset, weights moving from the first
        towards the last over ``curriculum_episodes`` episodes (see :meth:`curriculum_weights`).
    :param config: a Flatland configuration of your own (replaces ``level``).
    :param env_file: a saved Flatland environment (``.pkl``; replaces ``level`` and ``config``): its
        network, trains and timetable every episode, malfunctions drawn from the seed.
    """

    metadata = {"name": "fieldrl_rail_v0"}
    render_mode = None

    def __init__(
        self,
        level: int = 0,
        mode: str = "semi",
        hold_steps: int = 5,
        wait_cost: float = 0.0,
        horizon: int = 40,
        shield: bool = False,
        shield_paths: int = 4,
        advice: bool = False,
        team_reward: float = 0.0,
        curriculum: tuple[int, ...] = (),
        curriculum_episodes: int = 200,
        config: Level | None = None,
        env_file: str | Path | None = None,
    ):
        if mode not in ("semi", "monolithic"):
            raise ValueError(f"mode must be 'semi' or 'monolithic', got {mode!r}")
        self.level = int(level)
        self.mode = mode
        self.hold_steps = int(hold_steps)
        self.wait_cost = float(wait_cost)
        self.horizon = int(horizon)
        self.shield = bool(shield) and mode == "semi"
        self.shield_paths = int(shield_paths)
        self.advice = bool(advice) and mode == "semi"
        if not 0.0 <= team_reward <= 1.0:
            raise ValueError(f"team_reward must be within [0, 1], got {team_reward!r}")
        self.team_reward = float(team_reward)
        self._shield: Shield | None = None
        self.curriculum = tuple(int(x) for x in curriculum)
        self.curriculum_episodes = int(curriculum_episodes)
        self.episodes = 0
        self.flatland_config = config
        self.env_file = Path(env_file) if env_file is not None else None
        levels = self.curriculum or (self.level,)
        if self.env_file is not None:
            self.max_slots = len(read_env_file(self.env_file)["agents"])
        elif config is not None and not self.curriculum:
            self.max_slots = config.trains
        else:
            self.max_slots = max(LEVELS[x].trains for x in levels)
        self.possible_agents = [f"train_{i}" for i in range(self.max_slots)]
        self.agents: list[str] = []
        self.fl: RailEnv | None = None

    # ------------------------------------------------------------------ spaces
    @functools.cache  # noqa: B019 - spaces are per agent name, as PettingZoo does
    def observation_space(self, agent: str) -> spaces.Box:
        size = OBS_SIZE + (ADVICE_SIZE if self.advice else 0)
        return spaces.Box(-np.inf, np.inf, shape=(size,), dtype=np.float32)

    @functools.cache  # noqa: B019
    def action_space(self, agent: str) -> spaces.Discrete:
        return spaces.Discrete(8 if self.mode == "semi" else 5)

    # ------------------------------------------------------------------ curriculum
    def curriculum_weights(self) -> np.ndarray:
        """Sampling weights of the curriculum levels.

        ``(1 - p)(m - j) + p (j + 1)`` for the j-th of m levels, ``p`` = episodes so far /
        ``curriculum_episodes`` capped at 1: the easiest is favoured first, the hardest last.
        """
        m = len(self.curriculum)
        p = min(1.0, self.episodes / max(self.curriculum_episodes, 1))
        j = np.arange(m)
        w = (1 - p) * (m - j) + p * (j + 1)
        return w / w.sum()

    # ------------------------------------------------------------------ reset
    def reset(self, seed: int | None = None, options: dict | None = None):
        rng = np.random.default_rng(seed)
        env_seed = int(rng.integers(2**31 - 1)) if seed is None else int(seed)
        level = self.level
        if self.curriculum:
            level = int(rng.choice(self.curriculum, p=self.curriculum_weights()))
        self.episodes += 1
        self.current_level = level
        if self.env_file is not None:
            self.fl = fl = load_rail_env(self.env_file, env_seed)
        else:
            use_config = self.flatland_config is not None and not self.curriculum
            self.fl = fl = make_rail_env(self.flatland_config if use_config else LEVELS[level], env_seed)
        self.net = RailNetwork(fl)
        self.n = n = fl.get_num_agents()
        self.max_steps = int(fl._max_episode_steps)
        self.look = PathLookahead(self.net, fl.distance_map.get(), self.horizon)
        self.initial = np.array(
            [
                (a.initial_configuration[0][0], a.initial_configuration[0][1], a.initial_configuration[1])
                for a in fl.agents
            ],
            dtype=np.int64,
        )
        self.names = self.possible_agents[:n]
        self.index = {a: i for i, a in enumerate(self.names)}
        self.departing = np.zeros(n, dtype=bool)
        self.departed_step = np.full(n, -1)
        self.cancelled = np.zeros(n, dtype=bool)
        self.hold_until = np.zeros(n, dtype=np.int64)
        self.cmd = np.full(n, MOVE_FORWARD)
        self.cmd_cell: list[tuple[int, int, int] | None] = [None] * n
        self.pending = np.zeros(n, dtype=np.int64)
        self.fl_reward = np.zeros(n)
        self.stuck: set[int] = set()
        self.finished = False
        self.decisions = {"dispatch": 0, "route": 0}
        self.agents = list(self.names)
        self._gone: set[int] = set()
        self._step_reward = np.zeros(n)
        self._history: list[np.ndarray] = []
        # the plan is kept for the shield's masks and for the advice; only the shield masks
        self._shield = Shield(self, self.shield_paths) if (self.shield or self.advice) else None
        if self.mode == "semi":
            self._advance()
            self._follow_plans()
        else:
            self._refresh()
            self._update_pending()
        return self._observations(), {a: {} for a in self.agents}

    # ------------------------------------------------------------------ state helpers
    def config(self, i: int) -> tuple[int, int, int] | None:
        conf = self.fl.agents[i].current_configuration
        if conf is None:
            return None
        return int(conf[0][0]), int(conf[0][1]), int(conf[1])

    def state(self, i: int) -> TrainState:
        return self.fl.agents[i].state

    def _occupancy(self) -> tuple[np.ndarray, np.ndarray]:
        occ = np.full((self.net.height, self.net.width), -1, dtype=np.int64)
        head = np.full((self.net.height, self.net.width), -1, dtype=np.int64)
        for i in range(self.n):
            conf = self.config(i)
            if conf is not None:
                occ[conf[0], conf[1]] = i
                head[conf[0], conf[1]] = conf[2]
        return occ, head

    def route_options(self, i: int) -> np.ndarray:
        """(left, forward, right) exits the rail allows for train ``i`` where it stands."""
        conf = self.config(i)
        if conf is None:
            return np.zeros(3, dtype=bool)
        return self.net.options(*conf)

    def option_distances(self, i: int) -> np.ndarray:
        """Cells to train ``i``'s target via each of (left, forward, right); inf where not allowed."""
        conf = self.config(i)
        out = np.full(3, np.inf)
        if conf is None:
            return out
        r, c, d = conf
        dist = self.fl.distance_map.get()[i]
        for j, t in enumerate(TURNS):
            d_out = (d + t) % 4
            if self.net.trans[r, c, d, d_out]:
                out[j] = dist[r + DR[d_out], c + DC[d_out], d_out]
        return out

    def _needs_decision(self, i: int, t: int) -> int:
        if self.cancelled[i] or i in self._gone:
            return NONE
        state = self.state(i)
        if state == TrainState.DONE:
            return NONE
        if state == TrainState.READY_TO_DEPART and not self.departing[i] and t >= self.hold_until[i]:
            return DISPATCH
        conf = self.config(i)
        if conf is None or not self.net.choice[conf[0], conf[1], conf[2]]:
            return NONE
        if self.cmd_cell[i] != conf or (self.cmd[i] == STOP_MOVING and t >= self.hold_until[i]):
            return ROUTE
        return NONE

    def default_flatland_action(self, i: int) -> int:
        """What train ``i`` does between decisions: keep its command at this cell, else follow the track."""
        return self._flatland_action(i)

    def _flatland_action(self, i: int) -> int:
        if self.cancelled[i]:
            return DO_NOTHING
        conf = self.config(i)
        if conf is None:
            return MOVE_FORWARD if self.departing[i] else DO_NOTHING
        if self.cmd_cell[i] == conf:
            return int(self.cmd[i])
        return MOVE_FORWARD

    def _blockers(self, occ: np.ndarray) -> list[list[int] | None]:
        """Per train on the map: the train in the next cell of each exit it may still take."""
        out: list[list[int] | None] = []
        for i in range(self.n):
            conf = self.config(i)
            if conf is None or self.state(i) == TrainState.DONE:
                out.append(None)
                continue
            r, c, d = conf
            exits = [d_out for d_out in range(4) if self.net.trans[r, c, d, d_out]]
            if (
                self.mode == "semi"
                and self.cmd_cell[i] == conf
                and self.cmd[i] in (MOVE_LEFT, MOVE_FORWARD, MOVE_RIGHT)
            ):
                wanted = (d + TURNS[int(self.cmd[i]) - 1]) % 4
                if wanted in exits:
                    exits = [wanted]
            out.append([int(occ[r + DR[e], c + DC[e]]) for e in exits])
        return out

    # ------------------------------------------------------------------ stepping
    def _flatland_step(self, actions: dict[int, int]) -> bool:
        """One Flatland step; books rewards; returns True when the episode is over."""
        _, rewards, dones, _ = self.fl.step(actions)
        for i, r in rewards.items():
            self.fl_reward[i] += r
            self._step_reward[i] += r / self.max_steps
        for i in range(self.n):
            if self.departed_step[i] < 0 and self.config(i) is not None:
                self.departed_step[i] = self.fl._elapsed_steps
            elif self._waiting(i):
                self._step_reward[i] -= self.wait_cost / self.max_steps
        self._record()
        if dones["__all__"]:
            return True
        return self._refresh()

    def _refresh(self) -> bool:
        """Update deadlocks; True if nothing can change any more (early end)."""
        occ, _ = self._occupancy()
        stuck = deadlocked(self._blockers(occ))
        for i in stuck - self.stuck:
            self._step_reward[i] -= DEADLOCK_PENALTY
        self.stuck = stuck
        over = all(self.state(i) == TrainState.DONE or self.cancelled[i] or i in stuck for i in range(self.n))
        if over:
            for i, agent in enumerate(self.fl.agents):
                if agent.state != TrainState.DONE:
                    r = self.fl.rewards.end_of_episode_reward(agent, self.fl.distance_map, self.max_steps)
                    self.fl_reward[i] += r
                    self._step_reward[i] += r / self.max_steps
        return over

    def _waiting(self, i: int) -> bool:
        """Train ``i`` could be on its way but stands still: held at its origin once it may depart,
        or stopped on the map (by a STOP command or behind another train; not when deadlocked,
        which has cost -1 already, nor in a breakdown)."""
        if self.wait_cost <= 0 or self.cancelled[i]:
            return False
        state = self.state(i)
        if state == TrainState.READY_TO_DEPART:
            return not self.departing[i]
        return state == TrainState.STOPPED and i not in self.stuck

    def _record(self) -> None:
        """Positions of every train (row, col; -1 off map) for the report's rail map."""
        pos = np.full((self.n, 2), -1, dtype=np.int16)
        for i in range(self.n):
            conf = self.config(i)
            if conf is not None:
                pos[i] = conf[0], conf[1]
        self._history.append(pos)

    def _update_pending(self) -> None:
        t = self.fl._elapsed_steps
        self.pending = np.array([self._needs_decision(i, t) for i in range(self.n)], dtype=np.int64)

    def _note_monolithic(self, i: int, action: int) -> None:
        """Keep the decision bookkeeping (pending, commands) in step with raw Flatland actions."""
        kind, t = self.pending[i], self.fl._elapsed_steps
        if kind == DISPATCH:
            if action in (MOVE_LEFT, MOVE_FORWARD, MOVE_RIGHT):
                self.departing[i] = True
            else:
                self.hold_until[i] = t + 1
        elif kind == ROUTE:
            self.cmd_cell[i] = self.config(i)
            self.cmd[i] = MOVE_FORWARD if action == DO_NOTHING else action
            if action == STOP_MOVING:
                self.hold_until[i] = t + 1

    def _advance(self) -> None:
        """Run Flatland until some train needs a decision or the episode is over."""
        while True:
            t = self.fl._elapsed_steps
            self.pending = np.array([self._needs_decision(i, t) for i in range(self.n)], dtype=np.int64)
            if self.pending.any():
                return
            acts = {i: self._flatland_action(i) for i in range(self.n)}
            if self._flatland_step(acts):
                self.finished = True
                self.pending[:] = NONE
                return

    def disable_shield(self) -> None:
        """Switch the shield off (dispatchers apply their own rules; the shield is for learned policies).

        With ``advice`` the plan is still kept (unmasked), so that a dispatcher's demonstrations show
        the advice a learned policy will see."""
        self.shield = False
        if not self.advice:
            self._shield = None

    def keep_plan(self, k: int) -> None:
        """Keep the reservation plan of the trains as they move (every departure and exit taken is
        recorded), without masking anything: what a reservation dispatcher asked about this episode's
        states reads (decision differences). A shield or the advice keeps one already."""
        if self._shield is None:
            self._shield = Shield(self, k)

    def kept_plan(self) -> EpisodePlan:
        """The plan :meth:`keep_plan` (or the shield, or the advice) keeps."""
        if self._shield is None:
            raise RuntimeError("kept_plan needs keep_plan (or the shield, or the advice) first")
        return self._shield.plan

    def _follow_plans(self) -> None:
        if self._shield is not None:
            self._shield.plan.update()

    def _fallback(self, kind: int, i: int, mask: np.ndarray) -> int:
        """The default of a decision whose chosen action the mask forbids: hold, or the allowed
        exit nearest the target (stop if the shield allows none)."""
        if kind == DISPATCH:
            return HOLD
        distances = np.where(mask[LEFT : RIGHT + 1], self.option_distances(i), np.inf)
        return LEFT + int(np.argmin(distances)) if np.isfinite(distances).any() else STOP

    def _apply(self, i: int, action: int) -> None:
        kind = self.pending[i]
        t = self.fl._elapsed_steps
        mask = self.action_mask(self.names[i])
        if not mask[action]:
            action = self._fallback(kind, i, mask)
        if kind == DISPATCH:
            self.decisions["dispatch"] += 1
            if action == DEPART:
                if self._shield is not None:
                    self._shield.depart(i)
                self.departing[i] = True
            elif action == HOLD:
                self.hold_until[i] = t + self.hold_steps
            else:
                self.cancelled[i] = True
                agent = self.fl.agents[i]
                self._step_reward[i] -= NOT_ARRIVED_PENALTY + (
                    agent.get_travel_time_on_shortest_path(self.fl.distance_map) / self.max_steps
                )
        elif kind == ROUTE:
            self.decisions["route"] += 1
            self.cmd_cell[i] = self.config(i)
            if action == STOP:
                self.cmd[i] = STOP_MOVING
                self.hold_until[i] = t + self.hold_steps
            else:
                if self._shield is not None:
                    self._shield.take_exit(i, action - LEFT)
                self.cmd[i] = (MOVE_LEFT, MOVE_FORWARD, MOVE_RIGHT)[action - LEFT]

    def step(self, actions: dict[str, Any]):
        self._step_reward = np.zeros(self.n)
        live = list(self.agents)
        if self.mode == "semi":
            for agent, action in actions.items():
                i = self.index.get(agent)
                if i is not None and self.pending[i] != NONE:
                    self._apply(i, int(action))
            self.pending[:] = NONE
            self._advance()
            self._follow_plans()
        else:
            acts = {}
            for a in live:
                i, action = self.index[a], int(actions.get(a, DO_NOTHING))
                action = action if 0 <= action < 5 else DO_NOTHING
                self._note_monolithic(i, action)
                acts[i] = action
            self.finished = self._flatland_step(acts)
            self._update_pending()
        terms, truncs, rewards = {}, {}, {}
        for agent in live:
            i = self.index[agent]
            arrived = self.state(i) == TrainState.DONE
            gone = arrived or bool(self.cancelled[i])
            reward = self._step_reward[i] + (ARRIVAL_BONUS if arrived else 0.0)
            if self.finished and not gone and i not in self.stuck:  # deadlocked ones paid already
                reward -= NOT_ARRIVED_PENALTY
            rewards[agent] = float(reward)
            terms[agent] = gone
            truncs[agent] = self.finished and not gone
            if gone:
                self._gone.add(i)
        if self.team_reward > 0.0 and rewards:
            w, team = self.team_reward, sum(rewards.values()) / self.n
            rewards = {a: (1.0 - w) * r + w * team for a, r in rewards.items()}
        self.agents = [] if self.finished else [a for a in live if not terms[a]]
        obs = self._observations(live)
        return obs, rewards, terms, truncs, {a: {} for a in live}

    # ------------------------------------------------------------------ masks and observations
    def action_mask(self, agent: str) -> np.ndarray:
        if self.mode == "monolithic":
            return np.ones(5, dtype=bool)
        i = self.index[agent]
        mask = np.zeros(8, dtype=bool)
        kind = self.pending[i]
        if kind == DISPATCH:
            mask[[DEPART, HOLD, CANCEL]] = True
            if self.shield and self._shield is not None:
                mask[DEPART] = self._shield.departure_path(i) is not None
        elif kind == ROUTE:
            mask[LEFT : RIGHT + 1] = self.route_options(i)
            if self.shield and self._shield is not None:
                mask[LEFT : RIGHT + 1] &= [p is not None for p in self._shield.exit_paths(i)]
            mask[STOP] = True
        else:
            mask[NOOP] = True
        return mask

    def _observations(self, names: list[str] | None = None) -> dict[str, np.ndarray]:
        names = self.agents if names is None else names
        if not names:
            return {}
        obs = self.observe_all()
        return {a: obs[self.index[a]] for a in names}

    def advised_actions(self) -> np.ndarray:
        """The priority dispatcher's decision for every train's pending decision (``NOOP`` where none);
        needs ``advice`` or ``shield`` (the plan it decides from)."""
        if self._shield is None:
            raise RuntimeError("advised_actions needs the env's reservation plan (advice or shield on)")
        return self._shield.advice()

    def observe_all(self) -> np.ndarray:
        """Observations of every train, ``(n, OBS_SIZE)`` (the fast builder), and the advice
        (``ADVICE_SIZE`` more) with ``advice``."""
        n, fl, t = self.n, self.fl, self.fl._elapsed_steps
        occ, head = self._occupancy()
        configs = self.initial.copy()
        on_map = np.zeros(n, dtype=bool)
        own = np.zeros((n, OWN), dtype=np.float32)
        states = [a.state for a in fl.agents]
        arrived = sum(s == TrainState.DONE for s in states)
        n_on = 0
        dist = fl.distance_map.get()
        for i in range(n):
            conf = self.config(i)
            if conf is not None:
                configs[i] = conf
                on_map[i] = True
                n_on += 1
        own[np.arange(n), self.pending] = 1.0
        if self.mode == "monolithic":
            own[:, EVERY] = 1.0
            own[:, NONE] = 0.0
        for i, a in enumerate(fl.agents):
            speed = float(a.speed_counter.max_speed)
            r, c, d = configs[i]
            to_go = dist[i, r, c, d]
            to_go = 4 * self.max_steps if not np.isfinite(to_go) else to_go
            own[i, 4] = speed
            own[i, 5] = a.malfunction_handler.malfunction_down_counter / 50.0
            own[i, 6] = not on_map[i]
            own[i, 7] = states[i] == TrainState.MOVING
            own[i, 8] = states[i] in (TrainState.STOPPED, TrainState.MALFUNCTION)
            own[i, 9] = to_go / self.max_steps
            own[i, 10] = (a.latest_arrival - t - to_go / speed) / self.max_steps
            own[i, 11] = t / self.max_steps
            own[i, 12] = (not on_map[i]) and occ[r, c] >= 0
        own[:, 13] = n_on / n
        own[:, 14] = arrived / n
        own[:, 15] = len(self.stuck) / n
        own[:, 16] = n / 100.0
        own[:, 17] = self.cancelled.sum() / n
        own[:, 18] = (self.departed_step >= 0).sum() / n
        obs = build_observations(self.look, configs, on_map, occ, head, own, self.max_steps)
        if not self.advice:
            return obs
        advice = np.zeros((n, ADVICE_SIZE), dtype=np.float32)
        advice[np.arange(n), self.advised_actions()] = 1.0
        return np.concatenate([obs, advice], axis=1)

    # ------------------------------------------------------------------ KPIs
    def episode_info(self) -> dict[str, float]:
        """Episode KPIs so far (final once the episode is over)."""
        fl = self.fl
        n = self.n
        done = [a.state == TrainState.DONE for a in fl.agents]
        delays = [
            max(0, a.arrival_time - a.latest_arrival) for a, ok in zip(fl.agents, done, strict=True) if ok
        ]
        norm = fl.rewards.normalize(*self.fl_reward.tolist(), num_agents=n, max_episode_steps=self.max_steps)
        return {
            "arrived": 100.0 * sum(done) / n,
            "deadlocked": 100.0 * len(self.stuck) / n,
            "delay": float(np.mean(delays)) if delays else float("nan"),
            "cancelled": 100.0 * float(self.cancelled.sum()) / n,
            "normalized_reward": float(norm),
            "flatland_steps": float(fl._elapsed_steps),
            "trains": float(n),
        }

    def position_history(self) -> np.ndarray:
        """``(steps, n, 2)`` train cells per Flatland step (-1 off the map)."""
        if not self._history:
            return np.zeros((0, self.n, 2), dtype=np.int16)
        return np.stack(self._history)

    def render(self) -> None:
        return None

    def close(self) -> None:
        self.fl = None


def parallel_env(**kwargs: Any) -> RailParallelEnv:
    """PettingZoo factory (as PettingZoo environments and sumo-rl provide)."""
    return RailParallelEnv(**kwargs)
