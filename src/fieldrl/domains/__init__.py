"""Domain registry: name -> Domain, imported lazily so one domain's heavy
dependencies (Flatland, SUMO, cvxpy) never load for another."""

from __future__ import annotations

import importlib

from fieldrl.domains.base import Domain

#: registry name -> module holding ``DOMAIN``
DOMAIN_MODULES: dict[str, str] = {
    "chemo": "fieldrl.domains.chemo",
    "memory": "fieldrl.domains.memory",
    "rail": "fieldrl.domains.rail",
    "wealth": "fieldrl.domains.wealth",
    "traffic": "fieldrl.domains.traffic",
    "taxiway": "fieldrl.domains.taxiway",
    "uav": "fieldrl.domains.uav",
}


def domain_names() -> list[str]:
    return sorted(DOMAIN_MODULES)


def get_domain(name: str) -> Domain:
    """Return the domain registered as ``name`` (KeyError if there is none)."""
    module = importlib.import_module(DOMAIN_MODULES[name])
    return module.DOMAIN


__all__ = ["Domain", "domain_names", "get_domain"]
