"""Rail dispatching on Flatland: semi-hierarchical dispatch/route decisions, dispatchers, monolithic RL."""

from fieldrl.domains.rail.domain import RailDomain

DOMAIN = RailDomain()

__all__ = ["DOMAIN", "RailDomain"]
