"""The training record a weights file carries in its header: what training did, as the model counted it.

Kept apart from :mod:`fieldrl.policies.weights` (which needs torch) so that readers of run folders,
the report among them, can check a record's shape without importing the RL stack.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, NonNegativeInt

#: version of the record's layout
FORMAT = 1


class SelectedCheckpoint(BaseModel):
    """The validation checkpoint a trained model kept: when, after how many updates, its score."""

    model_config = ConfigDict(extra="forbid", strict=True)
    timesteps: NonNegativeInt
    gradient_updates: NonNegativeInt
    value: float
    kpi: str


class FineTuneSchedule(BaseModel):
    """The ``fine_tune`` section as it ran, in env steps."""

    model_config = ConfigDict(extra="forbid", strict=True)
    critic_warmup: NonNegativeInt
    actor_ramp: NonNegativeInt
    pull_weight: float
    pull_fade: NonNegativeInt
    guide_horizon: NonNegativeInt = 0
    guide_stages: NonNegativeInt = 0
    #: optimiser steps the pull took, beside the learner's own gradient updates (written from 2026-12-07)
    pull_updates: NonNegativeInt = 0


class TrainingRecord(BaseModel):
    """The header's training record, as :mod:`fieldrl.policies.learned` writes it."""

    model_config = ConfigDict(extra="forbid", strict=True)
    format: int = FORMAT
    algorithm: str
    num_timesteps: NonNegativeInt
    gradient_updates: NonNegativeInt
    selected: SelectedCheckpoint | None = None
    fine_tune: FineTuneSchedule | None = None
