"""Refuse, at validation, learned entries whose buffers or networks would not fit in memory.

A scenario asking for ``n_steps: 100000000`` or a ten-million-unit layer is a typo, not a plan;
without these checks it passes validation and the operating system kills the run (or the
machine's other work) when training allocates. Two guards, both judged against the memory this
machine has free now:

- :func:`buffer_problem` estimates the rollout / replay buffer from the env's spaces and the
  entry's ``n_envs`` before anything is built, and names the hyperparameter at fault (validation
  without building judges the same sizes with a one-entry observation and action: a lower bound,
  ``fieldrl.policies.feasibility.training_problem``);
- :func:`address_space_capped` caps this process's address space while the model is built
  once on a one-env copy, so that any other oversized allocation (layer widths, critic count,
  LSTM size) fails fast with a ``MemoryError`` instead of swapping or being OOM-killed.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # imported where used: the free-memory checks at validation need no gymnasium
    from gymnasium import spaces

#: share of the free memory one learned entry may claim for its buffer or model
SHARE = 0.5
_FLOAT = 4  # SB3 buffers hold float32


def _kib_field(path: str, key: str) -> int | None:
    """A ``key: N kB`` line of a ``/proc`` file, in bytes; None where it cannot be read."""
    try:
        with open(path) as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def available_bytes() -> int | None:
    """``MemAvailable`` from ``/proc/meminfo``; None where that file does not exist."""
    return _kib_field("/proc/meminfo", "MemAvailable")


def gib(n_bytes: float) -> str:
    return f"{n_bytes / 2**30:,.1f} GiB"


def _size(space: spaces.Space) -> int:
    from gymnasium import spaces

    if isinstance(space, spaces.Dict):
        return sum(_size(s) for s in space.spaces.values())
    if isinstance(space, spaces.Tuple):
        return sum(_size(s) for s in space.spaces)
    if isinstance(space, spaces.Discrete):
        return 1
    return int(np.prod(space.shape)) if space.shape else 1


def _mask_size(space: spaces.Space) -> int:
    """Entries of an action mask (MaskablePPO stores one per step and env)."""
    from gymnasium import spaces

    if isinstance(space, spaces.Discrete):
        return int(space.n)
    if isinstance(space, spaces.MultiDiscrete):
        return int(np.sum(space.nvec))
    if isinstance(space, spaces.MultiBinary):
        return 2 * _size(space)
    return 0


def buffer_problem(
    venv: Any, n_envs: int, hyperparameters: dict[str, Any], available: int | None = None
) -> tuple[str, Any, str] | None:
    """``(hyperparameter, value, what is allowed)`` if the entry's buffer would not fit, else None.

    :param venv: a one-env copy of the training env (its ``num_envs`` counts agent slots in
        multi-agent domains, so training holds ``venv.num_envs * n_envs`` env copies).
    :param n_envs: the entry's ``n_envs``.
    :param hyperparameters: constructor arguments, after YAML conversion.
    """
    obs, act = _size(venv.observation_space), _size(venv.action_space)
    per_step = {
        "n_steps": rollout_bytes_per_step(venv.num_envs * n_envs, obs, act, _mask_size(venv.action_space)),
        "buffer_size": replay_bytes_per_step(obs, act),
    }
    return fits_problem(per_step, hyperparameters, available)


def rollout_bytes_per_step(envs: int, obs: int, act: int, mask: int = 0) -> int:
    """Bytes a rollout buffer holds per ``n_steps`` over ``envs`` envs: obs, action, mask, and
    reward/return/value/log-prob/advantage/episode-start."""
    return envs * _FLOAT * (obs + act + mask + 6)


def replay_bytes_per_step(obs: int, act: int) -> int:
    """Bytes a replay buffer holds per ``buffer_size`` (all envs together): obs and next obs, action,
    reward, done, timeout."""
    return _FLOAT * (2 * obs + act + 3)


def fits_problem(
    per_step: dict[str, int], hyperparameters: dict[str, Any], available: int | None = None, least: str = ""
) -> tuple[str, Any, str] | None:
    """``(hyperparameter, value, what is allowed)`` for the first of ``per_step``'s keys (bytes per
    unit of it) whose buffer would need more than :data:`SHARE` of the free memory, else None.

    :param least: words saying the sizes are a lower bound (validation without building the env).
    """
    available = available_bytes() if available is None else available
    if not available:
        return None
    budget = int(available * SHARE)
    for key, bytes_per_step in per_step.items():
        value = hyperparameters.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            continue  # SB3 judges values of the wrong kind
        need = value * bytes_per_step
        if need > budget:
            kind = "rollout" if key == "n_steps" else "replay"
            allowed = f"allowed: at most {budget // bytes_per_step:,}"
            if least:
                allowed += " (fewer with the real observation: `fieldrl validate --build` says how many)"
            return (
                key,
                value,
                f"the {kind} buffer would need {gib(need)}{least}, more than half of the {gib(available)} "
                f"this machine has free; {allowed}",
            )
    return None


@contextmanager
def address_space_capped(extra_bytes: int | None = None) -> Iterator[None]:
    """Let this process map at most ``extra_bytes`` more (default: half the free memory).

    Allocations beyond that raise ``MemoryError`` (numpy) or ``RuntimeError`` (torch) at once.
    A no-op where ``resource`` or ``/proc`` is missing. Process-wide: use it only around
    single-threaded work such as building a model to check it.
    """
    try:
        import resource
    except ImportError:  # pragma: no cover - not on POSIX
        yield
        return
    current = _kib_field("/proc/self/status", "VmSize")
    if extra_bytes is None:
        free = available_bytes()
        extra_bytes = None if free is None else int(free * SHARE)
    if current is None or extra_bytes is None:
        yield
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = current + extra_bytes
    for limit in (soft, hard):
        if limit != resource.RLIM_INFINITY:
            cap = min(cap, limit)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
