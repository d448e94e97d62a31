"""Multi-UAV-assisted vehicular task offloading (SOCP trajectories, DRL allocation, rectifier, LP ratios)."""

from fieldrl.domains.uav.domain import UavDomain

DOMAIN = UavDomain()

__all__ = ["DOMAIN", "UavDomain"]
