"""Goals-based wealth management domain (Das et al. GBWM: goals, efficient frontier, DP optimum)."""

from fieldrl.domains.wealth.domain import WealthDomain

DOMAIN = WealthDomain()

__all__ = ["DOMAIN", "WealthDomain"]
