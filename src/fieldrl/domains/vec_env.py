"""Base for SB3 vector envs whose envs are rows of one batched engine (chemo, wealth).

Such envs have no per-env Python objects, so the per-env parts of SB3's ``VecEnv``
interface (attribute access, method calls, wrapper checks) are answered once here.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
from stable_baselines3.common.vec_env import VecEnv
from stable_baselines3.common.vec_env.base_vec_env import VecEnvIndices


class BatchedVecEnv(VecEnv):
    """``VecEnv`` over a single batched engine; subclasses implement reset/step_async/step_wait/seed.

    :cvar SHARED_ATTRS: attributes ``get_attr`` may read (the same for every env).
    """

    SHARED_ATTRS: tuple[str, ...] = ("render_mode", "observation_space", "action_space")

    def close(self) -> None:
        pass

    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        if attr_name not in self.SHARED_ATTRS:
            raise AttributeError(f"{type(self).__name__} exposes only {self.SHARED_ATTRS}")
        return [getattr(self, attr_name) for _ in self._get_indices(indices)]

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        raise NotImplementedError(f"{type(self).__name__}: envs share one engine; set_attr is unsupported")

    def env_method(
        self, method_name: str, *method_args: Any, indices: VecEnvIndices = None, **kwargs: Any
    ) -> list[Any]:
        raise NotImplementedError(f"{type(self).__name__} has no per-env objects to call methods on")

    def env_is_wrapped(self, wrapper_class: type[gym.Wrapper], indices: VecEnvIndices = None) -> list[bool]:
        return [False for _ in self._get_indices(indices)]
