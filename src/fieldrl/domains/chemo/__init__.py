"""Chemotherapy dosing domain (Ahn & Park 2011 model, DTR-Bench conventions)."""

from fieldrl.domains.chemo.domain import ChemoDomain

DOMAIN = ChemoDomain()

__all__ = ["DOMAIN", "ChemoDomain"]
