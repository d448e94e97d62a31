"""A replay buffer that returns, with each transition, the history that preceded it.

Transitions are stored exactly as in SB3's :class:`ReplayBuffer`: row ``pos`` holds one
step of every environment, so env ``e``'s consecutive steps are consecutive rows of
column ``e``. Beside them the buffer records how many steps of its episode came before
each stored step. A sampled transition at row ``p`` of env ``e`` then looks back
``min(l, steps before it in the episode, rows still stored before it)`` rows of column
``e``: the history never reaches into another episode, another env, or rows that the
ring has already overwritten.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch as th
from gymnasium import spaces
from stable_baselines3.common.buffers import ReplayBuffer
from stable_baselines3.common.vec_env import VecNormalize


class HistoryReplayBufferSamples(NamedTuple):
    """A minibatch of transitions with their histories.

    ``history_*`` is the window for ``observations`` (pairs ``t-L .. t-1``);
    ``next_history_*`` the window for ``next_observations`` (pairs ``t-L'+1 .. t``, i.e.
    the same window with ``(o_t, a_t)`` appended). Windows are left-aligned and
    zero-padded; ``*_lengths`` counts the real pairs.
    """

    observations: th.Tensor
    actions: th.Tensor
    next_observations: th.Tensor
    dones: th.Tensor
    rewards: th.Tensor
    history_observations: th.Tensor
    history_actions: th.Tensor
    history_lengths: th.Tensor
    next_history_observations: th.Tensor
    next_history_actions: th.Tensor
    next_history_lengths: th.Tensor
    discounts: th.Tensor | None = None

    @property
    def history_mask(self) -> th.Tensor:
        """``(batch, l)`` True where the window holds a real pair."""
        steps = th.arange(self.history_observations.shape[1], device=self.history_lengths.device)
        return steps[None, :] < self.history_lengths[:, None]


class HistoryReplayBuffer(ReplayBuffer):
    """SB3 replay buffer that also samples each transition's preceding ``history_length`` pairs.

    :param buffer_size: total number of transitions kept (split over ``n_envs`` columns).
    :param observation_space: a flat ``Box``.
    :param action_space: a ``Box``.
    :param device: torch device of the sampled tensors.
    :param n_envs: number of parallel environments writing one row per step.
    :param optimize_memory_usage: not supported (must be False).
    :param handle_timeout_termination: as in SB3: time-limit ends do not cut the bootstrap.
    :param history_length: ``l``, the number of past (observation, action) pairs returned.
    """

    def __init__(
        self,
        buffer_size: int,
        observation_space: spaces.Space,
        action_space: spaces.Space,
        device: th.device | str = "auto",
        n_envs: int = 1,
        optimize_memory_usage: bool = False,
        handle_timeout_termination: bool = True,
        history_length: int = 5,
    ):
        if optimize_memory_usage:
            raise ValueError("HistoryReplayBuffer does not support optimize_memory_usage")
        if not isinstance(observation_space, spaces.Box) or len(observation_space.shape) != 1:
            raise ValueError(f"HistoryReplayBuffer needs a flat Box observation space: {observation_space}")
        if history_length < 1:
            raise ValueError(f"history_length must be >= 1, got {history_length}")
        super().__init__(
            buffer_size,
            observation_space,
            action_space,
            device=device,
            n_envs=n_envs,
            optimize_memory_usage=False,
            handle_timeout_termination=handle_timeout_termination,
        )
        self.history_length = int(history_length)
        #: steps of the same episode stored before each row (per env column)
        self.episode_steps = np.zeros((self.buffer_size, self.n_envs), dtype=np.int64)
        self._steps_in_episode = np.zeros(self.n_envs, dtype=np.int64)

    def add(
        self,
        obs: np.ndarray,
        next_obs: np.ndarray,
        action: np.ndarray,
        reward: np.ndarray,
        done: np.ndarray,
        infos: list[dict],
    ) -> None:
        self.episode_steps[self.pos] = self._steps_in_episode
        super().add(obs, next_obs, action, reward, done, infos)
        done = np.asarray(done, dtype=bool).reshape(self.n_envs)
        self._steps_in_episode = np.where(done, 0, self._steps_in_episode + 1)

    def start_new_episodes(self, env_indices: np.ndarray | None = None) -> None:
        """Mark that the next step of these envs (all if None) starts a new episode.

        Needed when the algorithm resets the environments without a ``done`` (a new
        ``learn`` call), so the next episode does not look back into the cut-off one.
        """
        if env_indices is None:
            self._steps_in_episode[:] = 0
        else:
            self._steps_in_episode[np.asarray(env_indices)] = 0

    def reset(self) -> None:
        super().reset()
        self._steps_in_episode = np.zeros(self.n_envs, dtype=np.int64)

    def history_lengths(self, batch_inds: np.ndarray, env_indices: np.ndarray) -> np.ndarray:
        """Number of real past pairs for the transitions at rows ``batch_inds`` of ``env_indices``."""
        # once the ring is full the oldest stored row is ``pos``
        stored_before = (batch_inds - self.pos) % self.buffer_size if self.full else batch_inds
        steps = self.episode_steps[batch_inds, env_indices]
        return np.minimum(np.minimum(steps, stored_before), self.history_length)

    def _window(
        self,
        end: np.ndarray,
        lengths: np.ndarray,
        env_indices: np.ndarray,
        env: VecNormalize | None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Rows ``end - length .. end - 1`` of each env column, left-aligned, zero-padded."""
        offsets = np.arange(self.history_length)
        rows = (end[:, None] - lengths[:, None] + offsets[None, :]) % self.buffer_size
        mask = (offsets[None, :] < lengths[:, None])[..., None]
        columns = env_indices[:, None]
        obs = self._normalize_obs(self.observations[rows, columns], env)
        obs = np.where(mask, obs, 0.0).astype(np.float32)
        actions = np.where(mask, self.actions[rows, columns], 0.0).astype(np.float32)
        return obs, actions

    def _get_samples(  # type: ignore[override]
        self,
        batch_inds: np.ndarray,
        env: VecNormalize | None = None,
        env_indices: np.ndarray | None = None,
    ) -> HistoryReplayBufferSamples:
        """Transitions at ``batch_inds`` (rows) of ``env_indices`` (random columns if None)."""
        batch_inds = np.asarray(batch_inds, dtype=np.int64)
        if env_indices is None:
            env_indices = np.random.randint(0, high=self.n_envs, size=(len(batch_inds),))
        env_indices = np.asarray(env_indices, dtype=np.int64)
        lengths = self.history_lengths(batch_inds, env_indices)
        next_lengths = np.minimum(lengths + 1, self.history_length)
        hist_obs, hist_actions = self._window(batch_inds, lengths, env_indices, env)
        next_hist_obs, next_hist_actions = self._window(batch_inds + 1, next_lengths, env_indices, env)
        dones = self.dones[batch_inds, env_indices] * (1 - self.timeouts[batch_inds, env_indices])
        data = (
            self._normalize_obs(self.observations[batch_inds, env_indices, :], env),
            self.actions[batch_inds, env_indices, :],
            self._normalize_obs(self.next_observations[batch_inds, env_indices, :], env),
            dones.reshape(-1, 1),
            self._normalize_reward(self.rewards[batch_inds, env_indices].reshape(-1, 1), env),
            hist_obs,
            hist_actions,
        )
        tensors = tuple(map(self.to_torch, data))
        return HistoryReplayBufferSamples(
            *tensors,
            history_lengths=th.as_tensor(lengths, device=self.device),
            next_history_observations=self.to_torch(next_hist_obs),
            next_history_actions=self.to_torch(next_hist_actions),
            next_history_lengths=th.as_tensor(next_lengths, device=self.device),
        )
