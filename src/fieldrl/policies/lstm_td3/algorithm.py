"""LSTM-TD3: TD3 whose actor and critics also read a window of past (observation, action) pairs.

Meng, Gorbet and Kulić (2021), "Memory-based Deep Reinforcement Learning for POMDPs",
arXiv:2102.12344. The update is SB3's TD3 (clipped double-Q, target policy smoothing,
delayed actor updates, Polyak targets) with every network call given the history window
sampled by :class:`HistoryReplayBuffer`.
"""

from __future__ import annotations

from typing import Any, ClassVar, TypeVar

import numpy as np
import torch as th
from gymnasium import spaces
from stable_baselines3.common.buffers import ReplayBuffer
from stable_baselines3.common.noise import ActionNoise
from stable_baselines3.common.off_policy_algorithm import OffPolicyAlgorithm
from stable_baselines3.common.policies import BasePolicy
from stable_baselines3.common.type_aliases import GymEnv, MaybeCallback, Schedule
from stable_baselines3.common.utils import polyak_update
from torch.nn import functional as F

from fieldrl.policies.lstm_td3.buffer import HistoryReplayBuffer
from fieldrl.policies.lstm_td3.history import HistoryWindow, clear_rows, push
from fieldrl.policies.lstm_td3.policies import LSTMActor, LSTMCritics, LSTMTD3Policy

SelfLSTMTD3 = TypeVar("SelfLSTMTD3", bound="LSTMTD3")


class LSTMTD3(OffPolicyAlgorithm):
    """Recurrent TD3 with a history window of the last ``history_length`` (observation, action) pairs.

    :param policy: ``"MlpLstmPolicy"`` or :class:`LSTMTD3Policy` (or a subclass).
    :param env: the environment (flat ``Box`` observations, ``Box`` actions).
    :param learning_rate: Adam learning rate of actor and critics (or a schedule).
    :param buffer_size: replay buffer capacity (transitions).
    :param learning_starts: env steps of uniform random actions before learning.
    :param batch_size: minibatch size.
    :param tau: Polyak coefficient of the target networks.
    :param gamma: discount factor.
    :param train_freq: update every ``train_freq`` steps (or ``(n, "episode")``).
    :param gradient_steps: gradient steps per rollout (-1: as many as env steps collected).
    :param action_noise: exploration noise added to the actor's (scaled) action in training.
    :param policy_delay: critic updates per actor/target update.
    :param target_policy_noise: s.d. of the target policy smoothing noise.
    :param target_noise_clip: clip of the target policy smoothing noise.
    :param history_length: ``l``, past (observation, action) pairs given to every network.
    :param lstm_hidden_size: LSTM width of the memory branches.
    :param replay_buffer_kwargs: extra arguments of :class:`HistoryReplayBuffer`
        (e.g. ``handle_timeout_termination``).
    :param stats_window_size: episodes averaged in the rollout logs.
    :param tensorboard_log: TensorBoard folder, if any.
    :param policy_kwargs: :class:`LSTMTD3Policy` arguments (``net_arch``, ``activation_fn``,
        ``pre_lstm_arch``, ``feature_arch``, ``n_critics``, ...).
    :param verbose: SB3 verbosity.
    :param seed: seed of torch, numpy, the action space and the env.
    :param device: torch device.
    :param _init_setup_model: build the networks now (False when loading).
    """

    policy_aliases: ClassVar[dict[str, type[BasePolicy]]] = {"MlpLstmPolicy": LSTMTD3Policy}
    #: fieldrl's SB3Policy carries ``state`` between calls for recurrent models
    is_recurrent: ClassVar[bool] = True

    policy: LSTMTD3Policy
    actor: LSTMActor
    actor_target: LSTMActor
    critic: LSTMCritics
    critic_target: LSTMCritics
    replay_buffer: HistoryReplayBuffer

    def __init__(
        self,
        policy: str | type[LSTMTD3Policy],
        env: GymEnv | str,
        learning_rate: float | Schedule = 1e-3,
        buffer_size: int = 1_000_000,
        learning_starts: int = 100,
        batch_size: int = 256,
        tau: float = 0.005,
        gamma: float = 0.99,
        train_freq: int | tuple[int, str] = 1,
        gradient_steps: int = 1,
        action_noise: ActionNoise | None = None,
        policy_delay: int = 2,
        target_policy_noise: float = 0.2,
        target_noise_clip: float = 0.5,
        history_length: int = 5,
        lstm_hidden_size: int = 128,
        replay_buffer_kwargs: dict[str, Any] | None = None,
        stats_window_size: int = 100,
        tensorboard_log: str | None = None,
        policy_kwargs: dict[str, Any] | None = None,
        verbose: int = 0,
        seed: int | None = None,
        device: th.device | str = "auto",
        _init_setup_model: bool = True,
    ):
        policy_kwargs = dict(policy_kwargs or {})
        clash = {"history_length", "lstm_hidden_size"} & set(policy_kwargs)
        if clash:
            raise ValueError(f"set {sorted(clash)} as LSTMTD3 arguments, not in policy_kwargs")
        if history_length < 1:
            raise ValueError(f"history_length must be >= 1, got {history_length}")
        super().__init__(
            policy,
            env,
            learning_rate,
            buffer_size,
            learning_starts,
            batch_size,
            tau,
            gamma,
            train_freq,
            gradient_steps,
            action_noise=action_noise,
            replay_buffer_class=HistoryReplayBuffer,
            replay_buffer_kwargs=dict(replay_buffer_kwargs or {}),
            policy_kwargs=policy_kwargs,
            stats_window_size=stats_window_size,
            tensorboard_log=tensorboard_log,
            verbose=verbose,
            device=device,
            seed=seed,
            sde_support=False,
            supported_action_spaces=(spaces.Box,),
            support_multi_env=True,
        )
        self.policy_delay = policy_delay
        self.target_noise_clip = target_noise_clip
        self.target_policy_noise = target_policy_noise
        self.history_length = int(history_length)
        self.lstm_hidden_size = int(lstm_hidden_size)
        #: each training env's window of past pairs (reset where an episode ends)
        self._rollout_window: HistoryWindow | None = None
        if _init_setup_model:
            self._setup_model()

    def _setup_model(self) -> None:
        self.replay_buffer_class = HistoryReplayBuffer
        self.replay_buffer_kwargs["history_length"] = self.history_length
        self.policy_kwargs.update(history_length=self.history_length, lstm_hidden_size=self.lstm_hidden_size)
        super()._setup_model()
        self._create_aliases()
        self._rollout_window = None

    def _create_aliases(self) -> None:
        self.actor = self.policy.actor
        self.actor_target = self.policy.actor_target
        self.critic = self.policy.critic
        self.critic_target = self.policy.critic_target

    # ------------------------------------------------------------------ training

    def train(self, gradient_steps: int, batch_size: int = 100) -> None:
        self.policy.set_training_mode(True)
        self._update_learning_rate([self.actor.optimizer, self.critic.optimizer])
        actor_losses, critic_losses = [], []
        for _ in range(gradient_steps):
            self._n_updates += 1
            data = self.replay_buffer.sample(batch_size, env=self._vec_normalize_env)
            history = (data.history_observations, data.history_actions, data.history_lengths)
            next_history = (
                data.next_history_observations,
                data.next_history_actions,
                data.next_history_lengths,
            )
            with th.no_grad():
                noise = data.actions.clone().data.normal_(0, self.target_policy_noise)
                noise = noise.clamp(-self.target_noise_clip, self.target_noise_clip)
                next_actions = (self.actor_target(data.next_observations, *next_history) + noise).clamp(-1, 1)
                next_qs = self.critic_target(data.next_observations, next_actions, *next_history)
                next_q, _ = th.min(th.cat(next_qs, dim=1), dim=1, keepdim=True)
                target_q = data.rewards + (1 - data.dones) * self.gamma * next_q

            current_q = self.critic(data.observations, data.actions, *history)
            critic_loss = sum(F.mse_loss(q, target_q) for q in current_q)
            assert isinstance(critic_loss, th.Tensor)
            critic_losses.append(critic_loss.item())
            self.critic.optimizer.zero_grad()
            critic_loss.backward()
            self.critic.optimizer.step()

            if self._n_updates % self.policy_delay == 0:
                actions = self.actor(data.observations, *history)
                actor_loss = -self.critic.q1_for_actor_loss(data.observations, actions, history).mean()
                actor_losses.append(actor_loss.item())
                self.actor.optimizer.zero_grad()
                actor_loss.backward()
                self.actor.optimizer.step()
                polyak_update(self.critic.parameters(), self.critic_target.parameters(), self.tau)
                polyak_update(self.actor.parameters(), self.actor_target.parameters(), self.tau)

        self.logger.record("train/n_updates", self._n_updates, exclude="tensorboard")
        if actor_losses:
            self.logger.record("train/actor_loss", np.mean(actor_losses))
        self.logger.record("train/critic_loss", np.mean(critic_losses))

    def _sample_action(
        self,
        learning_starts: int,
        action_noise: ActionNoise | None = None,
        n_envs: int = 1,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Act from each env's own window (as ``predict`` does), add noise, and remember the pair."""
        assert self._last_obs is not None, "self._last_obs was not set"
        obs = np.asarray(self._last_obs, dtype=np.float32).reshape(n_envs, -1)
        window = self._rollout_window
        if window is None or len(window.lengths) != n_envs:
            window = self.policy.initial_state(n_envs)
        if self.num_timesteps < learning_starts:
            random_actions = np.array([self.action_space.sample() for _ in range(n_envs)])
            scaled = self.policy.scale_action(random_actions)
        else:
            scaled = self.policy.scaled_actions(obs, window)
        if action_noise is not None:
            scaled = np.clip(scaled + action_noise(), -1, 1)
        scaled = np.asarray(scaled, dtype=np.float32).reshape(n_envs, -1)
        self._rollout_window = push(window, obs, scaled)
        actions = self.policy.unscale_action(scaled).reshape((n_envs, *self.action_space.shape))
        return actions, scaled

    def _store_transition(
        self,
        replay_buffer: ReplayBuffer,
        buffer_action: np.ndarray,
        new_obs: np.ndarray | dict[str, np.ndarray],
        reward: np.ndarray,
        dones: np.ndarray,
        infos: list[dict[str, Any]],
    ) -> None:
        super()._store_transition(replay_buffer, buffer_action, new_obs, reward, dones, infos)
        if self._rollout_window is not None and np.any(dones):
            self._rollout_window = clear_rows(self._rollout_window, np.asarray(dones, dtype=bool))

    def _setup_learn(
        self,
        total_timesteps: int,
        callback: MaybeCallback = None,
        reset_num_timesteps: bool = True,
        tb_log_name: str = "run",
        progress_bar: bool = False,
    ):
        env_reset = reset_num_timesteps or self._last_obs is None
        result = super()._setup_learn(
            total_timesteps, callback, reset_num_timesteps, tb_log_name, progress_bar
        )
        if env_reset:
            self.episodes_restarted()
        return result

    def episodes_restarted(self) -> None:
        """The envs start fresh episodes; the cut-off ones must not leak into new histories."""
        self._rollout_window = None
        if self.replay_buffer is not None:
            self.replay_buffer.start_new_episodes()

    def learn(
        self: SelfLSTMTD3,
        total_timesteps: int,
        callback: MaybeCallback = None,
        log_interval: int = 4,
        tb_log_name: str = "LSTMTD3",
        reset_num_timesteps: bool = True,
        progress_bar: bool = False,
    ) -> SelfLSTMTD3:
        return super().learn(
            total_timesteps=total_timesteps,
            callback=callback,
            log_interval=log_interval,
            tb_log_name=tb_log_name,
            reset_num_timesteps=reset_num_timesteps,
            progress_bar=progress_bar,
        )

    def _excluded_save_params(self) -> list[str]:
        return [
            *super()._excluded_save_params(),
            "actor",
            "critic",
            "actor_target",
            "critic_target",
            "_rollout_window",
        ]

    def _get_torch_save_params(self) -> tuple[list[str], list[str]]:
        return ["policy", "actor.optimizer", "critic.optimizer"], []
