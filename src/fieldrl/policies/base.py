"""The one interface evaluation sees: heuristics and trained models act alike.

Policies act on a *batch* of environments at once (``obs`` has a leading axis of
size ``n_envs``). Batching lets one network forward pass serve a hundred held-out
patients, and lets a heuristic be a few numpy lines.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class Policy(Protocol):
    """A controller that maps a batch of observations to a batch of actions.

    Subclass it to take the default :meth:`bind_envs` (nothing to bind); every fieldrl policy does.

    :param name: label used in results and reports.
    """

    name: str

    def reset(self, n_envs: int) -> None:
        """Forget all per-episode memory and prepare for ``n_envs`` parallel episodes."""
        ...

    def bind_envs(self, envs: Any) -> None:
        """Called by the evaluation runner with the domain's ``EvalEnvs`` right after ``reset``, before
        the first ``act``.

        Centralised heuristics (a rail dispatcher, a taxiway planner) read the simulators they plan
        for through it, and masked learned policies read ``envs.action_masks()``. Default: nothing
        (a policy that decides from its observations alone).
        """
        return None

    def observe_envs(self, envs: Any) -> None:
        """Bind to ``envs`` that *another* policy drives, changing nothing in them, so that this policy
        can be asked what it would do in that policy's states (decision differences).

        Default: :meth:`bind_envs`. A policy whose ``bind_envs`` sets up the envs for itself (a rail
        dispatcher switches the learned policies' shield off) overrides this.
        """
        self.bind_envs(envs)

    def act(self, obs: np.ndarray, episode_start: np.ndarray) -> np.ndarray:
        """Return actions for every environment in the batch.

        :param obs: observations, shape ``(n_envs, *obs_shape)``.
        :param episode_start: boolean ``(n_envs,)``; True on the first step of an
            episode, so stateful policies (counters, LSTM states) restart there.
        :return: actions, shape ``(n_envs, *action_shape)``.
        """
        ...
