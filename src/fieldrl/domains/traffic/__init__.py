"""Traffic signals for vehicles and pedestrians on SUMO (libsumo in-process, TraCI optional)."""

from fieldrl.domains.traffic.domain import TrafficDomain

DOMAIN = TrafficDomain()

__all__ = ["DOMAIN", "TrafficDomain"]
