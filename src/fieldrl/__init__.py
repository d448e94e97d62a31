"""fieldrl: reinforcement learning for operations.

Real simulators as Gymnasium / PettingZoo environments, learned and heuristic
policies evaluated on the same held-out seeds, and PDF reports for stakeholders.

The API functions (``fieldrl.run``, ``train``, ``evaluate``, ``report``, ``compare``,
``validate``, ``resume``, ``load_model``) load on first use, so importing a simulator stays light;
``dir(fieldrl)`` lists them.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym

__version__ = "0.1.0"

_API = ("RunResult", "compare", "evaluate", "load_model", "report", "resume", "run", "train", "validate")

#: Gymnasium ids of fieldrl's single-agent envs -> entry points (imported only on gym.make;
#: ``fieldrl/TrafficSignal-v0`` needs the ``traffic`` extra)
GYM_ENVS = {
    "fieldrl/Chemo-v0": "fieldrl.domains.chemo.env:ChemoEnv",
    "fieldrl/Memory-v0": "fieldrl.domains.memory.env:MemoryEnv",
    "fieldrl/Wealth-v0": "fieldrl.domains.wealth.env:WealthEnv",
    "fieldrl/TrafficSignal-v0": "fieldrl.domains.traffic.gym_env:SingleSignalEnv",
}


def register_envs() -> None:
    """Register fieldrl's env ids with Gymnasium (string entry points: no domain is imported).

    Done once when ``fieldrl`` is imported, as Gymnasium's own plugins do; a second call does nothing.
    """
    for env_id, entry_point in GYM_ENVS.items():
        if env_id not in gym.registry:
            gym.register(env_id, entry_point=entry_point)


register_envs()


def __getattr__(name: str) -> Any:
    if name in _API:
        from fieldrl import api

        return getattr(api, name)
    raise AttributeError(f"module 'fieldrl' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)


__all__ = [*_API, "GYM_ENVS", "__version__", "register_envs"]
