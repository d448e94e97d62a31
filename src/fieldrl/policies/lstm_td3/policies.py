"""Actor, twin critics and the policy holding them and their targets (Meng et al. 2021).

Every network has two branches whose outputs are concatenated and fed to an MLP head:

* memory: ``(o_k, a_k)`` pairs of the history window -> MLP -> LSTM; the LSTM output at
  the last real pair (zeros when the window is empty);
* current feature: ``o_t`` (actor) or ``(o_t, a_t)`` (critics) -> MLP.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch as th
from gymnasium import spaces
from stable_baselines3.common.policies import BasePolicy
from stable_baselines3.common.preprocessing import get_action_dim
from stable_baselines3.common.torch_layers import create_mlp
from stable_baselines3.common.type_aliases import Schedule
from torch import nn

from fieldrl.policies.lstm_td3.history import HistoryWindow, clear_rows, empty_window, push

History = tuple[th.Tensor, th.Tensor, th.Tensor]


def _mlp(input_dim: int, arch: list[int], activation_fn: type[nn.Module]) -> tuple[nn.Sequential, int]:
    return nn.Sequential(*create_mlp(input_dim, -1, arch, activation_fn)), (arch[-1] if arch else input_dim)


class MemoryEncoder(nn.Module):
    """MLP over each (observation, action) pair, then an LSTM over the window.

    :param obs_dim: observation size.
    :param action_dim: action size.
    :param pre_lstm_arch: hidden sizes of the per-pair MLP.
    :param lstm_hidden_size: LSTM width (= output size).
    :param activation_fn: activation of the MLP.
    """

    def __init__(
        self,
        obs_dim: int,
        action_dim: int,
        pre_lstm_arch: list[int],
        lstm_hidden_size: int,
        activation_fn: type[nn.Module],
    ):
        super().__init__()
        self.pre, pre_dim = _mlp(obs_dim + action_dim, pre_lstm_arch, activation_fn)
        self.lstm = nn.LSTM(pre_dim, lstm_hidden_size, batch_first=True)
        self.output_dim = lstm_hidden_size

    def forward(self, hist_obs: th.Tensor, hist_actions: th.Tensor, lengths: th.Tensor) -> th.Tensor:
        out, _ = self.lstm(self.pre(th.cat([hist_obs, hist_actions], dim=-1)))
        last = (lengths - 1).clamp(min=0).long()
        summary = out[th.arange(out.shape[0], device=out.device), last]
        return summary * (lengths > 0).unsqueeze(-1).to(summary.dtype)


class LSTMActor(nn.Module):
    """Deterministic policy ``mu(o_t, history) in [-1, 1]^action_dim``."""

    def __init__(
        self,
        obs_dim: int,
        action_dim: int,
        net_arch: list[int],
        pre_lstm_arch: list[int],
        lstm_hidden_size: int,
        feature_arch: list[int],
        activation_fn: type[nn.Module],
    ):
        super().__init__()
        self.memory = MemoryEncoder(obs_dim, action_dim, pre_lstm_arch, lstm_hidden_size, activation_fn)
        self.current, feature_dim = _mlp(obs_dim, feature_arch, activation_fn)
        head = create_mlp(
            self.memory.output_dim + feature_dim, action_dim, net_arch, activation_fn, squash_output=True
        )
        self.head = nn.Sequential(*head)

    def forward(self, obs: th.Tensor, hist_obs: th.Tensor, hist_actions: th.Tensor, lengths: th.Tensor):
        memory = self.memory(hist_obs, hist_actions, lengths)
        return self.head(th.cat([memory, self.current(obs)], dim=-1))


class LSTMCritics(nn.Module):
    """``n_critics`` independent Q-networks ``Q(o_t, a_t, history)``."""

    def __init__(
        self,
        obs_dim: int,
        action_dim: int,
        net_arch: list[int],
        pre_lstm_arch: list[int],
        lstm_hidden_size: int,
        feature_arch: list[int],
        activation_fn: type[nn.Module],
        n_critics: int = 2,
    ):
        super().__init__()
        self.memories = nn.ModuleList()
        self.currents = nn.ModuleList()
        self.heads = nn.ModuleList()
        for _ in range(n_critics):
            memory = MemoryEncoder(obs_dim, action_dim, pre_lstm_arch, lstm_hidden_size, activation_fn)
            current, feature_dim = _mlp(obs_dim + action_dim, feature_arch, activation_fn)
            head = nn.Sequential(*create_mlp(memory.output_dim + feature_dim, 1, net_arch, activation_fn))
            self.memories.append(memory)
            self.currents.append(current)
            self.heads.append(head)

    def _q(self, i: int, obs: th.Tensor, actions: th.Tensor, history: History) -> th.Tensor:
        memory = self.memories[i](*history)
        return self.heads[i](th.cat([memory, self.currents[i](th.cat([obs, actions], dim=-1))], dim=-1))

    def forward(
        self,
        obs: th.Tensor,
        actions: th.Tensor,
        hist_obs: th.Tensor,
        hist_actions: th.Tensor,
        lengths: th.Tensor,
    ) -> tuple[th.Tensor, ...]:
        history = (hist_obs, hist_actions, lengths)
        return tuple(self._q(i, obs, actions, history) for i in range(len(self.heads)))

    def q1_forward(
        self,
        obs: th.Tensor,
        actions: th.Tensor,
        hist_obs: th.Tensor,
        hist_actions: th.Tensor,
        lengths: th.Tensor,
    ) -> th.Tensor:
        return self._q(0, obs, actions, (hist_obs, hist_actions, lengths))

    def q1_for_actor_loss(self, obs: th.Tensor, actions: th.Tensor, history: History) -> th.Tensor:
        """``Q1`` for the actor's loss: the memory branch runs without autograd.

        The history does not depend on the actor, so the actor's gradient is the same as
        through :meth:`q1_forward`; skipping the LSTM's backward pass only drops gradients
        of critic parameters, which the actor update never uses.
        """
        with th.no_grad():
            memory = self.memories[0](*history)
        return self.heads[0](th.cat([memory, self.currents[0](th.cat([obs, actions], dim=-1))], dim=-1))


class LSTMTD3Policy(BasePolicy):
    """Actor, critics and their Polyak targets for :class:`~fieldrl.policies.lstm_td3.LSTMTD3`.

    :param observation_space: a flat ``Box``.
    :param action_space: a ``Box``.
    :param lr_schedule: learning rate schedule (Adam for actor and critics).
    :param net_arch: hidden sizes of the MLP after the two branches are joined, for actor and
        critics alike, or ``{"pi": [...], "qf": [...]}``.
    :param activation_fn: activation of every MLP.
    :param history_length: ``l``, the number of past (observation, action) pairs seen.
    :param lstm_hidden_size: LSTM width of the memory branch.
    :param pre_lstm_arch: hidden sizes of the MLP applied to each pair before the LSTM.
    :param feature_arch: hidden sizes of the current-feature branch.
    :param n_critics: number of Q-networks (2 for clipped double-Q).
    :param optimizer_class: optimizer of actor and critics.
    :param optimizer_kwargs: extra optimizer arguments.
    """

    def __init__(
        self,
        observation_space: spaces.Box,
        action_space: spaces.Box,
        lr_schedule: Schedule,
        net_arch: list[int] | dict[str, list[int]] | None = None,
        activation_fn: type[nn.Module] = nn.ReLU,
        history_length: int = 5,
        lstm_hidden_size: int = 128,
        pre_lstm_arch: list[int] | None = None,
        feature_arch: list[int] | None = None,
        n_critics: int = 2,
        optimizer_class: type[th.optim.Optimizer] = th.optim.Adam,
        optimizer_kwargs: dict[str, Any] | None = None,
    ):
        super().__init__(
            observation_space,
            action_space,
            optimizer_class=optimizer_class,
            optimizer_kwargs=optimizer_kwargs,
            squash_output=True,
        )
        if not isinstance(observation_space, spaces.Box) or len(observation_space.shape) != 1:
            raise ValueError(f"LSTM-TD3 needs a flat Box observation space, got {observation_space}")
        if history_length < 1:
            raise ValueError(f"history_length must be >= 1, got {history_length}")
        self.net_arch = [256, 256] if net_arch is None else net_arch
        self.activation_fn = activation_fn
        self.history_length = int(history_length)
        self.lstm_hidden_size = int(lstm_hidden_size)
        self.pre_lstm_arch = [128] if pre_lstm_arch is None else list(pre_lstm_arch)
        self.feature_arch = [128] if feature_arch is None else list(feature_arch)
        self.n_critics = int(n_critics)
        self.obs_dim = int(observation_space.shape[0])
        self.action_dim = get_action_dim(action_space)
        self._build(lr_schedule)

    def _arch(self, key: str) -> list[int]:
        return list(self.net_arch[key]) if isinstance(self.net_arch, dict) else list(self.net_arch)

    def _make_actor(self) -> LSTMActor:
        return LSTMActor(
            self.obs_dim,
            self.action_dim,
            self._arch("pi"),
            self.pre_lstm_arch,
            self.lstm_hidden_size,
            self.feature_arch,
            self.activation_fn,
        ).to(self.device)

    def _make_critics(self) -> LSTMCritics:
        return LSTMCritics(
            self.obs_dim,
            self.action_dim,
            self._arch("qf"),
            self.pre_lstm_arch,
            self.lstm_hidden_size,
            self.feature_arch,
            self.activation_fn,
            self.n_critics,
        ).to(self.device)

    def _build(self, lr_schedule: Schedule) -> None:
        self.actor, self.actor_target = self._make_actor(), self._make_actor()
        self.critic, self.critic_target = self._make_critics(), self._make_critics()
        for net, target in ((self.actor, self.actor_target), (self.critic, self.critic_target)):
            target.load_state_dict(net.state_dict())
            target.train(False)
            target.requires_grad_(False)
        lr = lr_schedule(1)
        self.actor.optimizer = self.optimizer_class(self.actor.parameters(), lr=lr, **self.optimizer_kwargs)
        self.critic.optimizer = self.optimizer_class(self.critic.parameters(), lr=lr, **self.optimizer_kwargs)

    def _get_constructor_parameters(self) -> dict[str, Any]:
        data = super()._get_constructor_parameters()
        data.update(
            net_arch=self.net_arch,
            activation_fn=self.activation_fn,
            history_length=self.history_length,
            lstm_hidden_size=self.lstm_hidden_size,
            pre_lstm_arch=self.pre_lstm_arch,
            feature_arch=self.feature_arch,
            n_critics=self.n_critics,
            optimizer_class=self.optimizer_class,
            optimizer_kwargs=self.optimizer_kwargs,
        )
        return data

    def set_training_mode(self, mode: bool) -> None:
        self.actor.train(mode)
        self.critic.train(mode)
        self.training = mode

    # ------------------------------------------------------------------ acting

    def initial_state(self, n_envs: int) -> HistoryWindow:
        """Empty history windows for ``n_envs`` environments."""
        return empty_window(n_envs, self.history_length, self.obs_dim, self.action_dim)

    def forward(self, obs: th.Tensor, hist_obs: th.Tensor, hist_actions: th.Tensor, lengths: th.Tensor):
        return self.actor(obs, hist_obs, hist_actions, lengths)

    def _predict(self, observation: Any, deterministic: bool = False) -> th.Tensor:
        raise NotImplementedError("LSTM-TD3 acts on a history window: use predict(obs, state, episode_start)")

    def scaled_actions(self, obs: np.ndarray, window: HistoryWindow) -> np.ndarray:
        """Actor output in ``[-1, 1]`` for a batch ``obs`` ``(n, obs_dim)`` and its windows."""
        with th.no_grad():
            tensors = [th.as_tensor(np.asarray(a), device=self.device) for a in (obs, *window)]
            tensors[0] = tensors[0].float()
            return self.actor(*tensors).cpu().numpy()

    def predict(  # type: ignore[override]
        self,
        observation: np.ndarray,
        state: HistoryWindow | tuple[np.ndarray, ...] | None = None,
        episode_start: np.ndarray | None = None,
        deterministic: bool = False,
    ) -> tuple[np.ndarray, HistoryWindow]:
        """Actions for a batch of observations given each environment's history window.

        :param observation: ``(n, obs_dim)`` (or one ``(obs_dim,)`` observation).
        :param state: the windows returned by the previous call; None starts empty windows.
        :param episode_start: ``(n,)`` True where an episode begins: that env's window is emptied
            before acting.
        :param deterministic: ignored; TD3's policy is deterministic (exploration noise is added
            only during training).
        :return: actions in the action space's bounds, and the windows with this step appended.
        """
        self.set_training_mode(False)
        obs = np.asarray(observation, dtype=np.float32)
        vectorized = obs.ndim == 2
        obs = obs.reshape(-1, self.obs_dim)
        n = len(obs)
        window = self.initial_state(n) if state is None else HistoryWindow(*state)
        if len(window.lengths) != n:
            raise ValueError(f"state holds {len(window.lengths)} environments, observation {n}")
        if episode_start is not None:
            window = clear_rows(window, np.asarray(episode_start, dtype=bool).reshape(n))
        scaled = self.scaled_actions(obs, window)
        actions = self.unscale_action(scaled).reshape((n, *self.action_space.shape))
        window = push(window, obs, scaled)
        return (actions if vectorized else actions[0]), window
