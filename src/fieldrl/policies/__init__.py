"""Policies: the Policy protocol, learned-model wrappers and the algorithm registry."""

from fieldrl.policies.base import Policy

__all__ = ["Policy"]
