"""Parameters of the multi-UAV vehicular edge-computing engine, with their sources.

A pydantic model (no gym/SB3), so scenario files are validated field by field and the
engine reads one object. Defaults follow the cited papers; the task mix, bandwidths and
CPU clocks are typical values of the vehicular-edge-computing literature (they are the
scenario's choice, not measurements).
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class UavParams(BaseModel):
    """Everything a ``uav`` scenario may set (``extra="forbid"``: unknown keys are errors)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    # ------------------------------------------------------------------ layout and mobility
    n_uavs: int = Field(2, ge=1, le=8, description="UAVs with edge servers (agents).")
    n_vehicles: int = Field(10, ge=1, le=200, description="Vehicles driving on the road grid.")
    area_m: float = Field(1000.0, ge=200.0, le=5000.0, description="Side of the square area (m).")
    road_spacing_m: float = Field(
        250.0, ge=50.0, le=2500.0, description="Distance between parallel roads of the Manhattan grid (m)."
    )
    speed_min_mps: float = Field(8.0, ge=0.0, le=40.0, description="Slowest vehicle speed (m/s).")
    speed_max_mps: float = Field(16.0, ge=0.0, le=40.0, description="Fastest vehicle speed (m/s).")
    turn_prob: float = Field(0.3, ge=0.0, le=1.0, description="Probability of turning at an intersection.")
    slot_s: float = Field(1.0, gt=0.0, le=10.0, description="Decision slot length (s); tasks end within it.")
    episode_slots: int = Field(30, ge=1, le=1000, description="Slots per episode.")

    # ------------------------------------------------------------------ base station
    bs_x_m: float = Field(100.0, ge=0.0, description="Base-station x position (m).")
    bs_y_m: float = Field(100.0, ge=0.0, description="Base-station y position (m).")
    bs_height_m: float = Field(25.0, ge=10.0, le=100.0, description="BS antenna height (3GPP UMa: 25 m).")
    vehicle_antenna_m: float = Field(1.5, ge=1.0, le=5.0, description="Vehicle antenna height (m).")

    # ------------------------------------------------------------------ UAVs
    z_min_m: float = Field(50.0, ge=10.0, le=1000.0, description="Lowest UAV altitude (m).")
    z_max_m: float = Field(150.0, ge=10.0, le=1000.0, description="Highest UAV altitude (m).")
    v_max_mps: float = Field(20.0, gt=0.0, le=60.0, description="Largest horizontal UAV speed (m/s).")
    vz_max_mps: float = Field(5.0, ge=0.0, le=30.0, description="Largest vertical UAV speed (m/s).")
    d_min_m: float = Field(30.0, ge=0.0, le=500.0, description="Minimum UAV-UAV separation (m).")

    # ------------------------------------------------------------------ radio
    carrier_ghz: float = Field(2.0, gt=0.5, le=6.0, description="Carrier frequency (GHz).")
    noise_dbm_hz: float = Field(-174.0, description="Thermal noise density (dBm/Hz).")
    noise_figure_db: float = Field(9.0, ge=0.0, le=20.0, description="Receiver noise figure (dB).")
    tx_power_w: float = Field(0.2, gt=0.0, le=10.0, description="Vehicle transmit power (W; 23 dBm).")
    uav_bandwidth_mhz: float = Field(10.0, ge=0.0, le=400.0, description="Bandwidth of each UAV (MHz).")
    bs_bandwidth_mhz: float = Field(20.0, ge=0.0, le=400.0, description="Bandwidth of the BS (MHz).")
    los_a: float = Field(9.61, gt=0.0, description="Al-Hourani 2014 S-curve a (urban 9.61).")
    los_b: float = Field(0.16, gt=0.0, description="Al-Hourani 2014 S-curve b (urban 0.16).")
    eta_los_db: float = Field(1.0, ge=0.0, description="Excess loss on LoS links (urban 1 dB).")
    eta_nlos_db: float = Field(20.0, ge=0.0, description="Excess loss on NLoS links (urban 20 dB).")

    # ------------------------------------------------------------------ computing and energy
    f_local_ghz: float = Field(1.0, gt=0.0, le=10.0, description="Vehicle CPU clock (GHz).")
    f_uav_ghz: float = Field(5.0, ge=0.0, le=100.0, description="UAV edge-server clock (GHz).")
    f_bs_ghz: float = Field(20.0, ge=0.0, le=500.0, description="BS edge-server clock (GHz).")
    kappa: float = Field(
        1e-28, gt=0.0, le=1e-24, description="Effective switched capacitance (J/(Hz^2 cycle))."
    )
    p0_w: float = Field(79.86, ge=0.0, description="Zeng 2019 blade-profile power in hover P0 (W).")
    pi_w: float = Field(88.63, ge=0.0, description="Zeng 2019 induced power in hover Pi (W).")
    u_tip_mps: float = Field(120.0, gt=0.0, description="Rotor blade tip speed U_tip (m/s).")
    v0_mps: float = Field(4.03, gt=0.0, description="Mean rotor induced velocity in hover v0 (m/s).")
    d0: float = Field(0.6, ge=0.0, description="Fuselage drag ratio d0.")
    rho: float = Field(1.225, gt=0.0, description="Air density (kg/m^3).")
    rotor_solidity: float = Field(0.05, gt=0.0, description="Rotor solidity s.")
    rotor_area_m2: float = Field(0.503, gt=0.0, description="Rotor disc area A (m^2).")
    uav_weight_n: float = Field(
        20.0, ge=0.0, description="UAV weight for climbing work (N; Zeng 2019: 20 N)."
    )

    # ------------------------------------------------------------------ tasks
    task_prob: float = Field(1.0, ge=0.0, le=1.0, description="Probability a vehicle has a task in a slot.")
    bits_min_mbit: float = Field(0.2, gt=0.0, le=100.0, description="Smallest task size (Mbit).")
    bits_max_mbit: float = Field(1.0, gt=0.0, le=100.0, description="Largest task size (Mbit).")
    load: float = Field(1.0, gt=0.0, le=20.0, description="Multiplier on task sizes (load level).")
    cpb_min: float = Field(500.0, gt=0.0, le=1e5, description="Fewest CPU cycles per bit.")
    cpb_max: float = Field(1000.0, gt=0.0, le=1e5, description="Most CPU cycles per bit.")
    deadline_min_s: float = Field(0.2, gt=0.0, description="Shortest deadline (s).")
    deadline_max_s: float = Field(0.8, gt=0.0, description="Longest deadline (s); at most the slot.")

    # ------------------------------------------------------------------ objective
    w_delay: float = Field(1.0, ge=0.0, description="Cost weight per second of task delay.")
    w_energy: float = Field(
        0.002, ge=0.0, description="Cost weight per joule (propulsion, computing, radio)."
    )
    w_fail: float = Field(1.0, ge=0.0, description="Cost of a task that misses its deadline.")

    # ------------------------------------------------------------------ decision pipeline
    pipeline: bool = Field(
        True,
        description="True: SOCP trajectories, DRL allocation, rectifier and LP ratios. False: the MARL "
        "baseline, where each UAV agent also picks its move and one offloading ratio (no SOCP/LP).",
    )
    rectifier: Literal["rule", "none"] = Field(
        "rule", description="Macro-scheduler: rule-based rectifier, or none (ablation)."
    )
    max_alternations: int = Field(
        4, ge=1, le=20, description="Cap on LP <-> rectifier alternations per slot."
    )
    admit_levels: list[int] = Field(
        default_factory=lambda: [0, 1, 2, 3, 4, 6],
        min_length=1,
        max_length=16,
        description="How many vehicles a UAV agent may admit (its discrete choices).",
    )
    marl_ratio_levels: list[float] = Field(
        default_factory=lambda: [0.5, 1.0],
        min_length=1,
        max_length=8,
        description="Offloading ratios a MARL-baseline agent may choose for its tasks.",
    )
    agent_ids: bool = Field(
        False,
        description="Append a one-hot UAV index to each agent's observation; with algorithm "
        "independent-ppo every UAV agent then has its own networks (independent learners).",
    )
    n_observed: int = Field(
        6, ge=1, le=32, description="Best-linked vehicles described in each UAV's observation."
    )
    socp_solver: Literal["CLARABEL", "SCS"] = Field("CLARABEL", description="Conic solver for the SOCP.")
    coverage_length_m: float = Field(
        150.0, gt=0.0, description="Length scale of the soft vehicle-to-UAV coverage weights in the SOCP (m)."
    )

    @model_validator(mode="after")
    def _ranges(self) -> UavParams:
        pairs = [
            ("speed_min_mps", "speed_max_mps"),
            ("z_min_m", "z_max_m"),
            ("bits_min_mbit", "bits_max_mbit"),
            ("cpb_min", "cpb_max"),
            ("deadline_min_s", "deadline_max_s"),
        ]
        for low, high in pairs:
            if getattr(self, low) > getattr(self, high):
                raise ValueError(
                    f"{low} ({getattr(self, low)}) must not exceed {high} ({getattr(self, high)})"
                )
        for name in ("bs_x_m", "bs_y_m"):
            if getattr(self, name) > self.area_m:
                raise ValueError(
                    f"{name} ({getattr(self, name)}) must lie within the area (<= area_m {self.area_m})"
                )
        if self.deadline_max_s > self.slot_s:
            raise ValueError(
                f"deadline_max_s ({self.deadline_max_s}) must not exceed slot_s ({self.slot_s}): "
                "tasks finish within their slot"
            )
        problem = self._separation_problem()
        if problem:
            raise ValueError(problem)
        if self.road_spacing_m > self.area_m:
            raise ValueError(f"road_spacing_m ({self.road_spacing_m}) must not exceed area_m ({self.area_m})")
        if any(k < 0 for k in self.admit_levels):
            raise ValueError(f"admit_levels must be >= 0, got {self.admit_levels}")
        if any(not 0.0 <= r <= 1.0 for r in self.marl_ratio_levels):
            raise ValueError(f"marl_ratio_levels must lie in [0, 1], got {self.marl_ratio_levels}")
        return self

    def _separation_problem(self) -> str | None:
        """Why ``n_uavs`` UAVs cannot keep ``d_min_m`` apart in the flight volume, or None.

        The volume is ``area_m`` square by ``z_max_m - z_min_m`` high: two UAVs cannot be farther apart
        than its diagonal, and balls of diameter ``d_min_m`` around each must fit in it (grown by
        ``d_min_m / 2`` on every side). Both bounds are necessary conditions, so nothing possible is refused.
        """
        if self.n_uavs < 2 or self.d_min_m == 0:
            return None
        height = self.z_max_m - self.z_min_m
        diagonal = math.sqrt(2 * self.area_m**2 + height**2)
        d = self.d_min_m
        fits = (self.area_m + d) ** 2 * (height + d) / (math.pi / 6 * d**3)
        if d > diagonal or self.n_uavs > fits:
            return (
                f"d_min_m ({d:g}) cannot hold between {self.n_uavs} UAVs in an area of {self.area_m:g} m "
                f"with {height:g} m of altitude range (diagonal {diagonal:.0f} m)"
            )
        return None
