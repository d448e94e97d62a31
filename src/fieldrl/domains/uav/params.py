"""Scenario parameters of the UAV domain (defined beside the engine, which reads them)."""

from fieldrl.simulators.uav.params import UavParams

__all__ = ["UavParams"]
