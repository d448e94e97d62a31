"""fieldrl: reinforcement learning for operations.

Real simulators as Gymnasium / PettingZoo environments, learned and heuristic
policies evaluated on the same held-out seeds, and PDF reports for stakeholders.

The API functions (``fieldrl.run``, ``train``, ``evaluate``, ``report``, ``compare``,
``validate``, ``resume``, ``load_model``) load on first use, so importing a simulator stays light;
``dir(fieldrl)`` lists them. Importing ``fieldrl`` imports neither Gymnasium nor torch: a machine that
only runs exported bundles (``fieldrl[runtime]``) has neither.
"""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType
from typing import Any

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

    Done by itself once ``fieldrl`` and Gymnasium are both imported, in either order (see
    :class:`_RegisterWhenGymnasiumLoads`); a second call does nothing.
    """
    import gymnasium as gym

    for env_id, entry_point in GYM_ENVS.items():
        if env_id not in gym.registry:
            gym.register(env_id, entry_point=entry_point)


class _RegisterWhenGymnasiumLoads:
    """Calls :func:`register_envs` right after Gymnasium is first imported, so that
    ``import fieldrl; gym.make("fieldrl/Chemo-v0")`` works without ``fieldrl`` importing Gymnasium
    itself (a runtime-only install has none, and ``fieldrl act`` should not pay for it).

    A meta path finder (``importlib.abc.MetaPathFinder``'s one method; the ABC itself costs an import)
    that answers for ``gymnasium`` alone, once: it leaves ``sys.meta_path``, lets the other finders find
    the package, and wraps that spec's loader so the ids are registered when the module has run.
    """

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname != "gymnasium":
            return None
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        loader = spec.loader if spec is not None else None
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        run_module = loader.exec_module

        def run_then_register(module: ModuleType) -> None:
            run_module(module)
            register_envs()

        loader.exec_module = run_then_register  # type: ignore[method-assign]  # this spec's loader only
        return spec


if "gymnasium" in sys.modules:
    register_envs()
elif not any(isinstance(finder, _RegisterWhenGymnasiumLoads) for finder in sys.meta_path):
    sys.meta_path.insert(0, _RegisterWhenGymnasiumLoads())


def __getattr__(name: str) -> Any:
    if name in _API:
        from fieldrl import api

        return getattr(api, name)
    raise AttributeError(f"module 'fieldrl' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)


__all__ = [*_API, "GYM_ENVS", "__version__", "register_envs"]
