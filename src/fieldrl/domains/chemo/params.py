"""Scenario parameters of the chemotherapy domain."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationInfo, field_validator

from fieldrl.domains.chemo.cohort import load_cohort
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
    cohort_file: str | None = Field(
        None,
        min_length=1,
        max_length=1000,
        description="Your own held-out patients: a .csv of model parameters, one row per patient, row i "
        "for the i-th held-out seed (path relative to the scenario file). Training and validation "
        "patients are still drawn from the preset.",
    )
    cohort_sha256: str | None = Field(
        None,
        pattern=r"^[0-9a-f]{64}$",
        description="Filled in when the scenario is loaded: the cohort file's digest, so a run "
        "re-evaluated later refuses a file that has changed since.",
    )
    #: the scenario's held-out seeds, in order, once bound by ``ChemoDomain.held_out_params``
    _held_out_seeds: tuple[int, ...] | None = PrivateAttr(None)

    @field_validator("cohort_file")
    @classmethod
    def _cohort_readable(cls, value: str | None) -> str | None:
        if value is not None:
            load_cohort(value)  # every problem with the file is a one-line ValueError
        return value

    @field_validator("cohort_sha256")
    @classmethod
    def _cohort_unchanged(cls, value: str | None, info: ValidationInfo) -> str | None:
        path = info.data.get("cohort_file")
        if value is not None and path is not None and load_cohort(path).sha256 != value:
            raise ValueError(
                f"{path} has changed since this scenario was loaded (its SHA-256 differs); "
                "restore the file the run used, or start a new run"
            )
        return value

    def noise(self) -> ChemoNoise:
        """The preset's noise levels with any non-None override applied."""
        base = PRESETS[self.preset]
        return ChemoNoise(
            obs_noise=base.obs_noise if self.obs_noise is None else self.obs_noise,
            state_noise=base.state_noise if self.state_noise is None else self.state_noise,
            pkpd_noise=base.pkpd_noise if self.pkpd_noise is None else self.pkpd_noise,
            missing_rate=base.missing_rate if self.missing_rate is None else self.missing_rate,
        )
