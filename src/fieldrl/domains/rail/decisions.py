"""Words for decision differences in rail dispatching: the observation's features (the layout in
:mod:`fieldrl.domains.rail.observation`) and the dispatch and route actions."""

from __future__ import annotations

from typing import Any

OWN = [
    "no decision",
    "dispatch decision",
    "route decision",
    "every-step decision",
    "max speed",
    "malfunction steps left / 50",
    "off the map",
    "moving",
    "stopped or broken down",
    "distance to target / max steps",
    "slack to timetable / max steps",
    "time / max steps",
    "start cell occupied",
    "trains on the map (share)",
    "trains arrived (share)",
    "trains deadlocked (share)",
    "trains / 100",
    "trains cancelled (share)",
    "trains departed before (share)",
]
EXIT = [
    "open",
    "extra distance / 10",
    "opposing trains / 5",
    "first opposing train (share of horizon)",
    "trains ahead / 5",
    "first train ahead (share of horizon)",
    "next switch (share of horizon)",
    "distance to target via it / max steps",
]
SEMI = [
    "no-op",
    "depart",
    "hold",
    "cancel",
    "take the left exit",
    "go straight",
    "take the right exit",
    "stop",
]
MONOLITHIC = ["do nothing", "left", "forward", "right", "stop"]


def features(envs: Any, n_features: int) -> list[str]:
    names = list(OWN)
    for side in ("left", "straight", "right"):
        names += [f"{side} exit: {what}" for what in EXIT]
    extra = n_features - len(names)  # with ``advice``: the dispatcher's advice, one-hot over the actions
    names += [
        f"dispatcher advises: {SEMI[k]}" if extra == len(SEMI) else f"obs[{len(names) + k}]"
        for k in range(extra)
    ]
    return names[:n_features]


def action_words(envs: Any) -> list[str]:
    return MONOLITHIC if envs.envs[0].mode == "monolithic" else SEMI
