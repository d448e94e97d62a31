"""Words for decision differences in UAV offloading: one UAV's observation features (see
:mod:`fieldrl.domains.uav.env`) and its allocation action."""

from __future__ import annotations

from typing import Any

from fieldrl.domains.uav.env import MOVES
from fieldrl.domains.uav.pipeline import SHARE_MODES

HEAD = [
    "x position",
    "y position",
    "altitude (share of range)",
    "time (share of episode)",
    "vehicles with a task (share)",
    "tasks this UAV serves best (share)",
    "base-station link quality / 10",
    "nearest UAV dx",
    "nearest UAV dy",
    "nearest UAV distance",
    "own tasks' centre dx",
    "own tasks' centre dy",
]
VEHICLE = [
    "link to this UAV / 10",
    "link to the base station / 10",
    "task size",
    "cycles per bit",
    "deadline (slots)",
    "this UAV is its best",
]
MOVE_WORDS = ["stay", "east", "north", "west", "south"]


def features(envs: Any, n_features: int) -> list[str]:
    env = envs.envs[0]
    names = list(HEAD)
    for k in range(1, env.params.n_observed + 1):
        names += [f"vehicle {k}: {what}" for what in VEHICLE]
    names += [f"UAV id {u}" for u in range(env.n_agent_ids)]
    names += [f"obs[{k}]" for k in range(len(names), n_features)]
    return names[:n_features]


def action_words(envs: Any) -> list[str]:
    p = envs.envs[0].params
    if p.pipeline:
        return [f"admit {a}, {mode} shares" for a in p.admit_levels for mode in SHARE_MODES]
    assert len(MOVES) == len(MOVE_WORDS)
    return [
        f"admit {a}, fly {move}, offload {r:g}"
        for a in p.admit_levels
        for move in MOVE_WORDS
        for r in p.marl_ratio_levels
    ]
