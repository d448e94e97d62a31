"""Value-decomposed MaskablePPO: one value head per reward term, advantages combined with fixed weights.

After CaTR (Zhou et al., arXiv:2605.08754): the safety term is sparse (a conflict is rare) and,
summed with dense efficiency and progress terms into one scalar, its signal is lost in the
critic's error. Here the critic has one output per term ``k`` (safety, efficiency, progress),
each trained on its own discounted return; the policy gradient uses

    A_t = sum_k w_k * GAE_k(t)

with ``term_weights`` ``w`` (safety first: by default the env's weights 10, 0.1, 0.1, so the
objective is the summed reward's, only its estimate is decomposed).

The algorithm knows no domain: the env must put each agent's unweighted term rewards in
``infos[i]["reward_terms"]`` (the taxiway training VecEnv does, see
:class:`~fieldrl.domains.taxiway.vec.TermRewardSlots`), and the scenario sets ``term_weights``
to match its terms (the default is the taxiway's safety, efficiency and progress weights). The
algorithm wraps its training env so that SB3's rollout code sees ``(n_envs, n_terms)`` rewards;
``VecMonitor`` underneath still records the scalar episode return. ``normalize_reward`` is not
supported (terms are raw). Built on sb3-contrib's MaskablePPO, policy and rollout buffer; only the
shapes change.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch as th
from sb3_contrib import MaskablePPO
from sb3_contrib.common.maskable.buffers import MaskableRolloutBuffer
from sb3_contrib.common.maskable.policies import MaskableActorCriticPolicy
from stable_baselines3.common.vec_env import VecEnv, VecEnvWrapper
from torch import nn

DEFAULT_WEIGHTS = (10.0, 0.1, 0.1)


class TermRewardVecEnv(VecEnvWrapper):
    """Replace the scalar reward by the ``reward_terms`` vector each step's infos carry.

    Truncated episodes are bootstrapped here, per term, with ``gamma * V_k(terminal obs)``
    (``value_fn``, set by :class:`VDMaskablePPO`), and their ``TimeLimit.truncated`` flag is then
    cleared: MaskablePPO's own bootstrap adds a scalar value to a scalar reward and cannot take
    the per-term vectors.
    """

    def __init__(self, venv: VecEnv, n_terms: int):
        super().__init__(venv)
        self.n_terms = n_terms
        self.value_fn: Any = None
        self.gamma = 0.99

    def reset(self) -> Any:
        return self.venv.reset()

    def step_wait(self):
        obs, _, dones, infos = self.venv.step_wait()
        terms = np.zeros((self.num_envs, self.n_terms), dtype=np.float32)
        for i, info in enumerate(infos):
            if "reward_terms" in info:
                terms[i] = info["reward_terms"]
        cut = [
            i
            for i, info in enumerate(infos)
            if dones[i] and info.get("terminal_observation") is not None and info.get("TimeLimit.truncated")
        ]
        if cut:
            if self.value_fn is not None:
                last = np.stack([infos[i]["terminal_observation"] for i in cut])
                terms[cut] += self.gamma * self.value_fn(last).reshape(len(cut), self.n_terms)
            for i in cut:
                infos[i]["TimeLimit.truncated"] = False
        return obs, terms, dones, infos


class VDPolicy(MaskableActorCriticPolicy):
    """MaskableActorCriticPolicy whose value net has ``n_terms`` outputs."""

    def __init__(self, *args: Any, n_terms: int = 3, **kwargs: Any):
        self.n_terms = n_terms
        super().__init__(*args, **kwargs)

    def _build(self, lr_schedule: Any) -> None:
        super()._build(lr_schedule)
        self.value_net = nn.Linear(self.mlp_extractor.latent_dim_vf, self.n_terms)
        if self.ortho_init:
            nn.init.orthogonal_(self.value_net.weight, gain=1.0)
            nn.init.zeros_(self.value_net.bias)
        self.optimizer = self.optimizer_class(self.parameters(), lr=lr_schedule(1), **self.optimizer_kwargs)

    def _get_constructor_parameters(self) -> dict[str, Any]:
        data = super()._get_constructor_parameters()
        data["n_terms"] = self.n_terms
        return data


class VDRolloutBuffer(MaskableRolloutBuffer):
    """Rollout buffer with per-term rewards, values and returns; the advantage is their weighted sum.

    Samples flatten values and returns to ``batch * n_terms`` (row-major), matching
    ``values.flatten()`` in MaskablePPO's training loop, so its value loss is the mean over terms.
    """

    def __init__(self, *args: Any, term_weights: Sequence[float] = DEFAULT_WEIGHTS, **kwargs: Any):
        self.weights = np.asarray(term_weights, dtype=np.float32)
        self.n_terms = len(self.weights)
        super().__init__(*args, **kwargs)

    def reset(self) -> None:
        super().reset()
        shape = (self.buffer_size, self.n_envs, self.n_terms)
        self.rewards = np.zeros(shape, dtype=np.float32)
        self.values = np.zeros(shape, dtype=np.float32)
        self.returns = np.zeros(shape, dtype=np.float32)
        self.term_advantages = np.zeros(shape, dtype=np.float32)

    def add(self, obs, action, reward, episode_start, value, log_prob, action_masks=None) -> None:  # type: ignore[override]
        if action_masks is not None:
            self.action_masks[self.pos] = action_masks.reshape((self.n_envs, self.mask_dims))
        if len(log_prob.shape) == 0:
            log_prob = log_prob.reshape(-1, 1)
        self.observations[self.pos] = np.array(obs)
        self.actions[self.pos] = np.array(action).reshape((self.n_envs, self.action_dim))
        self.rewards[self.pos] = np.asarray(reward, dtype=np.float32).reshape(self.n_envs, self.n_terms)
        self.episode_starts[self.pos] = np.array(episode_start)
        self.values[self.pos] = value.clone().cpu().numpy().reshape(self.n_envs, self.n_terms)
        self.log_probs[self.pos] = log_prob.clone().cpu().numpy()
        self.pos += 1
        if self.pos == self.buffer_size:
            self.full = True

    def compute_returns_and_advantage(self, last_values: th.Tensor, dones: np.ndarray) -> None:
        last = last_values.clone().cpu().numpy().reshape(self.n_envs, self.n_terms)
        gae = np.zeros((self.n_envs, self.n_terms), dtype=np.float32)
        for step in reversed(range(self.buffer_size)):
            if step == self.buffer_size - 1:
                non_terminal = 1.0 - dones.astype(np.float32)
                next_values = last
            else:
                non_terminal = 1.0 - self.episode_starts[step + 1]
                next_values = self.values[step + 1]
            nt = non_terminal[:, None]
            delta = self.rewards[step] + self.gamma * next_values * nt - self.values[step]
            gae = delta + self.gamma * self.gae_lambda * nt * gae
            self.term_advantages[step] = gae
        self.returns = self.term_advantages + self.values
        self.advantages = (self.term_advantages * self.weights).sum(axis=-1)


class VDMaskablePPO(MaskablePPO):
    """MaskablePPO with a value-decomposed critic (see the module docstring).

    :param term_weights: weight of each reward term in the policy's advantage (safety first).
    """

    def __init__(self, policy: Any, env: Any, term_weights: Sequence[float] = DEFAULT_WEIGHTS, **kwargs: Any):
        self.term_weights = tuple(float(w) for w in term_weights)
        if policy == "MlpPolicy":
            policy = VDPolicy
        kwargs["policy_kwargs"] = {**(kwargs.get("policy_kwargs") or {}), "n_terms": len(self.term_weights)}
        kwargs["rollout_buffer_class"] = VDRolloutBuffer
        kwargs["rollout_buffer_kwargs"] = {"term_weights": self.term_weights}
        if env is not None and not isinstance(env, str):
            env = TermRewardVecEnv(env, len(self.term_weights))
        super().__init__(policy, env, **kwargs)
        self._hook_values()

    def set_env(self, env: Any, force_reset: bool = True) -> None:
        if not isinstance(env, TermRewardVecEnv):
            env = TermRewardVecEnv(env, len(self.term_weights))
        super().set_env(env, force_reset)
        self._hook_values()

    def _hook_values(self) -> None:
        """Let the training env bootstrap truncated episodes with this critic (per term)."""
        if isinstance(self.env, TermRewardVecEnv):
            self.env.gamma = self.gamma
            self.env.value_fn = self._values

    def _values(self, obs: np.ndarray) -> np.ndarray:
        with th.no_grad():
            tensor = self.policy.obs_to_tensor(obs)[0]
            return self.policy.predict_values(tensor).cpu().numpy()


def _signature() -> inspect.Signature:
    """MaskablePPO's constructor arguments plus ``term_weights`` (what a scenario may set)."""
    base = inspect.signature(MaskablePPO.__init__)
    params = [p for p in base.parameters.values() if p.kind is not inspect.Parameter.VAR_KEYWORD]
    extra = inspect.Parameter("term_weights", inspect.Parameter.KEYWORD_ONLY, default=DEFAULT_WEIGHTS)
    return base.replace(parameters=[*params, extra])


VDMaskablePPO.__init__.__signature__ = _signature()  # type: ignore[attr-defined]
