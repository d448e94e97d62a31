"""Scenario parameters of the chemotherapy domain."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from fieldrl.simulators.chemo import PRESETS, ChemoNoise

PresetName = Literal["s1", "s2", "s3", "s4", "s5"]


def _level(description: str) -> float | None:
    return Field(None, ge=0.0, le=1.0, description=description)


class ChemoParams(BaseModel):
    """A DTR-Bench noise setting, optionally with some noise levels overridden."""

    model_config = ConfigDict(extra="forbid")

    preset: PresetName = Field(
        "s1",
        description="DTR-Bench setting: s1 no noise; s2 PK/PD variability; s3/s4 add "
        "observation and process noise; s5 as s4 with half the observations missing.",
    )
    obs_noise: float | None = _level(
        "Multiplicative observation noise on [T, I, B]; None takes the preset's."
    )
    state_noise: float | None = _level(
        "Process-noise s.d. on each derivative and initial-state spread; None takes the preset's."
    )
    pkpd_noise: float | None = _level(
        "Patient parameter spread (each parameter within +/- half this fraction of nominal); "
        "None takes the preset's."
    )
    missing_rate: float | None = _level(
        "Probability that a step's observation is missing and the previous one repeated; "
        "None takes the preset's."
    )
    max_t: int = Field(600, ge=1, le=10000, description="Steps per episode (0.25 day each).")

    def noise(self) -> ChemoNoise:
        """The preset's noise levels with any non-None override applied."""
        base = PRESETS[self.preset]
        return ChemoNoise(
            obs_noise=base.obs_noise if self.obs_noise is None else self.obs_noise,
            state_noise=base.state_noise if self.state_noise is None else self.state_noise,
            pkpd_noise=base.pkpd_noise if self.pkpd_noise is None else self.pkpd_noise,
            missing_rate=base.missing_rate if self.missing_rate is None else self.missing_rate,
        )
