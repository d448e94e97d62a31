"""Airport taxiway routing: surface engine, PettingZoo env with action masks, planning baselines."""

from fieldrl.domains.taxiway.domain import TaxiwayDomain

DOMAIN = TaxiwayDomain()

__all__ = ["DOMAIN", "TaxiwayDomain"]
