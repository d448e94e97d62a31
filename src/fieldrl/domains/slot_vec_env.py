"""``AgentSlotVecEnv``: every agent slot of several PettingZoo parallel envs as one SB3 env (training).

See :mod:`fieldrl.domains.multiagent` for the conventions; kept in its own module because it is an
SB3 ``VecEnv`` (importing it imports torch), which checking a scenario must not need.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from pettingzoo import ParallelEnv
from stable_baselines3.common.vec_env import VecEnv
from stable_baselines3.common.vec_env.base_vec_env import VecEnvIndices

from fieldrl.domains.multiagent import SlotMap, _first_agent_spaces, _max_slots, _n_actions


class AgentSlotVecEnv(VecEnv):
    """SB3 ``VecEnv`` whose envs are the agent slots of ``len(env_fns)`` parallel envs (autoreset).

    :param env_fns: factories of the parallel envs.
    :param seed: seed of the first episode of env 0; env ``i`` starts at ``seed + i`` and each
        later episode of it adds ``len(env_fns)`` (a stream no two envs share).
    """

    def __init__(self, env_fns: Sequence[Callable[[], ParallelEnv]], seed: int | None = None):
        self.envs = [fn() for fn in env_fns]
        obs_space, act_space = _first_agent_spaces(self.envs[0])
        self.n_slots = _max_slots(self.envs[0])
        self.maps = [SlotMap(self.n_slots) for _ in self.envs]
        super().__init__(len(self.envs) * self.n_slots, obs_space, act_space)
        self._masked = hasattr(self.envs[0], "action_mask")
        self._n_act = _n_actions(act_space) if self._masked else 0
        self._zero_obs = np.zeros(obs_space.shape, dtype=obs_space.dtype)
        self._next_seed = [None if seed is None else seed + i for i in range(len(self.envs))]
        self._obs = np.zeros((self.num_envs, *obs_space.shape), dtype=obs_space.dtype)
        self._masks = np.ones((self.num_envs, max(self._n_act, 1)), dtype=bool)
        self._actions: np.ndarray | None = None

    # -- seeding and reset
    def seed(self, seed: int | None = None) -> list[None]:
        self._next_seed = [None if seed is None else seed + i for i in range(len(self.envs))]
        return [None] * self.num_envs

    def _reset_env(self, i: int) -> None:
        seed = self._next_seed[i]
        if seed is not None:
            self._next_seed[i] = seed + len(self.envs)
        obs, _ = self.envs[i].reset(seed=seed)
        self.maps[i].clear()
        self.maps[i].update(list(self.envs[i].agents))
        self._fill(i, obs)

    def _rows(self, i: int) -> slice:
        return slice(i * self.n_slots, (i + 1) * self.n_slots)

    def _fill(self, i: int, obs: dict[str, Any]) -> None:
        env, rows = self.envs[i], self._rows(i)
        self._obs[rows] = self._zero_obs
        self._masks[rows] = True
        for slot, agent in enumerate(self.maps[i].agents):
            if agent is None:
                continue
            if agent in obs:
                self._obs[rows.start + slot] = obs[agent]
            if self._masked:
                self._masks[rows.start + slot] = np.asarray(env.action_mask(agent), dtype=bool)

    def reset(self) -> np.ndarray:
        for i in range(len(self.envs)):
            self._reset_env(i)
        self.reset_infos = [{} for _ in range(self.num_envs)]
        return self._obs.copy()

    # -- stepping
    def step_async(self, actions: np.ndarray) -> None:
        self._actions = np.asarray(actions)

    def step_wait(self):
        assert self._actions is not None, "step_async first"
        rewards = np.zeros(self.num_envs, dtype=np.float32)
        dones = np.zeros(self.num_envs, dtype=bool)
        infos: list[dict[str, Any]] = [{} for _ in range(self.num_envs)]
        for i, env in enumerate(self.envs):
            rows, slots = self._rows(i), self.maps[i]
            actions = {
                agent: self._actions[rows.start + s]
                for s, agent in enumerate(slots.agents)
                if agent is not None and agent in env.agents
            }
            before = list(slots.agents)
            obs, rew, term, trunc, _ = env.step(actions)
            for s, agent in enumerate(before):
                if agent is None:
                    continue
                row = rows.start + s
                rewards[row] = float(rew.get(agent, 0.0))
                if term.get(agent, False) or trunc.get(agent, False) or agent not in env.agents:
                    dones[row] = True
                    terminal = obs.get(agent, self._obs[row])
                    infos[row]["terminal_observation"] = np.asarray(terminal).copy()
                    infos[row]["TimeLimit.truncated"] = bool(trunc.get(agent, False)) and not bool(
                        term.get(agent, False)
                    )
            if not env.agents:
                # every slot of a finished episode ends; free slots end too (a clean restart)
                for s in range(self.n_slots):
                    row = rows.start + s
                    if not dones[row]:
                        dones[row] = True
                        infos[row]["terminal_observation"] = self._obs[row].copy()
                        infos[row]["TimeLimit.truncated"] = True
                self._reset_env(i)
            else:
                slots.update(list(env.agents))
                self._fill(i, obs)
        self._actions = None
        return self._obs.copy(), rewards, dones, infos

    def action_masks(self) -> np.ndarray:
        return self._masks.copy()

    # -- the rest of the VecEnv interface
    def close(self) -> None:
        for env in self.envs:
            env.close()

    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        idx = self._get_indices(indices)
        if attr_name == "action_masks":  # what MaskablePPO looks for
            if not self._masked:
                raise AttributeError("the parallel env has no action_mask(agent)")
            return [functools.partial(self._slot_mask, i) for i in idx]
        if attr_name == "render_mode":  # asked by VecEnv.__init__; a ParallelEnv may only annotate it
            return [getattr(self.envs[i // self.n_slots], "render_mode", None) for i in idx]
        return [getattr(self.envs[i // self.n_slots], attr_name) for i in idx]

    def _slot_mask(self, row: int) -> np.ndarray:
        return self._masks[row].copy()

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        for i in self._get_indices(indices):
            setattr(self.envs[i // self.n_slots], attr_name, value)

    def env_method(
        self, method_name: str, *method_args: Any, indices: VecEnvIndices = None, **kwargs: Any
    ) -> list[Any]:
        idx = list(self._get_indices(indices))
        if method_name == "action_masks":
            return [self._masks[i] for i in idx]
        return [getattr(self.envs[i // self.n_slots], method_name)(*method_args, **kwargs) for i in idx]

    def env_is_wrapped(self, wrapper_class: type[gym.Wrapper], indices: VecEnvIndices = None) -> list[bool]:
        return [False for _ in self._get_indices(indices)]
