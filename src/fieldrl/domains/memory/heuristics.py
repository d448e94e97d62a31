"""Baselines for the cue-memory task; like every fieldrl policy they see only observations.

``constant`` and ``random`` have no memory and score about 50 %; ``remember-cue`` keeps the
sign of the first observation's signal and is the ceiling a memory-based policy can reach.
"""

from __future__ import annotations

import numpy as np
from pydantic import Field

from fieldrl.domains.base import HeuristicSpec, NoSettings, Settings
from fieldrl.policies.base import Policy


class ConstantSettings(Settings):
    action: float = Field(1.0, ge=-1.0, le=1.0, description="Action given at every step (-1..1).")


class RandomSettings(Settings):
    seed: int = Field(0, ge=0, le=2**31 - 1, description="Seed of the action generator (reset per batch).")


class ConstantAction(Policy):
    """The same action every step: right exactly when the cue has the action's sign."""

    def __init__(self, name: str, action: float):
        self.name = name
        self.action = float(action)

    def reset(self, n_envs: int) -> None:
        pass

    def act(self, obs: np.ndarray, episode_start: np.ndarray) -> np.ndarray:
        return np.full((len(obs), 1), self.action, dtype=np.float32)


class RandomAction(Policy):
    """Uniform actions in ``[-1, 1]``, reproducible: the generator restarts at every ``reset``."""

    def __init__(self, name: str, seed: int):
        self.name = name
        self.seed = int(seed)
        self._rng = np.random.default_rng(self.seed)

    def reset(self, n_envs: int) -> None:
        self._rng = np.random.default_rng(self.seed)

    def act(self, obs: np.ndarray, episode_start: np.ndarray) -> np.ndarray:
        return self._rng.uniform(-1.0, 1.0, size=(len(obs), 1)).astype(np.float32)


class RememberCue(Policy):
    """Reads the signal at each episode's first step and answers with its sign ever after."""

    def __init__(self, name: str):
        self.name = name
        self._sign = np.ones(0, dtype=np.float32)

    def reset(self, n_envs: int) -> None:
        self._sign = np.ones(n_envs, dtype=np.float32)

    def act(self, obs: np.ndarray, episode_start: np.ndarray) -> np.ndarray:
        obs = np.asarray(obs, dtype=np.float32)
        if len(self._sign) != len(obs):
            self.reset(len(obs))
        start = np.asarray(episode_start, dtype=bool)
        self._sign[start] = np.where(obs[start, 0] >= 0, 1.0, -1.0)
        return self._sign[:, None].copy()


HEURISTICS: dict[str, HeuristicSpec] = {
    "constant": HeuristicSpec(
        ConstantSettings,
        lambda s, p, name: ConstantAction(name, s.action),
        "The same action every step (right for one cue sign only: about 50 %).",
    ),
    "random": HeuristicSpec(
        RandomSettings,
        lambda s, p, name: RandomAction(name, s.seed),
        "Uniform random actions in [-1, 1] (about 50 %).",
    ),
    "remember-cue": HeuristicSpec(
        NoSettings,
        lambda s, p, name: RememberCue(name),
        "Keeps the sign of the first observation's signal (the memory ceiling).",
    ),
}
