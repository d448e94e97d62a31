"""fieldrl's PettingZoo ``ParallelEnv`` over SUMO: one agent per signalised junction.

Written directly on libsumo/TraCI rather than over sumo-rl's ``SumoEnvironment`` because
pedestrians need things sumo-rl does not have (its issue #233): crossing-level observations,
a pedestrian clearance before every yellow (see :mod:`signals`), per-person delay bookkeeping for
both modes, and SUMO's own programs (fixed, actuated, Webster) runnable in the same env for the
baselines. The observation and reward follow sumo-rl's design (phase one-hot, min-green flag,
lane densities and queues; reward functions registered by name).

Observation of a junction (all in [0, 1], padded to the largest junction of the network):
stage one-hot, in-transition flag, green time / max green, per incoming lane queue and density
(halting / all vehicles over lane capacity at 7.5 m per vehicle), per crossing waiting pedestrians
/ 10 and their longest wait / 120 s. Action: the next green stage (``action_mask`` tells which
are allowed now: min green, max green and running transitions are enforced).
"""

from __future__ import annotations

import functools
import math
from pathlib import Path
from typing import Any

import numpy as np
from gymnasium import spaces
from pettingzoo import ParallelEnv

from fieldrl.domains.traffic import programs, sumo
from fieldrl.domains.traffic.demand import demand_file
from fieldrl.domains.traffic.keys import KPI_KEYS, TRACE_KEYS  # noqa: F401  (re-exported)
from fieldrl.domains.traffic.networks import NetworkOptions, build_network
from fieldrl.domains.traffic.params import TrafficParams
from fieldrl.domains.traffic.rewards import StepStats, jain, reward
from fieldrl.domains.traffic.signals import GREEN, SignalLayout, StageController, Timing, read_layout

_LAYOUT_CACHE: dict[tuple[str, bool], tuple[list[SignalLayout], dict[str, programs.Program]]] = {}


def net_file_for(params: TrafficParams) -> Path:
    """The ``.net.xml`` the scenario runs: yours, a config's, RESCO's, converted from OSM, or generated."""
    source = params.network_source()
    if source is not None:
        return source.net_file
    opts = NetworkOptions(
        params.network, params.block_m, params.arm_m, params.lanes + 1, all_red_s=params.all_red_s
    )
    return build_network(opts)


def probe_layouts(net_file: Path, pedestrian_stage: bool) -> tuple[list[SignalLayout], dict[str, Any]]:
    """Signal layouts and SUMO programs of ``net_file`` (via a short TraCI run, cached per process).

    TraCI (a separate SUMO process) rather than libsumo, so probing never collides with the one
    libsumo simulation this process may be running.
    """
    key = (str(net_file), pedestrian_stage)
    if key not in _LAYOUT_CACHE:
        owner = object()
        handle = sumo.start(["-n", str(net_file), "--no-step-log", "--no-warnings"], owner, use_traci=True)
        try:
            ids = sorted(handle.trafficlight.getIDList())
            layouts = [read_layout(handle, tls, pedestrian_stage) for tls in ids]
            progs = {
                tls: [(p.duration, p.state) for p in handle.trafficlight.getAllProgramLogics(tls)[0].phases]
                for tls in ids
            }
        finally:
            sumo.close(handle, owner)
        if not layouts:
            raise ValueError(f"{net_file} has no traffic lights")
        add_upstream(net_file, layouts)
        _LAYOUT_CACHE[key] = (layouts, progs)
    return _LAYOUT_CACHE[key]


#: how far upstream of the stop line a queue is counted (a detector's reach), metres
QUEUE_REACH_M = 150.0
_SIGNALISED = ("traffic_light", "traffic_light_right_on_red", "traffic_light_unregulated")


def add_upstream(net_file: Path, layouts: list[SignalLayout], reach_m: float = QUEUE_REACH_M) -> None:
    """Fill each layout's ``upstream``: the lanes feeding each incoming lane within ``reach_m``.

    An incoming lane can be a metre long (RESCO's ingolstadt junctions are clusters whose approach
    lanes start just before the stop line), so its own halting count misses the queue standing on the
    road before it. The search walks back edge by edge through nodes without signals (never into
    another signal's junction) until ``reach_m`` metres of road are covered.
    """
    import sumolib

    net = sumolib.net.readNet(str(net_file))
    for lay in layouts:
        per_edge: dict[str, int] = {}
        for lane in lay.in_lanes:
            edge = lane.rsplit("_", 1)[0]
            per_edge[edge] = per_edge.get(edge, 0) + 1
        for lane in lay.in_lanes:
            edge_id = lane.rsplit("_", 1)[0]
            if not net.hasEdge(edge_id):
                continue
            edge = net.getEdge(edge_id)
            covered, frontier, seen, found = edge.getLength(), [edge], {edge_id}, []
            while frontier and covered < reach_m:
                nxt = []
                for e in frontier:
                    if e.getFromNode().getType() in _SIGNALISED:
                        continue
                    for inc in e.getIncoming():
                        if inc.getID() not in seen and not inc.getID().startswith(":"):
                            seen.add(inc.getID())
                            nxt.append(inc)
                            found += [x.getID() for x in inc.getLanes() if x.allows("passenger")]
                covered += min((e.getLength() for e in nxt), default=0.0)
                frontier = nxt
            if found:
                lay.upstream[lane] = (found, per_edge[edge_id])


class TrafficEnv(ParallelEnv):
    """Signals of a SUMO network with vehicles and pedestrians, one agent per junction.

    :param params: the scenario's ``TrafficParams``.
    :param native_program: run a SUMO program (``"0"`` fixed-time, ``"actuated"``, ``"webster"``)
        instead of following actions; can also be switched after ``reset`` with :meth:`use_program`.
    """

    metadata = {"name": "fieldrl_traffic_v0", "render_modes": []}

    def __init__(self, params: TrafficParams, native_program: str | None = None):
        self.params = params
        self.source = params.network_source()
        self.net_file = net_file_for(params)
        self.layouts, self.sumo_programs = probe_layouts(self.net_file, params.pedestrian_stage)
        self.possible_agents = [lay.tls for lay in self.layouts]
        self.agents: list[str] = []
        self.max_slots = len(self.possible_agents)
        self.n_stages = max(lay.n_stages for lay in self.layouts)
        self.n_lanes = max(len(lay.in_lanes) for lay in self.layouts)
        self.n_crossings = max(len(lay.crossings) for lay in self.layouts)
        self.obs_dim = self.n_stages + 2 + 2 * self.n_lanes + 2 * self.n_crossings
        #: per junction, Webster's greens (seconds per stage) and stage order (read when first asked)
        self._webster: dict[str, tuple[dict[int, int], dict[int, int]]] | None = None
        #: with ``params.advice`` :meth:`advised_stage` is shown one-hot after the rest of the observation
        self.advice = bool(params.advice)
        if self.advice:
            self._webster = self._webster_plan()
            self.obs_dim += self.n_stages
        self.timing = Timing(
            params.min_green_s, params.max_green_s, params.yellow_s, params.all_red_s, params.ped_clearance_s
        )
        self.native_program = native_program
        self._handle: Any = None
        self._rng = np.random.default_rng()
        self._reset_tallies()

    # ------------------------------------------------------------------ spaces
    @functools.cache  # noqa: B019 - spaces are fixed per env
    def observation_space(self, agent: str) -> spaces.Box:
        return spaces.Box(0.0, 1.0, shape=(self.obs_dim,), dtype=np.float32)

    @functools.cache  # noqa: B019
    def action_space(self, agent: str) -> spaces.Discrete:
        return spaces.Discrete(self.n_stages)

    # ------------------------------------------------------------------ lifecycle
    def _additional_files(self) -> list[Path]:
        p = self.params
        files = list(self.source.additional_files) if self.source is not None else []
        files.append(programs.actuated_file(self.net_file, self.sumo_programs, p.min_green_s, p.max_green_s))
        if not self._own_routes():
            files.append(self._webster_file())
        return files

    def _webster_file(self) -> Path:
        p = self.params
        periods = [m.period() for m in p.timing_periods or p.periods]  # timed for the run's own demand
        return programs.webster_file(
            self.net_file, periods, p.yellow_s, p.all_red_s, p.min_green_s, p.ped_clearance_s
        )

    def _webster_plan(self) -> dict[str, tuple[dict[int, int], dict[int, int]]]:
        if self._own_routes():
            raise ValueError(
                "Webster's timing (advice, webster-timed) needs SUMO's Webster program, built only for "
                "generated demand (this network brings its own route files)"
            )
        phases = programs.program_phases(self._webster_file(), "webster")
        return {lay.tls: programs.stage_plan(phases[lay.tls], lay.states) for lay in self.layouts}

    def advised_stage(self, agent: str) -> int:
        """The stage Webster's timing asks junction ``agent`` for now (generated demand only).

        Webster's splits run on fieldrl's own controller: keep the stage until it has had its
        Webster green, then ask for the stage Webster shows next (during a change: its target).
        Timed from the controller's green, not the clock, so the controller's own clearances
        (which the program's may not match) do not push the two out of step. A policy that always
        asks for it is Webster's timing under fieldrl's control (within the clearances).
        """
        if self._webster is None:
            self._webster = self._webster_plan()
        green, following = self._webster[agent]
        ctl = self.controllers[agent]
        if ctl.in_transition:
            return ctl.target
        if ctl.stage not in green:  # a stage Webster never shows (the pedestrian stage)
            return next(iter(following), ctl.stage)
        return ctl.stage if ctl.green_time < green[ctl.stage] else following[ctl.stage]

    def _own_routes(self) -> tuple[Path, ...]:
        return self.source.route_files if self.source is not None else ()

    def _command(self, seed: int) -> list[str]:
        p = self.params
        routes = self._own_routes() or (
            demand_file(
                self.net_file, [m.period() for m in p.periods], seed, p.demand_jitter, p.through_weight
            ),
        )
        cmd = [
            "-n", str(self.net_file), "-r", ",".join(str(r) for r in routes),
            "-a", ",".join(str(f) for f in self._additional_files()),
            "--seed", str(seed % 2**31),
            "--begin", str(p.begin_s), "--end", str(p.begin_s + p.duration_s + 1),
            "--no-step-log", "true", "--no-warnings", "true", "--duration-log.disable", "true",
            "--time-to-teleport", "300", "--collision.action", "warn",
        ]  # fmt: skip
        return cmd

    def reset(self, seed: int | None = None, options: dict | None = None):
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        episode_seed = int(seed) if seed is not None else int(self._rng.integers(0, 2**31 - 1))
        self.close()
        cmd = self._command(episode_seed)
        if self.params.gui:
            import traci

            with sumo.quiet_stdout():
                traci.start([sumo.binary("sumo-gui"), *cmd, "--start"], label=f"gui-{id(self)}")
            self._handle = traci.getConnection(f"gui-{id(self)}")
        else:
            self._handle = sumo.start(cmd, self, self.params.traci)
        self.controllers = {lay.tls: StageController(lay, self.timing) for lay in self.layouts}
        self._program_green: dict[str, tuple[int, int]] = {}  # under a SUMO program: (stage, green s)
        self.agents = list(self.possible_agents)
        self._reset_tallies()
        self._shown = {tls: "" for tls in self.controllers}
        if self.native_program is not None:
            self.use_program(self.native_program)
        else:
            self._show()
        self._observe_people()
        self._observe_vehicles()
        obs = {a: self._obs(a) for a in self.agents}
        return obs, {a: {} for a in self.agents}

    def close(self) -> None:
        if self._handle is not None:
            sumo.close(self._handle, self)
            self._handle = None

    def use_program(self, program_id: str) -> None:
        """Hand every junction to SUMO program ``program_id`` for the rest of the episode."""
        self.native_program = program_id
        for tls in self.controllers:
            self._handle.trafficlight.setProgram(tls, program_id)
            self._handle.trafficlight.setPhase(tls, 0)

    def set_green_limits(self, program_id: str, min_green_s: int | None, max_green_s: int | None) -> None:
        """Change the min/max green of SUMO program ``program_id``'s extendable phases (actuated
        control's own settings) and restart it at phase 0; fixed phases (yellows, clearances) stay."""
        h = self._handle
        for tls in self.controllers:
            logic = next(lg for lg in h.trafficlight.getAllProgramLogics(tls) if lg.programID == program_id)
            for phase in logic.phases:
                if phase.minDur != phase.maxDur:
                    if max_green_s is not None:
                        phase.maxDur = float(max_green_s)
                    if min_green_s is not None:
                        phase.minDur = float(min(min_green_s, phase.maxDur))
            h.trafficlight.setProgramLogic(tls, logic)
            h.trafficlight.setProgram(tls, program_id)
            h.trafficlight.setPhase(tls, 0)

    # ------------------------------------------------------------------ bookkeeping
    def _reset_tallies(self) -> None:
        self.time_s = 0
        self.veh_timeloss: dict[str, float] = {}
        self.veh_depart_delay: dict[str, float] = {}
        self.veh_max_wait: dict[str, float] = {}
        self.pending_since: dict[str, float] = {}
        self.ped_delay: dict[str, float] = {}
        self.ped_max_wait: dict[str, float] = {}
        self.arrived = 0
        self.queue_sum = 0.0
        self.queue_now = 0
        self.stage_seconds: dict[str, np.ndarray] = {}
        self._crossing_wait: dict[str, list[float]] = {}
        self._stats = {a: StepStats() for a in self.possible_agents}
        self._info_cache: tuple[int, dict[str, float]] | None = None

    def _show(self) -> None:
        for tls, ctl in self.controllers.items():
            state = ctl.tick()
            if state != self._shown[tls]:
                self._handle.trafficlight.setRedYellowGreenState(tls, state)
                self._shown[tls] = state

    def _observe_people(self) -> None:
        """Per-second pedestrian bookkeeping: delay (standing time), waits per crossing."""
        h = self._handle
        waits: dict[str, list[float]] = {}
        for pid in h.person.getIDList():
            w = h.person.getWaitingTime(pid)
            if w <= 0.0:
                self.ped_delay.setdefault(pid, 0.0)
                continue
            self.ped_delay[pid] = self.ped_delay.get(pid, 0.0) + 1.0
            if w > self.ped_max_wait.get(pid, 0.0):
                self.ped_max_wait[pid] = w
            nxt = h.person.getNextEdge(pid)
            if nxt.startswith(":") and "_c" in nxt:
                waits.setdefault(nxt, []).append(w)
        self._crossing_wait = waits

    def _observe_vehicles(self) -> None:
        h = self._handle
        for vid in h.vehicle.getIDList():
            if vid not in self.veh_depart_delay:
                self.veh_depart_delay[vid] = h.vehicle.getDepartDelay(vid)
            self.veh_timeloss[vid] = h.vehicle.getTimeLoss(vid)
            w = h.vehicle.getWaitingTime(vid)
            if w > self.veh_max_wait.get(vid, 0.0):
                self.veh_max_wait[vid] = w
        for vid in h.simulation.getPendingVehicles():
            self.pending_since.setdefault(vid, float(self.time_s))

    def _current_stage(self, tls: str) -> int:
        ctl = self.controllers[tls]
        if self.native_program is None:
            return -1 if ctl.in_transition else ctl.stage
        state = self._handle.trafficlight.getRedYellowGreenState(tls)
        if "y" in state:
            return -1
        green = {i for i, c in enumerate(state) if c in GREEN}
        overlaps = [
            len(green & ctl.layout.green(k)) / max(len(ctl.layout.green(k)), 1)
            for k in range(ctl.layout.n_stages)
        ]
        best = int(np.argmax(overlaps))
        return best if overlaps[best] >= 0.99 else -1

    # ------------------------------------------------------------------ stepping
    def step(self, actions: dict[str, Any]):
        if not self.agents:
            raise RuntimeError("step() after the episode ended; call reset()")
        h = self._handle
        if self.native_program is None:
            for agent, action in actions.items():
                self.controllers[agent].request(int(action))
        acc = {a: StepStats() for a in self.agents}
        for _ in range(self.params.decision_s):
            if self.native_program is None:
                self._show()
            h.simulationStep()
            self.time_s += 1
            self.arrived += h.simulation.getArrivedNumber() + h.simulation.getArrivedPersonNumber()
            self._observe_people()
            total = 0
            for lay in self.layouts:
                halting = sum(h.lane.getLastStepHaltingNumber(lane) for lane in lay.in_lanes)
                total += halting
                acc[lay.tls].vehicle_wait_s += halting
                acc[lay.tls].pedestrian_wait_s += sum(
                    len(self._crossing_wait.get(c, ())) for c in lay.crossings
                )
                stage = self._current_stage(lay.tls)
                usage = self.stage_seconds.setdefault(lay.tls, np.zeros(self.n_stages + 1))
                usage[stage if stage >= 0 else self.n_stages] += 1
                if self.native_program is not None:
                    self._follow_program(lay.tls, stage)
            self.queue_now = total
            self.queue_sum += total
        self._observe_vehicles()
        for lay in self.layouts:
            s = acc[lay.tls]
            vw = [
                h.vehicle.getWaitingTime(v)
                for lane in lay.in_lanes
                for v in h.lane.getLastStepVehicleIDs(lane)
            ]
            vw = [w for w in vw if w > 0]
            pw = [w for c in lay.crossings for w in self._crossing_wait.get(c, ())]
            s.vehicles_waiting, s.pedestrians_waiting = len(vw), len(pw)
            s.vehicle_max_wait, s.pedestrian_max_wait = max(vw, default=0.0), max(pw, default=0.0)
            s.vehicle_mean_wait = float(np.mean(vw)) if vw else 0.0
            s.pedestrian_mean_wait = float(np.mean(pw)) if pw else 0.0
        self._stats = acc
        weights = self.params.reward_weights
        rewards = {a: reward(acc[a], weights) for a in self.agents}
        done = self.time_s >= self.params.duration_s
        obs = {a: self._obs(a) for a in self.agents}
        terminations = {a: False for a in self.agents}
        truncations = {a: done for a in self.agents}
        infos: dict[str, dict] = {a: {} for a in self.agents}
        if done:
            self.agents = []
        return obs, rewards, terminations, truncations, infos

    def _follow_program(self, tls: str, stage: int) -> None:
        """Under a SUMO program: count the seconds of the green shown, as fieldrl's controller counts
        its own (so a program's observations read like those of a policy in control)."""
        shown, seconds = self._program_green.get(tls, (-1, 0))
        if stage >= 0:
            self._program_green[tls] = (stage, seconds + 1 if stage == shown else 0)

    def displayed_stage(self, agent: str) -> int:
        """The stage junction ``agent`` shows now; -1 during a change (yellow, clearance, all-red)."""
        return self._current_stage(agent)

    def _obs(self, agent: str) -> np.ndarray:
        h, ctl = self._handle, self.controllers[agent]
        lay = ctl.layout
        out = np.zeros(self.obs_dim, dtype=np.float32)
        stage = self._current_stage(agent)
        if stage >= 0:
            out[stage] = 1.0
        in_transition = stage < 0 or ctl.in_transition
        out[self.n_stages] = float(in_transition)
        green = ctl.green_time if self.native_program is None else self._program_green.get(agent, (0, 0))[1]
        out[self.n_stages + 1] = min(green / max(self.timing.max_green_s, 1), 1.0)
        base = self.n_stages + 2
        for k, lane in enumerate(lay.in_lanes):
            cap = lay.lane_capacity[lane]
            out[base + k] = min(h.lane.getLastStepHaltingNumber(lane) / cap, 1.0)
            out[base + self.n_lanes + k] = min(h.lane.getLastStepVehicleNumber(lane) / cap, 1.0)
        base += 2 * self.n_lanes
        for k, crossing in enumerate(lay.crossings):
            waits = self._crossing_wait.get(crossing, ())
            out[base + k] = min(len(waits) / 10.0, 1.0)
            out[base + self.n_crossings + k] = min(max(waits, default=0.0) / 120.0, 1.0)
        if self.advice:
            out[base + 2 * self.n_crossings + self.advised_stage(agent)] = 1.0
        return out

    def action_mask(self, agent: str) -> np.ndarray:
        mask = np.zeros(self.n_stages, dtype=bool)
        if self.native_program is not None or not self.agents:
            mask[:] = True
            return mask
        allowed = self.controllers[agent].allowed()
        mask[: len(allowed)] = allowed
        return mask

    # ------------------------------------------------------------------ heuristics' view
    def halting(self, lane: str) -> int:
        return int(self._handle.lane.getLastStepHaltingNumber(lane))

    def queue(self, agent: str, lane: str) -> float:
        """Halting vehicles waiting for incoming ``lane`` of junction ``agent``: on the lane and, shared
        among the junction's lanes of that road, on the road before it within ``QUEUE_REACH_M``."""
        lanes, sharing = self.controllers[agent].layout.upstream.get(lane, ((), 1))
        return self.halting(lane) + sum(self.halting(u) for u in lanes) / sharing

    def approaching(self, lane: str, within_m: float) -> int:
        """Moving vehicles on ``lane`` within ``within_m`` of the stop line (a detector's view)."""
        h = self._handle
        length = h.lane.getLength(lane)
        return sum(
            1
            for v in h.lane.getLastStepVehicleIDs(lane)
            if h.vehicle.getSpeed(v) > 0.5 and length - h.vehicle.getLanePosition(v) <= within_m
        )

    def crossing_waits(self, crossing: str) -> tuple[int, float]:
        waits = self._crossing_wait.get(crossing, ())
        return len(waits), max(waits, default=0.0)

    # ------------------------------------------------------------------ KPIs
    def person_delays(self) -> tuple[np.ndarray, np.ndarray]:
        """Delay (s) of every vehicle and every pedestrian seen so far, finished or not.

        Vehicle delay is SUMO's time loss plus insertion delay (vehicles still waiting to enter
        count with their wait so far); pedestrian delay is the time spent standing.
        """
        seen = self.veh_timeloss
        veh = [seen[v] + self.veh_depart_delay.get(v, 0.0) for v in seen]
        veh += [self.time_s - t for v, t in self.pending_since.items() if v not in seen]
        return np.asarray(veh, dtype=float), np.fromiter(self.ped_delay.values(), dtype=float)

    def episode_info(self) -> dict[str, float]:
        if self._info_cache is not None and self._info_cache[0] == self.time_s:
            return self._info_cache[1]
        veh, ped = self.person_delays()
        vm = float(veh.mean()) if len(veh) else 0.0
        # no pedestrian in the episode (a vehicles-only network): their measures are undefined, not 0
        pm = float(ped.mean()) if len(ped) else math.nan
        both = np.concatenate([veh, ped])
        stage0 = (
            self._current_stage(self.possible_agents[0])
            if self._handle is not None and self.controllers
            else -1
        )
        lay0 = self.layouts[0]
        ped_now = [w for c in lay0.crossings for w in self._crossing_wait.get(c, ())]
        info = {
            "person_delay_mean": float(both.mean()) if len(both) else 0.0,
            "vehicle_delay_mean": vm,
            "vehicle_delay_p95": float(np.percentile(veh, 95)) if len(veh) else 0.0,
            "pedestrian_delay_mean": pm,
            "pedestrian_delay_p95": float(np.percentile(ped, 95)) if len(ped) else math.nan,
            "pedestrian_max_wait": max(self.ped_max_wait.values(), default=0.0) if len(ped) else math.nan,
            "vehicle_max_wait": max(self.veh_max_wait.values(), default=0.0),
            "throughput": self.arrived / max(self.time_s, 1) * 60.0,  # people per minute
            "jain_modes": jain([m for m, d in ((vm, veh), (pm, ped)) if len(d)] or [0.0]),
            "queue_mean": self.queue_sum / max(self.time_s, 1),
            "time_s": float(self.time_s),
            "queue_now": float(self.queue_now),
            "peds_waiting_now": float(sum(len(v) for v in self._crossing_wait.values())),
            "ped_longest_wait_now": max(ped_now, default=0.0),
            "stage_now": float(stage0),
        }
        for k in range(self.n_stages + 1):
            info[f"stage_share_{k}"] = float(
                sum(u[k] for u in self.stage_seconds.values())
                / max(sum(u.sum() for u in self.stage_seconds.values()), 1)
            )
        self._info_cache = (self.time_s, info)
        return info


def parallel_env(**kwargs: Any) -> TrafficEnv:
    """PettingZoo-style factory: ``parallel_env(params=TrafficParams(...))`` or params fields."""
    params = kwargs.pop("params", None)
    native = kwargs.pop("native_program", None)
    if params is None:
        params = TrafficParams(**kwargs)
    return TrafficEnv(params, native_program=native)
