"""Can a learned entry learn at all within the steps it is given?

Stable-Baselines3 does not refuse a budget that cannot train: an off-policy learner whose
``learning_starts`` is at or beyond ``train_steps`` never makes a gradient update, and an
on-policy learner whose first rollout (``n_steps`` x parallel envs) is longer than
``train_steps`` trains on more steps than the budget says (SB3 always finishes a rollout).
Both would then be ranked as "learned policies" in a report. fieldrl refuses them when the
scenario is validated, for the full budget and for every budget the scenario defines, and with
them a rollout or replay buffer that could not fit in memory even with the smallest observation
(one number; building the env, as ``--build`` and ``run`` do, then judges the real sizes).
"""

from __future__ import annotations

import math
from typing import Any

from fieldrl.policies import memory_guard
from fieldrl.policies.algorithms import in_search_space
from fieldrl.policies.registry import build_kwargs
from fieldrl.policies.signatures import SIGNATURES

#: (hyperparameter or None, its value, the problem in words)
Problem = tuple[str | None, Any, str]


def _without_noise(hyperparameters: dict[str, Any]) -> dict[str, Any]:
    """The hyperparameters these checks read (action noise objects would need SB3 to build)."""
    return {k: v for k, v in hyperparameters.items() if k not in ("action_noise", "policy_kwargs")}


def _train_freq_steps(train_freq: Any) -> int | None:
    """``train_freq`` in vector steps, or None when it counts episodes (cannot be judged here)."""
    if isinstance(train_freq, int):
        return train_freq
    if isinstance(train_freq, tuple | list) and len(train_freq) == 2 and train_freq[1] == "step":
        return int(train_freq[0])
    return None


def training_problem(
    algorithm: str, hyperparameters: dict[str, Any], n_envs: int, width: int, train_steps: int
) -> Problem | None:
    """Why this entry cannot learn within ``train_steps``, or None.

    :param algorithm: registry name.
    :param hyperparameters: the entry's hyperparameters (YAML form).
    :param n_envs: the entry's parallel environments.
    :param width: SB3 envs per environment (agent slots in multi-agent domains; 1 otherwise), so
        a vector step is ``n_envs * width`` environment steps as SB3 counts them.
    :param train_steps: the training budget in those steps.
    """
    signature = SIGNATURES[algorithm]
    kwargs = {**signature.defaults, **build_kwargs(_without_noise(hyperparameters), None, algorithm)}
    vec = n_envs * width
    problem = _memory_problem(signature.kind, kwargs, vec)
    if problem:
        return problem
    if signature.kind == "on":
        rollout = int(kwargs.get("n_steps", 0)) * vec
        if rollout > train_steps:
            fits = max(1, train_steps // vec)
            return (
                "n_steps",
                kwargs.get("n_steps"),
                f"one rollout is n_steps x {vec} parallel envs = {rollout:,} steps, more than train_steps "
                f"{train_steps:,}: SB3 would train on {rollout:,} steps, not the budget stated; allowed: "
                f"n_steps <= {fits} at this budget (or more train_steps, or fewer n_envs)",
            )
        return None
    if signature.kind == "off" or "learning_starts" in kwargs:
        starts = int(kwargs.get("learning_starts", 0))
        if starts >= train_steps:
            return (
                "learning_starts",
                starts,
                f"at or beyond train_steps {train_steps:,}: the model would never make a gradient "
                f"update; allowed: learning_starts < {train_steps:,} at this budget",
            )
        if kwargs.get("gradient_steps") == 0:
            return "gradient_steps", 0, "0 means no gradient update ever; allowed: >= 1, or -1 (one per step)"
        freq = _train_freq_steps(kwargs.get("train_freq", 1))
        if freq is not None:
            chunk = freq * vec
            if math.ceil(train_steps / chunk) * chunk <= starts:
                return (
                    "train_freq",
                    kwargs.get("train_freq"),
                    f"with {vec} parallel envs the first update would come after train_steps "
                    f"{train_steps:,}; allowed: a smaller train_freq or learning_starts",
                )
        target = kwargs.get("target_update_interval")
        # DQN's family copies its target network every target_update_interval steps (SAC's counts
        # gradient steps, and soft updates go on anyway)
        if algorithm in in_search_space("dqn") and isinstance(target, int) and target > train_steps - starts:
            return (
                "target_update_interval",
                target,
                f"longer than the {train_steps - starts:,} steps left after learning_starts: the target "
                f"network would never be updated; allowed: <= {train_steps - starts:,} at this budget",
            )
    return None


def _memory_problem(kind: str, kwargs: dict[str, Any], vec: int) -> Problem | None:
    """A buffer that cannot fit even with a one-number observation and action (a lower bound of
    :func:`fieldrl.policies.memory_guard.buffer_problem`, which needs the built env's spaces)."""
    key = "n_steps" if kind == "on" else "buffer_size"
    per_step = {
        "n_steps": memory_guard.rollout_bytes_per_step(vec, obs=1, act=1),
        "buffer_size": memory_guard.replay_bytes_per_step(obs=1, act=1),
    }
    least = " even with a one-number observation"
    return memory_guard.fits_problem({key: per_step[key]}, kwargs, least=least)
