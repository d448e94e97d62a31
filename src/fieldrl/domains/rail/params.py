"""Scenario parameters of the rail domain."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

LevelIndex = Annotated[int, Field(strict=True, ge=0, le=4)]


class RailParams(BaseModel):
    """A Flatland 3 test level and how the controller meets it."""

    model_config = ConfigDict(extra="forbid", strict=True)

    level: LevelIndex = Field(
        0,
        description="Flatland 3 test level: 0 (7 trains, 30x30, 2 cities), 1 (10, 30x30, 2), "
        "2 (20, 30x30, 3), 3 (50, 30x35, 3), 4 (80, 35x30, 5).",
    )
    mode: Literal["semi", "monolithic"] = Field(
        "semi",
        description="semi: dispatch and routing decisions only where a choice exists (semi-hierarchical); "
        "monolithic: every train picks one of Flatland's 5 actions every step.",
    )
    hold_steps: int = Field(
        5, ge=1, le=100, description="Steps a held or stopped train waits before it is asked again."
    )
    wait_cost: float = Field(
        0.0,
        ge=0.0,
        le=100.0,
        description="Reward shaping: cost per step of a train standing still though it could be on its way "
        "(held at its origin once it may depart, or stopped on the map), as a fraction of the episode's step "
        "limit: a train kept waiting the whole episode costs wait_cost. 0 = none.",
    )
    horizon: int = Field(40, ge=5, le=200, description="Look-ahead cells of the observation builder.")
    shield: bool = Field(
        False,
        description="semi mode: mask a learned policy's departures and switch exits that would meet another "
        "train's reserved path head-on (the deadlock-avoiding dispatcher's reservation rule as a safety "
        "shield); the policy still decides when trains depart, wait, are cancelled, reroute or stop.",
    )
    shield_paths: int = Field(
        4, ge=1, le=10, description="Shortest paths a shielded departure may take (the first free one)."
    )
    curriculum: list[LevelIndex] = Field(
        default_factory=list,
        max_length=5,
        description="Training only: levels sampled at each training reset, easiest favoured first and the "
        "last favoured by the end of curriculum_episodes; empty = train on `level`. Evaluation always uses "
        "`level`.",
    )
    curriculum_episodes: int = Field(
        200, ge=1, le=10**7, description="Training episodes (per env copy) over which the curriculum moves."
    )

    @model_validator(mode="after")
    def _shield_needs_semi(self) -> RailParams:
        if self.shield and self.mode != "semi":
            raise ValueError("shield applies to mode 'semi' only (monolithic trains choose every step)")
        return self
