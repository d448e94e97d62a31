"""Names of the UAV env's episode KPIs and info numbers, importable without cvxpy."""

from __future__ import annotations

from fieldrl.simulators.uav.params import UavParams

KPI_KEYS = (
    "success_rate",
    "mean_delay_ms",
    "propulsion_j",
    "computing_j",
    "transmission_j",
    "energy_j",
    "cost",
    "socp_ms",
    "lp_ms",
    "rectify_ms",
    "rectified",
    "separation_violations",
    "slot_success",
    "slot_cost",
)


def info_keys(params: UavParams) -> tuple[str, ...]:
    """Episode KPIs, then UAV and vehicle positions (for the report's map)."""
    uav = [f"uav{u}_{c}" for u in range(params.n_uavs) for c in "xyz"]
    veh = [f"veh{v}_{c}" for v in range(params.n_vehicles) for c in "xy"]
    return KPI_KEYS + tuple(uav) + tuple(veh)
