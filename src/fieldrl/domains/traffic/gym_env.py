"""Single-junction Gymnasium view of :class:`TrafficEnv` (``fieldrl/TrafficSignal-v0``).

For networks with one signal: the same observation, action, reward and ``episode_info`` as the
parallel env's only agent, plus ``action_masks()`` for sb3-contrib's ``MaskablePPO``.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from fieldrl.domains.traffic.env import TrafficEnv
from fieldrl.domains.traffic.params import TrafficParams


class SingleSignalEnv(gym.Env):
    metadata = {"render_modes": []}

    def __init__(self, params: TrafficParams | None = None, **kwargs: Any):
        self.par = TrafficEnv(params if params is not None else TrafficParams(**kwargs))
        if len(self.par.possible_agents) != 1:
            raise ValueError(
                "SingleSignalEnv needs a network with one signal; this one has "
                f"{len(self.par.possible_agents)} (use the parallel env)"
            )
        self.agent = self.par.possible_agents[0]
        self.observation_space = self.par.observation_space(self.agent)
        self.action_space = self.par.action_space(self.agent)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        if seed is None:
            seed = int(self.np_random.integers(0, 2**31 - 1))
        obs, _ = self.par.reset(seed=seed)
        return obs[self.agent], {}

    def step(self, action: Any):
        obs, rew, term, trunc, _ = self.par.step({self.agent: int(action)})
        info = self.par.episode_info() if not self.par.agents else {}
        return obs[self.agent], float(rew[self.agent]), bool(term[self.agent]), bool(trunc[self.agent]), info

    def action_masks(self) -> np.ndarray:
        return self.par.action_mask(self.agent)

    def episode_info(self) -> dict[str, float]:
        return self.par.episode_info()

    def close(self) -> None:
        self.par.close()
