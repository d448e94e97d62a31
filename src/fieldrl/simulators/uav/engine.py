"""Multi-UAV-assisted vehicular task offloading: the world a slot at a time (numpy only).

One slot of ``slot_s`` seconds:

1. every vehicle may generate one task (bits ``D``, cycles per bit ``c``, deadline ``tau <= slot``);
2. a decision (made outside the engine) names for each task a server (a UAV, the base station,
   or none = local only), its shares of that server's bandwidth and CPU, and the offloaded
   fraction ``lambda`` (partial offloading);
3. :meth:`UavWorld.evaluate` gives each task's delay
   ``max((1 - lambda) D c / f_loc, lambda D / r + lambda D c / f_srv)``, its energies and whether
   it met its deadline; tasks end within their slot (no queues carry over);
4. the UAVs fly to their next waypoints (:meth:`UavWorld.fly`, propulsion energy of Zeng 2019) and
   the vehicles drive on (:meth:`UavWorld.advance`).

Server indices: ``0 .. M-1`` are the UAVs, ``M`` is the base station, ``-1`` means local only.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fieldrl.simulators.uav import channel as ch
from fieldrl.simulators.uav.mobility import RoadGrid
from fieldrl.simulators.uav.params import UavParams

LOCAL = -1


@dataclass
class Tasks:
    """The tasks of one slot, one row per vehicle (``present`` False where a vehicle has none)."""

    present: np.ndarray  # (n,) bool
    bits: np.ndarray  # (n,) bit
    cycles_per_bit: np.ndarray  # (n,)
    deadline: np.ndarray  # (n,) s

    @property
    def cycles(self) -> np.ndarray:
        return self.bits * self.cycles_per_bit


@dataclass
class Allocation:
    """Who serves which task with how much: server, bandwidth share, CPU share (per vehicle)."""

    server: np.ndarray  # (n,) int: 0..M-1 UAV, M base station, -1 local
    bw_share: np.ndarray  # (n,) fraction of the server's bandwidth
    cpu_share: np.ndarray  # (n,) fraction of the server's CPU

    def copy(self) -> Allocation:
        return Allocation(self.server.copy(), self.bw_share.copy(), self.cpu_share.copy())


@dataclass
class Outcome:
    """What an allocation and offloading ratios achieve for one slot's tasks (per vehicle)."""

    delay: np.ndarray
    success: np.ndarray
    e_local: np.ndarray
    e_tx: np.ndarray
    e_remote: np.ndarray
    cost: np.ndarray  # weighted task cost (no propulsion)

    @property
    def energy(self) -> np.ndarray:
        return self.e_local + self.e_tx + self.e_remote


class UavWorld:
    """Vehicles, base station, UAVs and the current slot's tasks.

    :param params: the scenario's :class:`UavParams`.
    """

    def __init__(self, params: UavParams):
        self.p = params
        self.m = params.n_uavs
        self.n = params.n_vehicles
        self.roads = RoadGrid(params.area_m, params.road_spacing_m)
        self.bs = np.array([params.bs_x_m, params.bs_y_m, params.bs_height_m])
        self.bandwidth_hz = np.r_[np.full(self.m, params.uav_bandwidth_mhz), params.bs_bandwidth_mhz] * 1e6
        self.cpu_hz = np.r_[np.full(self.m, params.f_uav_ghz), params.f_bs_ghz] * 1e9
        self.rng = np.random.default_rng()
        self.uav = np.zeros((self.m, 3))
        self.tasks = Tasks(np.zeros(self.n, bool), np.zeros(self.n), np.zeros(self.n), np.ones(self.n))
        self.t = 0

    # ------------------------------------------------------------------ state
    def reset(self, seed: int | None) -> None:
        """New episode: vehicles on the roads, UAVs on a ring at mid altitude, first tasks."""
        p = self.p
        self.rng = np.random.default_rng(seed)
        self.roads.reset(self.n, self.rng, p.speed_min_mps, p.speed_max_mps)
        phase = self.rng.uniform(0.0, 2.0 * np.pi)
        angles = phase + 2.0 * np.pi * np.arange(self.m) / self.m
        radius = 0.25 * p.area_m if self.m > 1 else 0.0
        centre = 0.5 * p.area_m
        self.uav = np.c_[
            centre + radius * np.cos(angles),
            centre + radius * np.sin(angles),
            np.full(self.m, 0.5 * (p.z_min_m + p.z_max_m)),
        ]
        self.t = 0
        self.draw_tasks()

    @property
    def vehicles(self) -> np.ndarray:
        """Vehicle positions ``(n, 2)`` (m)."""
        return self.roads.pos

    def draw_tasks(self) -> None:
        p, n, rng = self.p, self.n, self.rng
        present = rng.random(n) < p.task_prob
        bits = rng.uniform(p.bits_min_mbit, p.bits_max_mbit, n) * 1e6 * p.load
        cpb = rng.uniform(p.cpb_min, p.cpb_max, n)
        deadline = rng.uniform(p.deadline_min_s, p.deadline_max_s, n)
        self.tasks = Tasks(present, np.where(present, bits, 0.0), cpb, deadline)

    # ------------------------------------------------------------------ radio
    def path_loss_db(self, uav: np.ndarray | None = None) -> np.ndarray:
        """Mean path loss ``(n, M+1)``: A2G (Al-Hourani) to each UAV, 3GPP UMa to the BS."""
        p = self.p
        uav = self.uav if uav is None else uav
        veh = self.vehicles
        horiz = np.linalg.norm(veh[:, None, :] - uav[None, :, :2], axis=2)
        height = uav[None, :, 2] - p.vehicle_antenna_m
        a2g = ch.a2g_path_loss_db(
            horiz, height, p.carrier_ghz * 1e9, p.los_a, p.los_b, p.eta_los_db, p.eta_nlos_db
        )
        d_bs = np.hypot(np.linalg.norm(veh - self.bs[:2], axis=1), self.bs[2] - p.vehicle_antenna_m)
        ground = ch.uma_path_loss_db(d_bs, p.carrier_ghz, p.vehicle_antenna_m)
        return np.c_[a2g, ground]

    def spectral_efficiency(self, path_loss_db: np.ndarray | None = None) -> np.ndarray:
        """bit/s/Hz ``(n, M+1)`` if a vehicle had its server's whole band."""
        pl = self.path_loss_db() if path_loss_db is None else path_loss_db
        p = self.p
        return ch.spectral_efficiency(
            self.bandwidth_hz[None, :], p.tx_power_w, pl, p.noise_dbm_hz, p.noise_figure_db
        )

    def server_distance(self) -> np.ndarray:
        """3D distance ``(n, M+1)`` from each vehicle to each UAV and the BS (m)."""
        veh = np.c_[self.vehicles, np.full(self.n, self.p.vehicle_antenna_m)]
        servers = np.vstack([self.uav, self.bs])
        return np.linalg.norm(veh[:, None, :] - servers[None, :, :], axis=2)

    # ------------------------------------------------------------------ one slot's tasks
    def remote_terms(
        self, alloc: Allocation, path_loss_db: np.ndarray | None = None
    ) -> dict[str, np.ndarray]:
        """Per-task times and energies of the *whole* task run locally or remotely under ``alloc``.

        ``t_local``/``e_local``: all of it on the vehicle; ``t_remote``/``e_remote``: all of it
        sent and computed at the allocated server (``inf`` time where nothing is granted);
        ``t_tx``, ``e_tx``: the transmission part alone. Delay and energy are linear in the
        offloaded fraction, which is what makes the ratio problem an LP.
        """
        p, tasks = self.p, self.tasks
        pl = self.path_loss_db() if path_loss_db is None else path_loss_db
        srv = alloc.server
        offload = srv >= 0
        idx = np.where(offload, srv, 0)
        band = np.where(offload, np.clip(alloc.bw_share, 0.0, 1.0) * self.bandwidth_hz[idx], 0.0)
        loss = pl[np.arange(self.n), idx]
        rate = ch.shannon_rate_bps(band, p.tx_power_w, loss, p.noise_dbm_hz, p.noise_figure_db)
        freq = np.where(offload, np.clip(alloc.cpu_share, 0.0, 1.0) * self.cpu_hz[idx], 0.0)
        cycles = tasks.cycles
        f_loc = p.f_local_ghz * 1e9
        with np.errstate(divide="ignore", invalid="ignore"):
            t_tx = np.where(tasks.bits > 0, np.where(rate > 0, tasks.bits / rate, np.inf), 0.0)
            t_cpu = np.where(cycles > 0, np.where(freq > 0, cycles / freq, np.inf), 0.0)
        return {
            "t_local": cycles / f_loc,
            "e_local": ch.computing_energy_j(p.kappa, f_loc, cycles),
            "t_tx": t_tx,
            "t_remote": t_tx + t_cpu,
            "e_tx": p.tx_power_w * np.minimum(t_tx, tasks.deadline),
            "e_cpu": ch.computing_energy_j(p.kappa, freq, cycles),
            "rate": rate,
            "freq": freq,
        }

    def evaluate(
        self, alloc: Allocation, ratio: np.ndarray, path_loss_db: np.ndarray | None = None
    ) -> Outcome:
        """Delay, deadline success, energies and weighted cost of ``alloc`` with offloaded ``ratio``.

        A task that misses its deadline is dropped at the deadline (its delay counts as the
        deadline in the cost) and costs ``w_fail``; energy already spent still counts.
        """
        p, tasks = self.p, self.tasks
        terms = self.remote_terms(alloc, path_loss_db)
        lam = np.where(alloc.server >= 0, np.clip(np.asarray(ratio, float), 0.0, 1.0), 0.0)
        t_loc = (1.0 - lam) * terms["t_local"]
        with np.errstate(invalid="ignore"):
            t_rem = np.where(lam > 0, lam * terms["t_remote"], 0.0)
        delay = np.maximum(t_loc, t_rem)
        present = tasks.present
        success = present & (delay <= tasks.deadline * (1.0 + 1e-9))
        e_local = np.where(present, (1.0 - lam) * terms["e_local"], 0.0)
        with np.errstate(invalid="ignore"):
            # nothing is sent without a granted band; otherwise the radio stops at the deadline
            sending = present & (lam > 0) & (terms["rate"] > 0)
            e_tx = np.where(sending, p.tx_power_w * np.minimum(lam * terms["t_tx"], tasks.deadline), 0.0)
        e_remote = np.where(present, lam * terms["e_cpu"], 0.0)
        capped = np.minimum(delay, tasks.deadline)
        cost = np.where(
            present,
            p.w_delay * capped + p.w_energy * (e_local + e_tx + e_remote) + p.w_fail * (~success),
            0.0,
        )
        return Outcome(np.where(present, delay, 0.0), success, e_local, e_tx, e_remote, cost)

    # ------------------------------------------------------------------ moving on
    def clip_waypoints(self, target: np.ndarray) -> np.ndarray:
        """``target`` made flyable within one slot: speed, altitude and area limits."""
        p = self.p
        target = np.asarray(target, float).reshape(self.m, 3).copy()
        step = target[:, :2] - self.uav[:, :2]
        dist = np.linalg.norm(step, axis=1)
        reach = p.v_max_mps * p.slot_s
        scale = np.where(dist > reach, reach / np.maximum(dist, 1e-12), 1.0)
        target[:, :2] = self.uav[:, :2] + step * scale[:, None]
        dz = np.clip(target[:, 2] - self.uav[:, 2], -p.vz_max_mps * p.slot_s, p.vz_max_mps * p.slot_s)
        target[:, 2] = np.clip(self.uav[:, 2] + dz, p.z_min_m, p.z_max_m)
        target[:, :2] = np.clip(target[:, :2], 0.0, p.area_m)
        return target

    def fly(self, target: np.ndarray) -> tuple[np.ndarray, int]:
        """Fly every UAV to ``target`` (clipped to the limits) over one slot.

        Returns the propulsion energy of each UAV (J: Zeng 2019 power at the horizontal speed
        over the slot, plus climbing work ``W dz``) and the number of UAV pairs closer than
        ``d_min_m`` afterwards.
        """
        p = self.p
        target = self.clip_waypoints(target)
        speed = np.linalg.norm(target[:, :2] - self.uav[:, :2], axis=1) / p.slot_s
        climb = np.maximum(target[:, 2] - self.uav[:, 2], 0.0)
        power = ch.propulsion_power_w(
            speed, p.p0_w, p.pi_w, p.u_tip_mps, p.v0_mps, p.d0, p.rho, p.rotor_solidity, p.rotor_area_m2
        )
        energy = power * p.slot_s + p.uav_weight_n * climb
        self.uav = target
        return energy, self.separation_violations()

    def separation_violations(self) -> int:
        if self.m < 2:
            return 0
        d = np.linalg.norm(self.uav[:, None, :] - self.uav[None, :, :], axis=2)
        upper = np.triu_indices(self.m, 1)
        return int((d[upper] < self.p.d_min_m - 1e-6).sum())

    def advance(self) -> None:
        """Vehicles drive one slot; the next slot's tasks arrive."""
        self.roads.step(self.p.slot_s, self.rng, self.p.turn_prob)
        self.t += 1
        self.draw_tasks()
