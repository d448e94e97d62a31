"""Warm-start a learned policy by imitating one of the scenario's heuristics (behaviour cloning).

Why: a practitioner's rule is usually a far better starting point than a random network. On
crowded rail networks (50-80 trains) PPO from scratch at fieldrl's budgets learns to stop trains
rather than to avoid deadlocks; on chemotherapy dosing an off-policy learner spends most of its
budget rediscovering what the tumour-feedback rule already does. Practitioners of such problems
(the Flatland challenge's top RL entries, for one) start from demonstrations of a good controller
and let RL improve on them. SB3 has no behaviour cloning (the ``imitation`` package does, but only
through its own rollout and policy wrappers, and it does not know action masks, fieldrl's agent
slots or its batched evaluation envs), so this module is fieldrl's own, kept small:

1. :func:`collect` runs the heuristic on the domain's evaluation envs (seeds from the training
   stream, never the held-out ones) and keeps, for every decision, the observation, the action
   mask (all True where the domain has none), the heuristic's action and the discounted return
   the deciding agent went on to collect. Single-agent envs (fieldrl's ``EvalEnvs``) also keep
   the transitions (next observation, reward, end flags), so off-policy learners can start with
   them in their replay buffer. Multi-agent lockstep envs keep only decisions with more than one
   allowed action (a forced move teaches nothing).
2. :func:`clone` fits the model's actor to those actions and its critic to those returns, so the
   first RL updates do not start from a critic whose noise undoes the cloning:

   - on-policy actor-critics (PPO, A2C, TRPO, MaskablePPO; discrete, multi-discrete or Box
     actions): maximise the log-probability of the demonstrated action under the policy's own
     distribution; regress ``V(s)`` to the returns-to-go;
   - off-policy actor-critics (SAC, TQC, TD3, DDPG; Box actions): regress the deterministic actor
     output (in SB3's ``[-1, 1]`` action units) to ``policy.scale_action(action)``, every Q head to
     the Monte-Carlo return-to-go of the demonstrated action, then copy both into the target
     networks so the first TD targets agree with what was learned.

Observation (and reward) normalisation statistics of a ``VecNormalize`` in the training env are
updated with the demonstrations first, so the cloned networks meet, when RL starts, the same
inputs and return scale they were fitted on.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from stable_baselines3.common.vec_env import VecNormalize, unwrap_vec_normalize

from fieldrl.policies.algorithms import (
    CLONE_FAMILIES,
    IMITABLE,  # noqa: F401  (importable from here too)
    TABLE,
)
from fieldrl.policies.registry import algorithm_class


@functools.cache
def _clone_families() -> dict[type, str]:
    """Algorithm class -> how it is cloned (the algorithm table's ``clone``), families in
    :data:`~fieldrl.policies.algorithms.CLONE_FAMILIES` order. Exact classes only (a subclass, e.g. a
    multi-head-critic variant, may change what ``predict_values`` or the actor mean). Independent PPO
    qualifies: its per-agent networks sit behind the standard ``get_distribution``/``predict_values``,
    so each agent's network is fitted to that agent's demonstrated decisions."""
    return {algorithm_class(a.name): family for family in CLONE_FAMILIES for a in TABLE if a.clone == family}


@dataclass
class Demonstrations:
    """Decisions of a heuristic: raw observations, masks, actions and returns-to-go.

    Per-decision arrays (``obs``, ``masks``, ``actions``, ``returns`` and, for single-agent
    demonstrations, the transition arrays ``next_obs``, ``rewards``, ``terminated``,
    ``truncated``) share their first axis. ``all_obs`` and ``running_returns`` cover every step
    the training env would have shown the model, decisions or not.
    """

    obs: np.ndarray
    masks: np.ndarray
    actions: np.ndarray
    returns: np.ndarray
    #: every row the training env would have shown the model (to warm up obs normalisation)
    all_obs: np.ndarray
    episodes: int
    #: observation after each decision (single-agent only; for the replay buffer)
    next_obs: np.ndarray | None = None
    #: reward of each decision (single-agent only)
    rewards: np.ndarray | None = None
    #: the episode ended at this decision by reaching a terminal state (single-agent only)
    terminated: np.ndarray | None = None
    #: the episode was cut at this decision by a time limit (single-agent only)
    truncated: np.ndarray | None = None
    #: ``sum_k<=t gamma^(t-k) r_k`` at every step of every episode (or agent): what a
    #: ``VecNormalize`` with ``norm_reward`` tracks to scale rewards
    running_returns: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.actions)

    @property
    def has_transitions(self) -> bool:
        """True when next observations, rewards and end flags were recorded (replay buffers need them)."""
        return self.next_obs is not None

    def sample(self, limit: int, seed: int) -> Demonstrations:
        """At most ``limit`` decisions, drawn uniformly without replacement."""
        if len(self) <= limit:
            return self
        keep = np.sort(np.random.default_rng(seed).choice(len(self), size=limit, replace=False))

        def pick(a: np.ndarray | None) -> np.ndarray | None:
            return None if a is None else a[keep]

        return replace(
            self,
            obs=self.obs[keep],
            masks=self.masks[keep],
            actions=self.actions[keep],
            returns=self.returns[keep],
            next_obs=pick(self.next_obs),
            rewards=pick(self.rewards),
            terminated=pick(self.terminated),
            truncated=pick(self.truncated),
        )

    @staticmethod
    def concatenate(parts: Sequence[Demonstrations]) -> Demonstrations:
        """One set of demonstrations from several collected apart (batches of episodes)."""
        if len(parts) == 1:
            return parts[0]

        def cat(name: str) -> np.ndarray | None:
            arrays = [getattr(p, name) for p in parts]
            return None if any(a is None for a in arrays) else np.concatenate(arrays)

        names = ("obs", "masks", "actions", "returns", "all_obs")
        optional = ("next_obs", "rewards", "terminated", "truncated", "running_returns")
        return Demonstrations(
            **{n: cat(n) for n in names},  # type: ignore[arg-type]
            episodes=sum(p.episodes for p in parts),
            **{n: cat(n) for n in optional},
        )


def collect(envs: Any, policy: Any, gamma: float) -> Demonstrations:
    """Run ``policy`` on evaluation ``envs`` (one episode each) and record all its decisions.

    ``envs`` is either a multi-agent :class:`~fieldrl.domains.multiagent.ParallelLockstepEnvs`
    (it exposes ``slot_agents``, ``action_masks`` and the per-agent rewards of the last step) or
    any single-agent ``EvalEnvs`` (:class:`~fieldrl.domains.base.LockstepEnvs`, a domain's batched
    evaluation envs): ``reset() -> obs (n, ...)``, ``step(actions) -> obs, reward (n,),
    terminated, truncated, info``, no autoreset. Observations reach the policy exactly as the
    envs return them (e.g. the wealth domain's ``ProblemObs``) and are stored as plain arrays.

    :param envs: the evaluation envs, freshly built (they are reset here).
    :param policy: a fieldrl ``Policy``; ``bind_envs(envs)`` is called after ``reset``.
    :param gamma: discount of the returns-to-go (use the learner's ``gamma``).
    """
    if hasattr(envs, "slot_agents") and hasattr(envs, "last_rewards"):
        return _collect_multiagent(envs, policy, gamma)
    return _collect_single(envs, policy, gamma)


def _bind(policy: Any, envs: Any) -> None:
    policy.bind_envs(envs)


def _collect_single(envs: Any, policy: Any, gamma: float) -> Demonstrations:
    n = int(envs.n)
    obs = envs.reset()  # the evaluation runner's order: reset envs, reset policy, bind
    policy.reset(n)
    _bind(policy, envs)
    active = np.ones(n, dtype=bool)
    start = np.ones(n, dtype=bool)
    steps: list[dict[str, np.ndarray]] = []
    while active.any():
        actions = np.asarray(policy.act(obs, start))
        masks = np.asarray(envs.action_masks(), dtype=bool) if hasattr(envs, "action_masks") else None
        next_obs, reward, term, trunc, _ = envs.step(actions)
        term, trunc = np.asarray(term, dtype=bool), np.asarray(trunc, dtype=bool)
        rows = np.flatnonzero(active)
        steps.append(
            {
                "env": rows,
                "obs": np.array(np.asarray(obs)[rows]),
                "next_obs": np.array(np.asarray(next_obs)[rows]),
                "action": np.array(actions[rows]),
                "reward": np.asarray(reward, dtype=np.float64)[rows],
                "terminated": term[rows],
                "truncated": trunc[rows] & ~term[rows],
                "mask": masks[rows] if masks is not None else np.ones((len(rows), 0), dtype=bool),
            }
        )
        active &= ~(term | trunc)
        start[:] = False
        obs = next_obs
    cat = {k: np.concatenate([s[k] for s in steps]) for k in steps[0]}
    env_of = cat["env"]
    order = np.argsort(env_of, kind="stable")  # episode by episode, in time order within each
    rewards = cat["reward"][order]
    returns = np.empty(len(order))
    running = np.empty(len(order))
    bounds = np.flatnonzero(np.diff(env_of[order])) + 1
    for lo, hi in zip(np.r_[0, bounds], np.r_[bounds, len(order)], strict=True):
        returns[lo:hi] = _returns_to_go(rewards[lo:hi], gamma)
        running[lo:hi] = _running_returns(rewards[lo:hi], gamma)
    masks = cat["mask"]
    if masks.shape[1] == 0:
        masks = np.ones((len(masks), _mask_width(getattr(envs, "action_space", None))), dtype=bool)
    actions = cat["action"]
    actions = actions.astype(np.int64) if np.issubdtype(actions.dtype, np.integer) else actions
    return Demonstrations(
        obs=cat["obs"][order],
        masks=masks[order],
        actions=actions[order],
        returns=returns.astype(np.float32),
        all_obs=cat["obs"],
        episodes=n,
        next_obs=cat["next_obs"][order],
        rewards=rewards.astype(np.float32),
        terminated=cat["terminated"][order],
        truncated=cat["truncated"][order],
        running_returns=running.astype(np.float32),
    )


def _mask_width(space: Any) -> int:
    """Width of an SB3 action mask for ``space`` (1 where there is no mask to speak of)."""
    if isinstance(space, spaces.Discrete):
        return int(space.n)
    if isinstance(space, spaces.MultiDiscrete):
        return int(np.sum(space.nvec))
    if isinstance(space, spaces.MultiBinary):
        return 2 * int(np.prod(space.shape))
    return 1


def _collect_multiagent(envs: Any, policy: Any, gamma: float) -> Demonstrations:
    n = envs.n
    obs = envs.reset()  # the evaluation runner's order: a policy may read the reset simulators (traffic)
    policy.reset(n)
    _bind(policy, envs)
    done = np.zeros(n, dtype=bool)
    start = np.ones(n, dtype=bool)
    rows: list[tuple[np.ndarray, np.ndarray, int]] = []
    owner: list[tuple[int, str, int]] = []  # (episode, agent, step index in that agent's reward list)
    rewards: dict[tuple[int, str], list[float]] = {}
    seen: list[np.ndarray] = []
    width = _mask_width(envs.action_space)
    # a controller whose actions the simulator ignores (a SUMO signal program) demonstrates what it
    # did instead: after each step, the action that step realised; a row waits for its action
    # while the realised one is unknown (-1: the signal is changing to the stage it will show)
    readback = getattr(policy, "realised_actions", None)
    waiting: dict[tuple[int, int], list[int]] = {}  # (episode, slot) -> rows awaiting their action
    while not done.all():
        masks = envs.action_masks()
        if masks.shape[-1] != width:  # an env without masks: every action is allowed (UAV)
            masks = np.ones((*masks.shape[:-1], width), dtype=bool)
        actions = np.asarray(policy.act(obs, start))
        start[:] = False
        seen.append(obs[~done].reshape(-1, *obs.shape[2:]))
        for e in np.flatnonzero(~done):
            for s, agent in enumerate(envs.slot_agents(e)):
                if agent is None or agent not in envs.envs[e].agents:
                    continue
                mask, action = masks[e, s], int(actions[e, s])
                if readback is not None:
                    waiting.setdefault((int(e), s), []).append(len(rows))
                elif not (mask.sum() > 1 and mask[action]):
                    continue
                rows.append((obs[e, s].copy(), mask.copy(), action))
                owner.append((e, agent, len(rewards.get((e, agent), []))))
        live = {e: list(envs.envs[e].agents) for e in np.flatnonzero(~done)}
        obs, _, term, trunc, _ = envs.step(actions)
        for e, agents in live.items():
            last = envs.last_rewards[e]
            for agent in agents:
                rewards.setdefault((e, agent), []).append(float(last.get(agent, 0.0)))
        if readback is not None:
            _resolve(rows, waiting, np.asarray(readback()), list(live))
        done |= np.asarray(term) | np.asarray(trunc)
    if readback is not None:  # rows still waiting at the end of an episode have no known action
        unresolved = {r for pending in waiting.values() for r in pending}
        kept = [k for k in range(len(rows)) if k not in unresolved]
        rows, owner = [rows[k] for k in kept], [owner[k] for k in kept]
    to_go = {key: _returns_to_go(r, gamma) for key, r in rewards.items()}
    returns = np.array([to_go[(e, a)][k] for e, a, k in owner], dtype=np.float32)
    if not rows:
        raise ValueError("the heuristic made no decision with more than one allowed action")
    obs_rows, mask_rows, action_rows = zip(*rows, strict=True)
    running = [_running_returns(r, gamma) for r in rewards.values()]
    return Demonstrations(
        obs=np.stack(obs_rows),
        masks=np.stack(mask_rows),
        actions=np.asarray(action_rows, dtype=np.int64),
        returns=returns,
        all_obs=np.concatenate(seen),
        episodes=n,
        running_returns=np.concatenate(running).astype(np.float32) if running else None,
    )


def _resolve(
    rows: list[tuple[np.ndarray, np.ndarray, int]],
    waiting: dict[tuple[int, int], list[int]],
    realised: np.ndarray,
    episodes: list[int],
) -> None:
    """Give the rows waiting in ``episodes`` the action the last step realised, where it is known."""
    for (e, s), pending in waiting.items():
        if e in episodes and pending and realised[e, s] >= 0:
            for r in pending:
                rows[r] = (rows[r][0], rows[r][1], int(realised[e, s]))
            pending.clear()


def _returns_to_go(rewards: Sequence[float], gamma: float) -> np.ndarray:
    out = np.zeros(len(rewards))
    acc = 0.0
    for t in range(len(rewards) - 1, -1, -1):
        acc = rewards[t] + gamma * acc
        out[t] = acc
    return out


def _running_returns(rewards: Sequence[float], gamma: float) -> np.ndarray:
    """What ``VecNormalize`` accumulates for reward scaling: ``R_t = gamma R_{t-1} + r_t``."""
    out = np.zeros(len(rewards))
    acc = 0.0
    for t, r in enumerate(rewards):
        acc = gamma * acc + r
        out[t] = acc
    return out


# ----------------------------------------------------------------------------- cloning


def clone(
    model: Any,
    venv: Any,
    demos: Demonstrations,
    epochs: int,
    batch_size: int = 256,
    learning_rate: float = 1e-3,
    seed: int = 0,
    replay_buffer: bool = True,
    fit_log_std: bool = False,
) -> dict[str, float]:
    """Fit ``model``'s actor to the demonstrated actions and its critic(s) to their returns.

    A ``VecNormalize`` anywhere in ``venv`` first has its observation statistics updated with
    everything the demonstrations saw and, with ``norm_reward``, its return statistics with the
    demonstrations' running returns; the critic targets are then scaled as the learner will see
    rewards. So the cloned network meets the same inputs and return scale when RL starts.

    :param model: a freshly built PPO, A2C, TRPO, MaskablePPO (any action space they support),
        or SAC, TQC, TD3, DDPG (Box actions).
    :param venv: the model's training env (possibly wrapped in ``VecNormalize``).
    :param demos: from :func:`collect` (actions in the env's own units).
    :param epochs: passes over the demonstrations.
    :param batch_size: decisions per gradient step.
    :param learning_rate: Adam step size (a fresh optimiser; the model's own is left untouched).
    :param seed: shuffling seed.
    :param replay_buffer: for off-policy models, also add the demonstrations' transitions to the
        model's replay buffer (when they were recorded), so the first updates still see the
        heuristic's actions and the critic is not fitted to exploration alone.
    :param fit_log_std: for on-policy Box actions, also fit the state-independent log standard
        deviation. Off by default: maximum likelihood shrinks it to the (small) cloning error, which
        leaves RL too little exploration to improve on the heuristic.
    :return: ``decisions``; ``accuracy`` (discrete: share of decisions whose every action
        component the deterministic policy reproduces) or ``action_error`` (Box: mean absolute
        difference, env units); the last batch's losses; ``replay_transitions`` added.
    :raises ValueError: for an algorithm or action space that cannot be cloned.
    """
    if epochs < 1:
        raise ValueError(f"epochs must be >= 1, got {epochs}")
    if len(demos) == 0:
        raise ValueError("no demonstrations to clone")
    kind = _kind(model)
    obs = demos.obs.astype(np.float32)
    returns = demos.returns.astype(np.float32)
    norm = unwrap_vec_normalize(venv) if venv is not None else None
    if isinstance(norm, VecNormalize):
        if norm.norm_obs:
            norm.obs_rms.update(demos.all_obs)
            obs = norm.normalize_obs(obs).astype(np.float32)
        if norm.norm_reward:
            if demos.running_returns is not None and len(demos.running_returns):
                norm.ret_rms.update(demos.running_returns.astype(np.float64))
            returns = (returns / np.sqrt(norm.ret_rms.var + norm.epsilon)).astype(np.float32)
    gen = torch.Generator().manual_seed(seed)
    if kind == "on-policy":
        stats = _clone_on_policy(
            model, demos, obs, returns, epochs, batch_size, learning_rate, gen, fit_log_std
        )
    else:
        stats = _clone_off_policy(model, kind, demos, obs, returns, epochs, batch_size, learning_rate, gen)
        added = add_to_replay_buffer(model, demos) if replay_buffer and demos.has_transitions else 0
        stats["replay_transitions"] = float(added)
    return {"decisions": float(len(demos)), **stats}


def _kind(model: Any) -> str:
    """``on-policy``, ``squashed`` (SAC, TQC) or ``deterministic`` (TD3, DDPG); ValueError otherwise."""
    cls = type(model)
    name = cls.__name__
    families = _clone_families()
    family = families.get(cls)
    if family == "on-policy":
        return family
    if family is not None:
        if not isinstance(model.action_space, spaces.Box):
            raise ValueError(
                f"behaviour cloning of {name} needs a Box action space, got {model.action_space}"
            )
        return family
    supported = ", ".join(c.__name__ for c in families)
    raise ValueError(
        f"cannot behaviour-clone {name}: it has no actor whose action distribution or deterministic "
        f"output can be fitted to demonstrated actions here (value-based and recurrent policies are not "
        f"supported); supported: {supported}"
    )


def _batches(n: int, batch_size: int, epochs: int, gen: torch.Generator) -> Iterator[torch.Tensor]:
    for _ in range(epochs):
        order = torch.randperm(n, generator=gen)
        for lo in range(0, n, batch_size):
            yield order[lo : lo + batch_size]


def _demo_actions(space: spaces.Space, actions: np.ndarray) -> np.ndarray:
    """Actions shaped as the policy's distribution takes them (Box actions clipped to the bounds)."""
    if isinstance(space, spaces.Discrete):
        return np.asarray(actions, dtype=np.int64).reshape(len(actions))
    if isinstance(space, spaces.MultiDiscrete | spaces.MultiBinary):
        return np.asarray(actions, dtype=np.int64).reshape(len(actions), -1)
    if isinstance(space, spaces.Box):  # the env executes the clipped action: that is what was demonstrated
        box = np.asarray(actions, dtype=np.float32).reshape(len(actions), *space.shape)
        return np.clip(box, space.low, space.high)
    raise ValueError(f"behaviour cloning does not support action space {space}")


def _model_masks(space: spaces.Space, masks: np.ndarray) -> np.ndarray:
    """``masks`` widened to the model's mask width where the demonstrations had none (all True)."""
    width = _mask_width(space)
    masks = np.asarray(masks, dtype=bool).reshape(len(masks), -1)
    if masks.shape[1] == width:
        return masks
    if masks.all():
        return np.ones((len(masks), width), dtype=bool)
    raise ValueError(f"action masks of width {masks.shape[1]} do not fit {space} (width {width})")


def _split_clip(groups: Sequence[list[torch.nn.Parameter]], max_norm: float) -> None:
    for params in groups:
        if params:
            torch.nn.utils.clip_grad_norm_(params, max_norm)


def _clone_on_policy(
    model: Any,
    demos: Demonstrations,
    obs: np.ndarray,
    returns: np.ndarray,
    epochs: int,
    batch_size: int,
    learning_rate: float,
    gen: torch.Generator,
    fit_log_std: bool,
) -> dict[str, float]:
    policy = model.policy
    space = model.action_space
    device = policy.device
    masked = "action_masks" in inspect.signature(policy.get_distribution).parameters
    box = isinstance(space, spaces.Box)
    actions = _demo_actions(space, demos.actions)
    fit_actions = actions
    if box and policy.squash_output:  # a tanh-squashed distribution lives in [-1, 1]
        fit_actions = np.clip(policy.scale_action(actions), -1 + 1e-6, 1 - 1e-6).astype(np.float32)
    masks = _model_masks(space, demos.masks) if masked else None

    def distribution(batch: torch.Tensor, idx: np.ndarray | None) -> Any:
        if masks is None:
            return policy.get_distribution(batch)
        return policy.get_distribution(batch, action_masks=masks if idx is None else masks[idx])

    # actor and critic are clipped apart: an unnormalised return scale must not drown the actor's gradient
    critic_names = ("value_net.", "mlp_extractor.value_net.")
    named = list(policy.named_parameters())
    critic = [p for k, p in named if k.startswith(critic_names)]
    actor = [p for k, p in named if not k.startswith(critic_names) and (fit_log_std or k != "log_std")]
    optimizer = torch.optim.Adam(actor + critic, lr=learning_rate)
    obs_t = torch.as_tensor(obs, device=device)
    act_t = torch.as_tensor(fit_actions, device=device)
    ret_t = torch.as_tensor(returns, device=device)
    policy.set_training_mode(True)
    p_loss = v_loss = torch.tensor(float("nan"))
    for idx in _batches(len(obs), batch_size, epochs, gen):
        batch_obs = obs_t[idx]
        dist = distribution(batch_obs, idx.numpy())
        p_loss = -dist.log_prob(act_t[idx]).mean()
        v_loss = torch.nn.functional.mse_loss(policy.predict_values(batch_obs).flatten(), ret_t[idx])
        optimizer.zero_grad()
        (p_loss + 0.5 * v_loss).backward()
        _split_clip([actor, critic], 0.5)
        optimizer.step()
    policy.set_training_mode(False)
    with torch.no_grad():
        chosen = distribution(obs_t, None).mode().cpu().numpy()
    stats = {"policy_loss": float(p_loss.detach()), "value_loss": float(v_loss.detach())}
    if box:
        if policy.squash_output:
            chosen = policy.unscale_action(chosen)
        chosen = np.clip(chosen, space.low, space.high)
        stats["action_error"] = float(np.abs(chosen - actions).mean())
    else:
        same = chosen.reshape(len(actions), -1) == actions.reshape(len(actions), -1)
        stats["accuracy"] = float(same.all(axis=1).mean())
    return stats


def _actor_output(policy: Any, kind: str, obs: torch.Tensor) -> torch.Tensor:
    """The deterministic action in ``[-1, 1]``: TD3/DDPG ``actor(obs)``, SAC/TQC ``tanh(mean)``."""
    if kind == "deterministic":
        return policy.actor(obs)
    mean, _, _ = policy.actor.get_action_dist_params(obs)
    return torch.tanh(mean)


def _q_values(policy: Any, obs: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
    """Every Q head's estimate, flattened to ``(batch, heads)`` (TQC: every quantile of every critic)."""
    q = policy.critic(obs, actions)
    if isinstance(q, tuple | list):
        q = torch.cat([head.reshape(len(obs), -1) for head in q], dim=1)
    return q.reshape(len(obs), -1)


def _clone_off_policy(
    model: Any,
    kind: str,
    demos: Demonstrations,
    obs: np.ndarray,
    returns: np.ndarray,
    epochs: int,
    batch_size: int,
    learning_rate: float,
    gen: torch.Generator,
) -> dict[str, float]:
    policy = model.policy
    space = model.action_space
    device = policy.device
    actions = _demo_actions(space, demos.actions)
    scaled = np.clip(policy.scale_action(actions), -1.0, 1.0).astype(np.float32)
    obs_t = torch.as_tensor(obs, device=device)
    act_t = torch.as_tensor(scaled, device=device)
    ret_t = torch.as_tensor(returns, device=device)[:, None]
    actor_params = list(policy.actor.parameters())
    critic_params = list(policy.critic.parameters())
    actor_opt = torch.optim.Adam(actor_params, lr=learning_rate)
    critic_opt = torch.optim.Adam(critic_params, lr=learning_rate)
    policy.set_training_mode(True)
    a_loss = c_loss = torch.tensor(float("nan"))
    for idx in _batches(len(obs), batch_size, epochs, gen):
        batch_obs = obs_t[idx]
        a_loss = torch.nn.functional.mse_loss(_actor_output(policy, kind, batch_obs), act_t[idx])
        actor_opt.zero_grad()
        a_loss.backward()
        torch.nn.utils.clip_grad_norm_(actor_params, 0.5)
        actor_opt.step()
        q = _q_values(policy, batch_obs, act_t[idx])
        c_loss = torch.nn.functional.mse_loss(q, ret_t[idx].expand_as(q))
        critic_opt.zero_grad()
        c_loss.backward()
        torch.nn.utils.clip_grad_norm_(critic_params, 0.5)
        critic_opt.step()
    policy.set_training_mode(False)
    policy.critic_target.load_state_dict(policy.critic.state_dict())
    if hasattr(policy, "actor_target"):
        policy.actor_target.load_state_dict(policy.actor.state_dict())
    with torch.no_grad():
        chosen = policy.unscale_action(_actor_output(policy, kind, obs_t).cpu().numpy())
    return {
        "action_error": float(np.abs(np.clip(chosen, space.low, space.high) - actions).mean()),
        "actor_loss": float(a_loss.detach()),
        "critic_loss": float(c_loss.detach()),
    }


def add_to_replay_buffer(model: Any, demos: Demonstrations) -> int:
    """Put the demonstrations' transitions into ``model.replay_buffer``; return how many were added.

    Why: right after cloning, an off-policy learner's buffer holds only its own exploratory
    transitions, and TD updates on them alone drift the critic (and then the actor) away from the
    demonstrated behaviour. With the heuristic's transitions in the buffer, early updates stay
    anchored to what the heuristic achieved.

    Stored as SB3 stores its own: raw observations and rewards (a ``VecNormalize`` normalises them
    when sampling), actions scaled to ``[-1, 1]``, time-limit cuts flagged as such. Rows are added
    ``n_envs`` at a time, so up to ``n_envs - 1`` trailing transitions are left out. Buffers that
    store each next observation as the following row (``optimize_memory_usage``) would need whole
    trajectories per env column: nothing is added to them (returns 0).

    :raises ValueError: when ``demos`` holds no transitions (multi-agent demonstrations).
    """
    if not demos.has_transitions:
        raise ValueError("these demonstrations hold no transitions (next observation, reward, end flags)")
    assert demos.next_obs is not None and demos.rewards is not None
    assert demos.terminated is not None and demos.truncated is not None
    buffer = getattr(model, "replay_buffer", None)
    if buffer is None or getattr(buffer, "optimize_memory_usage", False):
        return 0
    space = model.action_space
    actions = _demo_actions(space, demos.actions)
    if isinstance(space, spaces.Box):
        actions = np.clip(model.policy.scale_action(actions), -1.0, 1.0).astype(np.float32)
    k = buffer.n_envs
    usable = len(demos) - len(demos) % k
    for lo in range(0, usable, k):
        rows = slice(lo, lo + k)
        term, trunc = demos.terminated[rows], demos.truncated[rows]
        buffer.add(
            demos.obs[rows],
            demos.next_obs[rows],
            actions[rows],
            demos.rewards[rows],
            term | trunc,
            [{"TimeLimit.truncated": bool(t and not d)} for t, d in zip(trunc, term, strict=True)],
        )
    return usable
