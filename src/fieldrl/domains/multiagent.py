"""PettingZoo ``ParallelEnv`` domains on fieldrl's single-batch spine, with parameter sharing.

Multi-agent domains (rail, traffic grids, taxiways, UAVs) expose a PettingZoo
``ParallelEnv``. Two adapters put such envs on the same footing as single-agent ones:

* ``AgentSlotVecEnv`` (training): every *agent slot* of several parallel envs is one
  Stable-Baselines3 env, so one shared network learns from every agent's experience
  (parameter sharing; ``independent-ppo`` instead gives each agent its own networks where the
  parallel env appends one-hot agent ids and says so in ``n_agent_ids``). Agents may appear
  and leave mid-episode: a live agent takes a free slot, and its slot reports ``done`` when
  the agent leaves. A free slot yields a zero observation, zero reward and an all-allowed
  mask ("black death", as SuperSuit). ``action_masks()`` is answered through ``env_method``
  so sb3-contrib's ``MaskablePPO`` sees each slot's mask.
* ``ParallelLockstepEnvs`` (evaluation): one episode per seed, stepped together; the
  runner sees observations ``(n_episodes, n_slots, *obs_shape)``, actions
  ``(n_episodes, n_slots)``, the team reward and an episode-level ``info``.

``ParallelDomain`` wires both from a domain's one ``make_parallel_env(params, training)``.

Written here rather than taken from SuperSuit because SuperSuit's
``pettingzoo_env_to_vec_env_v1`` needs a fixed agent set and carries no action masks.

Conventions the adapted envs follow:
* every agent shares one observation and one action space;
* ``env.action_mask(agent) -> np.ndarray[bool]`` when actions are masked (optional);
* ``env.episode_info() -> dict[str, float]`` gives the numbers ``Domain.info_keys``
  names (episode KPIs read them; optional for training);
* the episode ends when ``env.agents`` is empty after a step;
* an agent that arrives during a step is in that step's observations, rewards (0),
  terminations and truncations (False) and infos, as ``parallel_api_test`` expects.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np
from gymnasium import spaces
from pettingzoo import ParallelEnv

from fieldrl.domains.base import Domain, LockstepEnvs, P

if TYPE_CHECKING:
    from fieldrl.domains.slot_vec_env import AgentSlotVecEnv


def __getattr__(name: str) -> Any:
    """``AgentSlotVecEnv`` lives in :mod:`~fieldrl.domains.slot_vec_env` (it is an SB3 ``VecEnv``, so
    importing it imports torch); it is still importable from here."""
    if name == "AgentSlotVecEnv":
        from fieldrl.domains.slot_vec_env import AgentSlotVecEnv

        return AgentSlotVecEnv
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _n_actions(space: spaces.Space) -> int:
    if isinstance(space, spaces.Discrete):
        return int(space.n)
    if isinstance(space, spaces.MultiDiscrete):
        return int(np.sum(space.nvec))
    raise TypeError(f"action masks need a Discrete or MultiDiscrete action space, got {space}")


class SlotMap:
    """Which live agent of one parallel env sits in which slot; slots are reused as agents leave."""

    def __init__(self, n_slots: int):
        self.n_slots = n_slots
        self.agents: list[str | None] = [None] * n_slots

    def clear(self) -> None:
        self.agents = [None] * self.n_slots

    def update(self, live: Sequence[str]) -> list[int]:
        """Free slots of agents no longer live, seat newcomers; return slots freed now."""
        live_set = set(live)
        freed = [i for i, a in enumerate(self.agents) if a is not None and a not in live_set]
        for i in freed:
            self.agents[i] = None
        seated = {a for a in self.agents if a is not None}
        for agent in live:
            if agent in seated:
                continue
            try:
                slot = self.agents.index(None)
            except ValueError:
                raise RuntimeError(
                    f"more than {self.n_slots} live agents; raise the env's max_slots"
                ) from None
            self.agents[slot] = agent
            seated.add(agent)
        return freed

    def slot_of(self, agent: str) -> int:
        return self.agents.index(agent)


def _max_slots(env: ParallelEnv) -> int:
    return int(getattr(env, "max_slots", len(env.possible_agents)))


def _first_agent_spaces(env: ParallelEnv) -> tuple[spaces.Space, spaces.Space]:
    agent = env.possible_agents[0]
    return env.observation_space(agent), env.action_space(agent)


class ParallelLockstepEnvs(LockstepEnvs):
    """One episode per seed of a parallel env, stepped together (fieldrl's ``EvalEnvs``).

    The lockstep loop is :class:`~fieldrl.domains.base.LockstepEnvs`; this class says what one
    episode's reset and step are. Observations are ``(n, n_slots, *obs_shape)``, actions
    ``(n, n_slots)``; the reward of an episode is the sum over its agents. ``envs`` and
    ``slot_agents(i)`` let centralised heuristics (planners, dispatchers) read the simulators they act
    on (see ``Policy.bind_envs``).
    """

    def __init__(self, envs: Sequence[ParallelEnv], seeds: Sequence[int], info_keys: Sequence[str]) -> None:
        super().__init__(envs, seeds, info_keys)
        obs_space, act_space = _first_agent_spaces(self.envs[0])
        self.observation_space, self.action_space = obs_space, act_space
        self.n_slots = _max_slots(self.envs[0])
        self.maps = [SlotMap(self.n_slots) for _ in self.envs]
        self._masked = hasattr(self.envs[0], "action_mask")
        n_act = _n_actions(act_space) if self._masked else 1
        self._obs = np.zeros((self.n, self.n_slots, *obs_space.shape), dtype=obs_space.dtype)
        self._masks = np.ones((self.n, self.n_slots, n_act), dtype=bool)
        #: each episode's per-agent rewards of the last step (what behaviour cloning's returns need)
        self.last_rewards: list[dict[str, float]] = [{} for _ in self.envs]

    def slot_agents(self, i: int) -> list[str | None]:
        """The agent in each slot of episode ``i`` (None where the slot is free)."""
        return list(self.maps[i].agents)

    def _fill(self, i: int, obs: dict[str, Any]) -> None:
        env = self.envs[i]
        self._obs[i] = 0
        self._masks[i] = True
        for slot, agent in enumerate(self.maps[i].agents):
            if agent is None:
                continue
            if agent in obs:
                self._obs[i, slot] = obs[agent]
            if self._masked:
                self._masks[i, slot] = np.asarray(env.action_mask(agent), dtype=bool)

    def _info(self) -> dict[str, np.ndarray]:
        if not self.info_keys:
            return {}
        rows = [env.episode_info() for env in self.envs]
        return {k: np.asarray([float(r[k]) for r in rows]) for k in self.info_keys}

    def _reset_episode(self, i: int, env: ParallelEnv, seed: int) -> None:
        obs, _ = env.reset(seed=seed)
        self.maps[i].clear()
        self.maps[i].update(list(env.agents))
        self._fill(i, obs)
        self.last_rewards[i] = {}

    def _step_episode(self, i: int, env: ParallelEnv, action: np.ndarray) -> tuple[float, bool, bool]:
        chosen = {
            agent: action[s]
            for s, agent in enumerate(self.maps[i].agents)
            if agent is not None and agent in env.agents
        }
        obs, rew, term, trunc, _ = env.step(chosen)
        self.last_rewards[i] = {a: float(r) for a, r in rew.items()}
        reward = float(sum(rew.values()))
        if not env.agents:  # the episode ended: truncated if any agent was cut off by the time limit
            truncated = any(trunc.values())
            return reward, not truncated, truncated
        self.maps[i].update(list(env.agents))
        self._fill(i, obs)
        return reward, False, False

    def _observations(self) -> np.ndarray:
        return self._obs.copy()

    def action_masks(self) -> np.ndarray:
        """``(n, n_slots, n_actions)`` booleans; all True where actions are not masked."""
        return self._masks.copy()


class ParallelDomain(Domain[P]):
    """A multi-agent domain: one PettingZoo parallel env factory gives its training and evaluation envs.

    Subclasses implement :meth:`make_parallel_env`; training then runs on an ``AgentSlotVecEnv`` of
    such envs (every agent slot one SB3 env, one shared network), evaluation on :attr:`eval_envs_class`
    (a :class:`ParallelLockstepEnvs`). A domain overrides ``make_train_vec_env`` or ``make_eval_envs``
    only where its wiring is special (subprocess simulators, extra reward terms).
    """

    #: the lockstep class evaluation plays (a subclass may record more per step)
    eval_envs_class: type[ParallelLockstepEnvs] = ParallelLockstepEnvs

    @abstractmethod
    def make_parallel_env(self, params: P, training: bool = False) -> ParallelEnv:
        """A fresh PettingZoo parallel env for ``params``.

        :param training: the env is for training (e.g. a curriculum applies), not for held-out episodes.
        """

    def eval_info_keys(self, params: P) -> Sequence[str]:
        """The ``episode_info`` keys the eval envs stack (default :attr:`info_keys`)."""
        return self.info_keys

    def make_train_vec_env(self, params: P, n_envs: int, seed: int) -> AgentSlotVecEnv:
        from fieldrl.domains.slot_vec_env import AgentSlotVecEnv

        p = self.checked_params(params)
        return AgentSlotVecEnv([partial(self.make_parallel_env, p, True) for _ in range(n_envs)], seed)

    def make_eval_envs(
        self, params: P, seeds: Sequence[int], cases: Sequence[int] | None = None
    ) -> ParallelLockstepEnvs:
        p = self.checked_params(params)
        envs = [self.make_parallel_env(p, False) for _ in seeds]
        return self.eval_envs_class(envs, seeds, self.eval_info_keys(p))
