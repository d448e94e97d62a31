"""Words for decision differences in the cue-memory task."""

from __future__ import annotations

from typing import Any

#: the observation ``[signal, progress]`` (see :class:`~fieldrl.domains.memory.env.MemoryEnv`)
FEATURES = ["cue signal", "progress through the episode"]


def features(envs: Any, n_features: int) -> list[str]:
    return FEATURES[:n_features]


def action_words(envs: Any) -> list[str]:
    return ["action"]
