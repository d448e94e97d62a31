"""Words for decision differences at signalised junctions: the observation's features (see
:mod:`fieldrl.domains.traffic.env`; padded to the largest junction) and the stages."""

from __future__ import annotations

from typing import Any


def features(envs: Any, n_features: int) -> list[str]:
    env = envs.envs[0]
    names = [f"stage {k + 1} shown" for k in range(env.n_stages)]
    names += ["changing stage", "green time / max green"]
    names += [f"lane {k + 1} queue" for k in range(env.n_lanes)]
    names += [f"lane {k + 1} density" for k in range(env.n_lanes)]
    names += [f"crossing {k + 1} people waiting / 10" for k in range(env.n_crossings)]
    names += [f"crossing {k + 1} longest wait / 120 s" for k in range(env.n_crossings)]
    if env.advice:
        names += [f"Webster advises stage {k + 1}" for k in range(env.n_stages)]
    names += [f"obs[{k}]" for k in range(len(names), n_features)]
    return names[:n_features]


def action_words(envs: Any) -> list[str]:
    return [f"stage {k + 1}" for k in range(envs.envs[0].n_stages)]
