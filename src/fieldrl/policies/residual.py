"""Residual policies: a learned, bounded correction added to a heuristic's continuous action.

Why: for continuous controls (chemotherapy doses) a practitioner's rule is already good, and an
RL learner started from scratch spends most of its budget rediscovering it; worse, early in
training it doses like a random policy. Residual RL (Johannink et al. 2019, Silver et al. 2018)
instead learns ``a = clip(h(s) + scale * (high - low) / 2 * c(s), low, high)``, where ``h`` is the
heuristic and ``c in [-1, 1]`` the learned correction. With the correction's output layer zeroed
(:func:`zero_correction`) training starts exactly at the heuristic's behaviour, and ``scale``
bounds how far the learner can ever move away from it (a safety margin a stakeholder can read).

- :class:`ResidualVecEnv` wraps the raw training ``VecEnv`` (``VecNormalize``, if any, goes outside
  it, so the heuristic sees raw observations while the network sees normalised ones): the learner
  acts in ``Box(-1, 1)``, the wrapped env receives the combined action.
- :class:`ResidualPolicy` applies the same arithmetic at evaluation time behind fieldrl's
  ``Policy`` protocol, from the heuristic and the trained correction policy.

Only Box action spaces have a residual to add to; anything else is a ``ValueError``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from stable_baselines3.common.vec_env import VecEnv, VecEnvWrapper
from stable_baselines3.common.vec_env.base_vec_env import VecEnvObs, VecEnvStepReturn

from fieldrl.policies.base import Policy


def _box(space: Any, what: str) -> spaces.Box:
    if not isinstance(space, spaces.Box):
        raise ValueError(f"residual policies need a Box (continuous) action space; {what} has {space}")
    if not (np.all(np.isfinite(space.low)) and np.all(np.isfinite(space.high))):
        raise ValueError(f"residual policies need finite action bounds; {what} has {space}")
    return space


def _check_scale(scale: float) -> float:
    scale = float(scale)
    if not (np.isfinite(scale) and scale > 0):
        raise ValueError(f"the residual scale must be a positive number, got {scale}")
    return scale


def combine(
    heuristic_action: np.ndarray, correction: np.ndarray, scale: float, low: np.ndarray, high: np.ndarray
) -> np.ndarray:
    """``clip(h + scale * (high - low) / 2 * clip(c, -1, 1), low, high)`` (float64).

    A correction of ``+1`` moves the heuristic's action up by ``scale`` times half the action
    range (``-1`` down by as much), never beyond the action bounds.
    """
    h = np.asarray(heuristic_action, dtype=np.float64)
    c = np.clip(np.asarray(correction, dtype=np.float64).reshape(h.shape), -1.0, 1.0)
    half = (np.asarray(high, dtype=np.float64) - np.asarray(low, dtype=np.float64)) / 2.0
    return np.clip(h + scale * half * c, low, high)


class ResidualVecEnv(VecEnvWrapper):
    """Train a correction to ``heuristic``: the learner acts in ``Box(-1, 1)``, the env gets ``h + c``.

    At every step the heuristic is called once for the whole batch, on the raw observations the
    wrapped env returned last, with ``episode_start`` True where an episode just began (after
    ``reset`` and wherever the previous step ended an episode, since the wrapped env autoresets).
    So stateful heuristics (dose cycles) restart with their episodes. The heuristic must act from
    observations alone: it is not bound to evaluation envs here.

    ``heuristic_actions`` and ``env_actions`` hold the last step's heuristic and combined actions
    (``(n_envs, *action_shape)``, float64), for logging and tests.

    :param venv: the raw training env (Box actions with finite bounds); wrap ``VecNormalize``
        around this wrapper, not inside it.
    :param heuristic: a fieldrl ``Policy`` (``reset(n)``, ``act(obs, episode_start)``).
    :param scale: a correction of ±1 moves the action by ``scale * (high - low) / 2``.
    """

    def __init__(self, venv: VecEnv, heuristic: Policy, scale: float):
        space = _box(venv.action_space, "the wrapped env")
        self.heuristic = heuristic
        self.scale = _check_scale(scale)
        self.low = space.low.astype(np.float64)
        self.high = space.high.astype(np.float64)
        self.env_action_space = space
        correction = spaces.Box(-1.0, 1.0, shape=space.shape, dtype=np.float32)
        super().__init__(venv, action_space=correction)
        n = self.num_envs
        self._obs: Any = None
        self._start = np.ones(n, dtype=bool)
        self.heuristic_actions = np.zeros((n, *space.shape))
        self.env_actions = np.zeros((n, *space.shape))

    def reset(self) -> VecEnvObs:
        obs = self.venv.reset()
        self.heuristic.reset(self.num_envs)
        self._obs = obs
        self._start = np.ones(self.num_envs, dtype=bool)
        return obs

    def step_async(self, actions: np.ndarray) -> None:
        if self._obs is None:
            raise RuntimeError("reset the ResidualVecEnv before stepping it")
        shape = (self.num_envs, *self.env_action_space.shape)
        h = np.asarray(self.heuristic.act(self._obs, self._start.copy()), dtype=np.float64).reshape(shape)
        self.heuristic_actions = h
        self.env_actions = combine(h, np.asarray(actions).reshape(shape), self.scale, self.low, self.high)
        self.venv.step_async(self.env_actions.astype(self.env_action_space.dtype))

    def step_wait(self) -> VecEnvStepReturn:
        obs, rewards, dones, infos = self.venv.step_wait()
        self._obs = obs
        self._start = np.asarray(dones, dtype=bool).copy()
        return obs, rewards, dones, infos


class ResidualPolicy(Policy):
    """Evaluate ``heuristic + correction``: the same arithmetic as :class:`ResidualVecEnv`, as a ``Policy``.

    :param name: label used in results and reports.
    :param heuristic: the heuristic the correction was trained around.
    :param learned: the trained correction (e.g. an ``SB3Policy`` of a model trained on a
        :class:`ResidualVecEnv`), acting in ``[-1, 1]``; values outside are clipped.
    :param scale: as in training.
    :param low: lower bounds of the env's action space.
    :param high: upper bounds of the env's action space.
    """

    def __init__(self, name: str, heuristic: Policy, learned: Policy, scale: float, low: Any, high: Any):
        self.name = name
        self.heuristic = heuristic
        self.learned = learned
        self.scale = _check_scale(scale)
        self.low = np.asarray(low, dtype=np.float64)
        self.high = np.asarray(high, dtype=np.float64)
        if self.low.shape != self.high.shape or np.any(self.low > self.high):
            raise ValueError(f"residual action bounds must be low <= high of one shape, got {low} and {high}")
        if not (np.all(np.isfinite(self.low)) and np.all(np.isfinite(self.high))):
            raise ValueError(f"residual policies need finite action bounds, got {low} and {high}")

    def reset(self, n_envs: int) -> None:
        self.heuristic.reset(n_envs)
        self.learned.reset(n_envs)

    def bind_envs(self, envs: Any) -> None:
        for policy in (self.heuristic, self.learned):
            policy.bind_envs(envs)

    def act(self, obs: np.ndarray, episode_start: np.ndarray) -> np.ndarray:
        h = np.asarray(self.heuristic.act(obs, episode_start), dtype=np.float64)
        h = h.reshape(len(h), *self.low.shape)
        c = np.asarray(self.learned.act(obs, episode_start))
        return combine(h, c, self.scale, self.low, self.high).astype(np.float32)


def zero_correction(model: Any) -> Any:
    """Make ``model``'s deterministic action exactly 0, so residual training starts at the heuristic.

    Zeroes the weights and bias of the actor's last linear layer: ``policy.action_net`` for
    on-policy actor-critics (PPO, A2C, TRPO, RecurrentPPO: the Gaussian mean), the last
    ``nn.Linear`` of ``actor.mu`` for SAC/TQC (``tanh(0) = 0``) and TD3/DDPG, of ``actor.head``
    for LSTM-TD3; target actors are then copied from the actor. The layer's inputs still carry
    gradients, so the correction leaves zero as soon as training finds a better action.

    :return: ``model`` (changed in place).
    :raises ValueError: for a non-Box action space or a policy without such a layer (e.g. DQN).
    """
    _box(model.action_space, type(model).__name__)
    policy = model.policy
    head = getattr(policy, "action_net", None)
    if head is None:
        actor = getattr(policy, "actor", None)
        for attr in ("mu", "head"):
            head = getattr(actor, attr, None)
            if head is not None:
                break
    linear = [m for m in head.modules() if isinstance(m, torch.nn.Linear)] if head is not None else []
    if not linear:
        raise ValueError(
            f"cannot zero the correction of {type(model).__name__}: its policy has no actor output layer "
            "(action_net, actor.mu or actor.head)"
        )
    with torch.no_grad():
        linear[-1].weight.zero_()
        if linear[-1].bias is not None:
            linear[-1].bias.zero_()
    target = getattr(policy, "actor_target", None)
    if target is not None:
        target.load_state_dict(policy.actor.state_dict())
    return model
