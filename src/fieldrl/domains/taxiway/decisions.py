"""Words for decision differences in taxiway routing: the observation's features (see
:mod:`fieldrl.domains.taxiway.env`) and the moves."""

from __future__ import annotations

from typing import Any

OWN = [
    "x position",
    "y position",
    "heading (sin)",
    "heading (cos)",
    "distance to goal",
    "departure",
    "at a node",
    "on a runway cell",
    "share of time held",
    "steps held in a row / 20",
    "seniority nearby",
]
NEAR = [
    "in conflict now",
    "aircraft within 4 cells / 4",
    "nearest aircraft (distance)",
    "runway ahead active",
]


def features(envs: Any, n_features: int) -> list[str]:
    env = envs.envs[0]
    names = list(OWN) + list(NEAR)
    for h in range(1, env.horizon + 1):
        names += [f"conflict predicted {h} cells ahead", f"active runway {h} cells ahead"]
    for a in range(env.n_actions):
        move = "hold" if a == 0 else f"move {a}"
        names += [f"{move}: open", f"{move}: progress", f"{move}: target cell occupied", f"{move}: oncoming"]
    if env.advisor is not None:
        names += [f"planner advises {'hold' if a == 0 else f'move {a}'}" for a in range(env.n_actions)]
    names += [f"obs[{k}]" for k in range(len(names), n_features)]
    return names[:n_features]


def action_words(envs: Any) -> list[str]:
    return ["hold"] + [f"move {a}" for a in range(1, envs.envs[0].n_actions)]
