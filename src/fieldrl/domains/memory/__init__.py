"""Cue-memory domain: the right final action depends on a cue that is no longer visible."""

from fieldrl.domains.memory.domain import MemoryDomain, MemoryParams

DOMAIN = MemoryDomain()

__all__ = ["DOMAIN", "MemoryDomain", "MemoryParams"]
