"""The traffic-signal domain: wires params, envs, heuristics and KPIs together."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from fieldrl.domains.base import EpisodeRecord, StressAxis
from fieldrl.domains.multiagent import ParallelDomain, ParallelLockstepEnvs
from fieldrl.domains.speed import Speed
from fieldrl.domains.traffic import metrics, sumo
from fieldrl.domains.traffic.heuristics import HEURISTICS
from fieldrl.domains.traffic.networks import read_sumocfg
from fieldrl.domains.traffic.params import TrafficParams, resolve_file
from fieldrl.domains.traffic.stress import own_routes, scale_pedestrians, scale_vehicles, trained_factor

if TYPE_CHECKING:  # loaded where used: checking a scenario needs none of this
    import pandas as pd

    from fieldrl.domains.traffic.env import TrafficEnv
    from fieldrl.reportkit.context import ReportContext


class TrafficDomain(ParallelDomain[TrafficParams]):
    """Traffic signals for vehicles and pedestrians on SUMO (one agent per junction)."""

    name = "traffic"
    file_params = ("net_file", "route_file", "sumocfg", "osm_file")  # relative to the scenario file
    title = "Traffic signals for vehicles and pedestrians"
    #: measured on the demo budgets of the built-in scenarios (see :class:`~fieldrl.domains.speed.Speed`)
    speed = Speed(on_policy=150.0, off_policy=120.0, episode_s=0.8)
    params_model = TrafficParams
    kpis = metrics.KPIS
    headline_kpis = ("person_delay_mean", "vehicle_delay_mean", "pedestrian_delay_mean", "throughput")
    glossary = {
        "Person delay": "the time each driver and each pedestrian lost against moving freely, every "
        "road user counted once.",
        "Jain fairness": "1 when vehicles and pedestrians lose the same share of their time, lower when "
        "one mode waits for the other (Jain's index, 0-1).",
    }
    heuristics = HEURISTICS

    policy_params = {
        "decision_s": "seconds between the learned controller's decisions",
        "reward_weights": "the reward it trains on (weights of the reward terms; none: demand-adaptive)",
        "advice": "whether it sees the stage Webster's program would show now (and may follow it)",
    }
    tunable_policy_params = {
        "decision_s": {"3": 3, "5": 5, "10": 10, "15": 15},
        "reward_weights": {
            "auto": None,  # demand-adaptive weights (rewards.auto_weights)
            "delay": {"vehicle_delay": 1.0, "pedestrian_delay": 1.0},
            "delay and longest waits": {
                "vehicle_delay": 1.0,
                "pedestrian_delay": 1.0,
                "max_vehicle_wait": 1.0,
                "max_pedestrian_wait": 1.0,
            },
            "queue": {"queue": 1.0},  # sumo-rl's queue reward, pedestrians counted too
        },
    }
    #: Generated demand only (a network with its own routes refuses both), as factors on the
    #: scenario's hourly rates. Vehicle demand: half to twice, the swing between a quiet day and the
    #: peak a growing town or an event brings. At twice, SUMO's actuated program and max-pressure
    #: already lose 70-105 s per vehicle on traffic/quick (15-17 s at its own demand) and 160-240 s
    #: on the grid, with queues of 30-150 vehicles (2 held-out days, 2026-12-06): beyond it a stress
    #: test measures jams, not control. Pedestrians vary more than vehicles (a school day, rain, an
    #: event letting out): a quarter to four times, and not zero, which would leave the pedestrian
    #: KPIs with no one to measure.
    stress_axes = {
        "demand": StressAxis(
            "Vehicle demand factor",
            "× the scenario's vehicle rates",
            (0.5, 0.75, 1.0, 1.5, 2.0),
            0.5,
            2.0,
            trained_factor,
            scale_vehicles,
            log=True,
            problem=own_routes,
        ),
        "pedestrians": StressAxis(
            "Pedestrian demand factor",
            "× the scenario's pedestrian rates",
            (0.5, 1.0, 1.5, 2.0, 3.0),
            0.25,
            4.0,
            trained_factor,
            scale_pedestrians,
            log=True,
            problem=own_routes,
        ),
    }
    info_keys = metrics.info_keys(3)
    #: libsumo runs one simulation per process: the runner evaluates one episode at a time
    eval_batch_size = 1

    def input_files(self, params: dict[str, Any]) -> dict[str, Path]:
        """The named files (``sumo-rl:`` paths resolved), and the files a SUMO configuration lists."""
        files = {
            key: resolve_file(value)
            for key in self.file_params
            if isinstance(value := params.get(key), str) and value
        }
        if "sumocfg" in files:
            config = read_sumocfg(files["sumocfg"])  # validated already: it reads
            listed = {"net-file": (config.net_file,), "route-files": config.route_files}
            listed["additional-files"] = config.additional_files
            for name, paths in listed.items():
                files |= {f"sumocfg {name}[{i}]": path for i, path in enumerate(paths)}
        return files

    def heuristic_problem(self, use: str, params: TrafficParams) -> str | None:
        """Webster's program (``webster``, ``webster-timed``) exists only for generated demand."""
        if use in ("webster", "webster-timed") and self.checked_params(params).own_demand:
            return (
                f"{use} runs the Webster program fieldrl computes for generated demand; this network brings "
                "its own routes (route_file, or a sumocfg or RESCO network naming route files)"
            )
        return None

    def make_parallel_env(self, params: TrafficParams, training: bool = False) -> TrafficEnv:
        from fieldrl.domains.traffic.env import TrafficEnv

        return TrafficEnv(self.checked_params(params))

    def make_env(self, params: TrafficParams, seed: int | None = None) -> Any:
        """The single-agent Gymnasium view (single-junction networks only)."""
        from fieldrl.domains.traffic.gym_env import SingleSignalEnv

        env = SingleSignalEnv(self.checked_params(params))
        if seed is not None:
            env.reset(seed=seed)
        return env

    def make_train_vec_env(self, params: TrafficParams, n_envs: int, seed: int) -> Any:
        """Agent slots in this process over TraCI or for one env; else one libsumo process per env."""
        from fieldrl.domains.traffic.env import TrafficEnv

        p = self.checked_params(params)
        if p.traci or n_envs == 1:
            return super().make_train_vec_env(p, n_envs, seed)
        from fieldrl.domains.traffic.vec import SubprocSlotVecEnv

        probe = TrafficEnv(p)  # spaces only; starts no libsumo simulation
        agent = probe.possible_agents[0]
        return SubprocSlotVecEnv(
            p, n_envs, seed, probe.observation_space(agent), probe.action_space(agent), probe.max_slots
        )

    def make_eval_envs(
        self, params: TrafficParams, seeds: Sequence[int], cases: Sequence[int] | None = None
    ) -> ParallelLockstepEnvs:
        p = self.checked_params(params)
        if not p.traci and sumo.libsumo_in_use():
            # validation during training: the training env holds this process's libsumo simulation,
            # so these episodes run the same SUMO over TraCI (a process of their own)
            p = p.model_copy(update={"traci": True})
        envs = [self.make_parallel_env(p) for _ in seeds]
        return self.eval_envs_class(envs, seeds, metrics.info_keys(envs[0].n_stages))

    # -- decision differences (words in :mod:`fieldrl.domains.traffic.decisions`)
    def decision_features(self, envs: Any, n_features: int) -> list[str]:
        from fieldrl.domains.traffic.decisions import features

        return features(envs, n_features)

    def action_words(self, envs: Any) -> list[str] | None:
        from fieldrl.domains.traffic.decisions import action_words

        return action_words(envs)

    def episode_kpis(self, record: EpisodeRecord) -> dict[str, np.ndarray]:
        return metrics.episode_kpis(record)

    def episode_trace(self, record: EpisodeRecord, index: int) -> pd.DataFrame:
        return metrics.episode_trace(record, index)

    def report_section(self, context: ReportContext) -> list[Any]:
        from fieldrl.domains.traffic.report import report_section

        return report_section(context)

    # -- side-by-side replays (``fieldrl replay``; drawing in :mod:`fieldrl.domains.traffic.replay`)
    def replay_snapshot(self, envs: Any, index: int) -> dict[str, Any]:
        from fieldrl.domains.traffic.replay import snapshot

        return snapshot(envs, index)

    def draw_replay(self, ax: Any, history: Sequence[dict[str, Any]], title: str) -> None:
        from fieldrl.domains.traffic.replay import draw

        draw(ax, history, title)

    def replay_divergence(self, a: dict[str, Any], b: dict[str, Any]) -> float:
        """The gap in people held up at that moment: vehicles halting plus pedestrians waiting to cross,
        each person counted once."""
        from fieldrl.domains.traffic.replay import divergence

        return divergence(a, b)
