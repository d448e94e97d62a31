"""The rail dispatching domain: Flatland levels, the PettingZoo env, dispatchers and KPIs wired together."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from fieldrl.domains.base import EpisodeRecord, StressAxis
from fieldrl.domains.multiagent import ParallelDomain, ParallelLockstepEnvs
from fieldrl.domains.rail import metrics, stress
from fieldrl.domains.rail.heuristics import HEURISTICS
from fieldrl.domains.rail.params import RailParams
from fieldrl.domains.speed import Speed

if TYPE_CHECKING:  # loaded where used: checking a scenario needs none of this
    import pandas as pd

    from fieldrl.domains.rail.env import RailParallelEnv
    from fieldrl.reportkit.context import ReportContext


def make_env(params: RailParams, training: bool = False) -> RailParallelEnv:
    """The parallel env for ``params`` (the curriculum applies to training envs only)."""
    from fieldrl.domains.rail.env import RailParallelEnv

    return RailParallelEnv(
        level=params.level,
        mode=params.mode,
        hold_steps=params.hold_steps,
        wait_cost=params.wait_cost,
        horizon=params.horizon,
        shield=params.shield,
        shield_paths=params.shield_paths,
        advice=params.advice,
        team_reward=params.team_reward,
        curriculum=tuple(params.curriculum) if training else (),
        curriculum_episodes=params.curriculum_episodes,
        config=params.configuration() if params.flatland is not None else None,
        env_file=params.env_file,
    )


class RailEvalEnvs(ParallelLockstepEnvs):
    """Lockstep episodes that hand over, once all have ended, what the report's rail map needs (rail
    cells, train moves): ``extras["rail_maps"]``, one snapshot per episode (None without a network)."""

    def final_extras(self) -> dict[str, Any]:
        return {"rail_maps": [_snapshot(env) for env in self.envs]}


def _snapshot(env: RailParallelEnv) -> dict[str, Any] | None:
    from flatland.envs.step_utils.states import TrainState

    if env.fl is None:
        return None
    rows, cols = np.nonzero(env.fl.rail.grid)
    outcome = []
    for i, agent in enumerate(env.fl.agents):
        if agent.state == TrainState.DONE:
            outcome.append("arrived")
        elif env.cancelled[i]:
            outcome.append("cancelled")
        elif i in env.stuck:
            outcome.append("deadlocked")
        elif agent.state.is_off_map_state():
            outcome.append("never departed")
        else:
            outcome.append("en route")
    return {
        "rail": (rows, cols),
        "history": env.position_history(),
        "outcome": outcome,
        "targets": [next(iter(a.targets))[0] for a in env.fl.agents],
        "shape": (env.net.height, env.net.width),
    }


class RailDomain(ParallelDomain[RailParams]):
    """Train dispatching and routing on Flatland's rail networks (Flatland 3 test levels 0-4)."""

    name = "rail"
    file_params = ("env_file",)  # relative to the scenario file
    title = "Rail dispatching (Flatland)"
    #: measured on the demo budgets of the built-in scenarios (see :class:`~fieldrl.domains.speed.Speed`)
    speed = Speed(on_policy=750.0, off_policy=100.0, episode_s=0.6)
    params_model = RailParams
    kpis = metrics.KPIS
    headline_kpis = ("arrived", "deadlocked", "delay")
    glossary = {
        "Deadlock": "trains blocking each other on single track so that none can move again.",
        "Flatland normalised reward": "the Flatland 3 challenge score of an episode (0-1): arrivals and "
        "their punctuality against the schedule.",
    }
    heuristics = HEURISTICS
    policy_params = {
        "advice": "whether it sees the priority dispatcher's decision for the train (and may follow it)",
        "team_reward": "share of each train's reward that is the team's mean (0: its own only)",
    }
    tunable_policy_params = {"team_reward": {"own": 0.0, "half": 0.5, "team": 1.0}}
    info_keys = metrics.INFO_KEYS
    eval_batch_size = 50
    eval_envs_class = RailEvalEnvs
    # values in steps and trains; default points and ranges: why, in fieldrl.domains.rail.stress
    stress_axes = {
        "malfunction_interval": StressAxis(
            "Breakdown interval",
            "mean steps between a train's breakdowns",
            stress.MALFUNCTION_POINTS,
            *stress.MALFUNCTION_RANGE,
            stress.trained_malfunction_interval,
            stress.apply_malfunction_interval,
            "g",
            log=True,
        ),
        "trains": StressAxis(
            "Number of trains",
            "on the setting's network",
            stress.TRAIN_POINTS,
            *stress.TRAIN_RANGE,
            stress.trained_trains,
            stress.apply_trains,
            "g",
        ),
    }

    def make_parallel_env(self, params: RailParams, training: bool = False) -> RailParallelEnv:
        return make_env(params, training)

    # -- decision differences (words in :mod:`fieldrl.domains.rail.decisions`)
    def decision_features(self, envs: Any, n_features: int) -> list[str]:
        from fieldrl.domains.rail.decisions import features

        return features(envs, n_features)

    def action_words(self, envs: Any) -> list[str] | None:
        from fieldrl.domains.rail.decisions import action_words

        return action_words(envs)

    def episode_kpis(self, record: EpisodeRecord) -> dict[str, np.ndarray]:
        return metrics.episode_kpis(record)

    def episode_trace(self, record: EpisodeRecord, index: int) -> pd.DataFrame:
        """The rail network and every train's moves in episode ``index`` (long format, for the rail map)."""
        snaps = record.extras.get("rail_maps")
        if not snaps or index >= len(snaps) or snaps[index] is None:
            return metrics.episode_trace(record, index)
        return map_trace(snaps[index])

    def report_section(self, context: ReportContext) -> list[Any]:
        from fieldrl.domains.rail.report import report_section

        return report_section(context)

    # -- side-by-side replays (``fieldrl replay``; drawing in :mod:`fieldrl.domains.rail.replay`)
    def replay_snapshot(self, envs: Any, index: int) -> dict[str, Any]:
        from fieldrl.domains.rail.replay import snapshot

        return snapshot(envs, index)

    def draw_replay(self, ax: Any, history: Sequence[dict[str, Any]], title: str) -> None:
        from fieldrl.domains.rail.replay import draw

        draw(ax, history, title)

    def replay_divergence(self, a: dict[str, Any], b: dict[str, Any]) -> float:
        """The number of trains whose state differs between the two episodes (arrived, running, stopped,
        broken down, deadlocked, not departed, cancelled), plus half the trains on different cells."""
        from fieldrl.domains.rail.replay import divergence

        return divergence(a, b)


def map_trace(snap: dict[str, Any]) -> pd.DataFrame:
    """Rows ``layer=rail`` (every rail cell) and ``layer=train`` (a train's cell whenever it changed)."""
    import pandas as pd

    rows, cols = snap["rail"]
    parts = [
        pd.DataFrame({"layer": "rail", "step": -1, "train": -1, "row": rows, "col": cols, "outcome": ""})
    ]
    hist = snap["history"]
    for i, outcome in enumerate(snap["outcome"]):
        cells = hist[:, i, :] if len(hist) else np.zeros((0, 2), dtype=np.int16)
        on = np.flatnonzero(cells[:, 0] >= 0)
        if len(on):
            moved = np.ones(len(on), dtype=bool)
            moved[1:] = np.any(np.diff(cells[on], axis=0) != 0, axis=1)
            keep = on[moved]
            parts.append(
                pd.DataFrame(
                    {
                        "layer": "train",
                        "step": keep,
                        "train": i,
                        "row": cells[keep, 0],
                        "col": cells[keep, 1],
                        "outcome": outcome,
                    }
                )
            )
        tr, tc = snap["targets"][i]
        parts.append(
            pd.DataFrame(
                {"layer": "target", "step": -1, "train": i, "row": [tr], "col": [tc], "outcome": outcome}
            )
        )
    h, w = snap["shape"]
    parts.append(
        pd.DataFrame({"layer": "shape", "step": -1, "train": -1, "row": [h], "col": [w], "outcome": ""})
    )
    frame = pd.concat(parts, ignore_index=True)
    return frame.astype({"step": "int64", "train": "int64", "row": "int64", "col": "int64"})
