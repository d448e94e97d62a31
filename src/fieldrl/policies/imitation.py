"""Warm-start a learned policy by imitating one of the scenario's heuristics (behaviour cloning).

Why: on crowded rail networks (50-80 trains) PPO from scratch at fieldrl's budgets learns to
stop trains rather than to avoid deadlocks; practitioners of such problems (the Flatland
challenge's top RL entries, for one) start from demonstrations of a good planner and let RL
improve on them. SB3 has no behaviour cloning (the ``imitation`` package does, but only through
its own rollout and policy wrappers, and it does not know action masks or fieldrl's agent slots),
so this module is fieldrl's own, kept small:

1. :func:`collect` runs the heuristic on the domain's evaluation envs (seeds from the training
   stream, never the held-out ones) and keeps, for every decision with more than one allowed
   action, the observation, the action mask, the heuristic's action and the discounted return the
   deciding agent went on to collect;
2. :func:`clone` fits the model's actor to those actions (cross-entropy under the mask) and its
   critic to those returns (so PPO's first advantages are not noise that undoes the cloning).

Only discrete-action actor-critic algorithms (PPO, MaskablePPO) can be warm-started.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from stable_baselines3.common.vec_env import VecNormalize

#: algorithms whose policy exposes a categorical ``get_distribution`` and ``predict_values``
IMITABLE = ("ppo", "maskable-ppo")


@dataclass
class Demonstrations:
    """Decisions of a heuristic: raw observations, masks, actions and returns-to-go."""

    obs: np.ndarray
    masks: np.ndarray
    actions: np.ndarray
    returns: np.ndarray
    #: every row the training env would have shown the model (to warm up obs normalisation)
    all_obs: np.ndarray
    episodes: int

    def __len__(self) -> int:
        return len(self.actions)

    def sample(self, limit: int, seed: int) -> Demonstrations:
        """At most ``limit`` decisions, drawn uniformly without replacement."""
        if len(self) <= limit:
            return self
        keep = np.sort(np.random.default_rng(seed).choice(len(self), size=limit, replace=False))
        return Demonstrations(
            self.obs[keep],
            self.masks[keep],
            self.actions[keep],
            self.returns[keep],
            self.all_obs,
            self.episodes,
        )


def collect(envs: Any, policy: Any, gamma: float) -> Demonstrations:
    """Run ``policy`` on lockstep multi-agent ``envs`` (one episode each) and record its decisions.

    ``envs`` is a :class:`~fieldrl.domains.multiagent.ParallelLockstepEnvs` (it exposes
    ``slot_agents``, ``action_masks`` and the per-agent rewards of the last step).
    """
    n = envs.n
    policy.bind_envs(envs)
    policy.reset(n)
    obs = envs.reset()
    done = np.zeros(n, dtype=bool)
    start = np.ones(n, dtype=bool)
    rows: list[tuple[np.ndarray, np.ndarray, int]] = []
    owner: list[tuple[int, str, int]] = []  # (episode, agent, step index in that agent's reward list)
    rewards: dict[tuple[int, str], list[float]] = {}
    seen: list[np.ndarray] = []
    while not done.all():
        masks = envs.action_masks()
        actions = np.asarray(policy.act(obs, start))
        start[:] = False
        seen.append(obs[~done].reshape(-1, *obs.shape[2:]))
        for e in np.flatnonzero(~done):
            for s, agent in enumerate(envs.slot_agents(e)):
                if agent is None or agent not in envs.envs[e].agents:
                    continue
                mask, action = masks[e, s], int(actions[e, s])
                if mask.sum() > 1 and mask[action]:
                    rows.append((obs[e, s].copy(), mask.copy(), action))
                    owner.append((e, agent, len(rewards.get((e, agent), []))))
        live = {e: list(envs.envs[e].agents) for e in np.flatnonzero(~done)}
        obs, _, term, trunc, _ = envs.step(actions)
        for e, agents in live.items():
            last = envs.last_rewards[e]
            for agent in agents:
                rewards.setdefault((e, agent), []).append(float(last.get(agent, 0.0)))
        done |= np.asarray(term) | np.asarray(trunc)
    to_go = {key: _returns_to_go(r, gamma) for key, r in rewards.items()}
    returns = np.array([to_go[(e, a)][k] for e, a, k in owner], dtype=np.float32)
    if not rows:
        raise ValueError("the heuristic made no decision with more than one allowed action")
    obs_rows, mask_rows, action_rows = zip(*rows, strict=True)
    return Demonstrations(
        obs=np.stack(obs_rows),
        masks=np.stack(mask_rows),
        actions=np.asarray(action_rows, dtype=np.int64),
        returns=returns,
        all_obs=np.concatenate(seen),
        episodes=n,
    )


def _returns_to_go(rewards: Sequence[float], gamma: float) -> np.ndarray:
    out = np.zeros(len(rewards))
    acc = 0.0
    for t in range(len(rewards) - 1, -1, -1):
        acc = rewards[t] + gamma * acc
        out[t] = acc
    return out


def clone(
    model: Any,
    venv: Any,
    demos: Demonstrations,
    epochs: int,
    batch_size: int = 256,
    learning_rate: float = 1e-3,
    seed: int = 0,
) -> dict[str, float]:
    """Fit ``model``'s actor to the demonstrated actions and its critic to their returns.

    Observation normalisation statistics of ``venv`` (a ``VecNormalize``, if any) are first
    updated with everything the demonstrations saw, so the cloned network meets the same inputs
    when PPO training starts. Returns the held-in action accuracy and final losses.
    """
    obs = demos.obs.astype(np.float32)
    if isinstance(venv, VecNormalize) and venv.norm_obs:
        venv.obs_rms.update(demos.all_obs)
        obs = venv.normalize_obs(obs).astype(np.float32)
    policy = model.policy
    policy.set_training_mode(True)
    masked = "action_masks" in inspect.signature(policy.get_distribution).parameters

    def distribution(batch: torch.Tensor, masks: np.ndarray) -> Any:
        return (
            policy.get_distribution(batch, action_masks=masks) if masked else policy.get_distribution(batch)
        )

    optimizer = torch.optim.Adam(policy.parameters(), lr=learning_rate)
    gen = torch.Generator().manual_seed(seed)
    obs_t = torch.as_tensor(obs)
    act_t = torch.as_tensor(demos.actions)
    ret_t = torch.as_tensor(demos.returns)
    mask_np = demos.masks
    n = len(demos)
    policy_loss = value_loss = float("nan")
    for _ in range(epochs):
        order = torch.randperm(n, generator=gen)
        for lo in range(0, n, batch_size):
            idx = order[lo : lo + batch_size]
            batch_obs = obs_t[idx]
            dist = distribution(batch_obs, mask_np[idx.numpy()])
            p_loss = -dist.log_prob(act_t[idx]).mean()
            v_loss = torch.nn.functional.mse_loss(policy.predict_values(batch_obs).flatten(), ret_t[idx])
            loss = p_loss + 0.5 * v_loss
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(policy.parameters(), 0.5)
            optimizer.step()
            policy_loss, value_loss = float(p_loss.detach()), float(v_loss.detach())
    policy.set_training_mode(False)
    with torch.no_grad():
        dist = distribution(obs_t, mask_np)
        chosen = dist.distribution.probs.argmax(dim=1)
    accuracy = float((chosen == act_t).float().mean())
    return {
        "decisions": float(n),
        "accuracy": accuracy,
        "policy_loss": policy_loss,
        "value_loss": value_loss,
    }
