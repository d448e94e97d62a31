"""Scenario parameters of the rail domain."""

from __future__ import annotations

import math
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from fieldrl.domains.base import SIMULATOR_CHECKS
from fieldrl.domains.rail.levels import (
    ENV_FILE_BUDGET,
    ENV_FILE_MAX_BYTES,
    LEVELS,
    MAX_GRID_SIDE,
    MAX_STEPS,
    MAX_TRAINS,
    Level,
    make_rail_env,
    read_env_file,
)

LevelIndex = Annotated[int, Field(strict=True, ge=0, le=4)]


class SpeedShare(BaseModel):
    """One speed class of trains."""

    model_config = ConfigDict(extra="forbid", strict=True)

    speed: float = Field(gt=0.0, le=1.0, description="Cells per step (Flatland: 1, 1/2, 1/3, ...).")
    share: float = Field(ge=0.0, le=1.0, description="Share of the trains at this speed.")


class FlatlandConfig(BaseModel):
    """Your own Flatland configuration: each field given replaces the ``level`` preset's value."""

    model_config = ConfigDict(extra="forbid", strict=True)

    trains: int | None = Field(None, ge=1, le=MAX_TRAINS, description="Number of trains.")
    width: int | None = Field(None, ge=10, le=MAX_GRID_SIDE, description="Grid columns (Flatland's x_dim).")
    height: int | None = Field(None, ge=10, le=MAX_GRID_SIDE, description="Grid rows (Flatland's y_dim).")
    cities: int | None = Field(None, ge=2, le=100, description="Cities the sparse generator tries to place.")
    max_rails_between_cities: int | None = Field(
        None, ge=1, le=8, description="Parallel rails between cities."
    )
    max_rail_pairs_in_city: int | None = Field(
        None, ge=1, le=8, description="Pairs of station rails per city."
    )
    grid_mode: bool | None = Field(None, description="Cities on a regular grid instead of at random places.")
    speed_profile: list[SpeedShare] | None = Field(
        None, min_length=1, max_length=10, description="Speed classes; shares sum to 1."
    )
    malfunction_interval: int | None = Field(
        None, ge=0, le=10**7, description="Mean steps between malfunctions of one train; 0 = none."
    )
    malfunction_min: int | None = Field(None, ge=1, le=10**4, description="Shortest malfunction (steps).")
    malfunction_max: int | None = Field(None, ge=1, le=10**4, description="Longest malfunction (steps).")
    step_limit: int | None = Field(
        None,
        ge=10,
        le=MAX_STEPS,
        description="Episode length in steps; unset = Flatland's own (from the timetable).",
    )

    @field_validator("speed_profile")
    @classmethod
    def _shares(cls, value: list[SpeedShare] | None) -> list[SpeedShare] | None:
        if value is not None:
            total = sum(s.share for s in value)
            if not math.isclose(total, 1.0, abs_tol=1e-6):
                raise ValueError(f"shares must sum to 1, got {total:g}")
            speeds = [s.speed for s in value]
            if len(set(speeds)) != len(speeds):
                raise ValueError(f"each speed once, got {speeds}")
        return value

    def apply(self, preset: Level) -> Level:
        """``preset`` with this configuration's fields in place of its own."""
        fields = self.model_dump(exclude={"speed_profile"})
        level = preset.with_changes(**fields)
        if self.speed_profile is not None:
            level = level.with_changes(speed_profile=tuple((s.speed, s.share) for s in self.speed_profile))
        return level


@lru_cache(maxsize=256)
def build_failure(level: Level) -> str | None:
    """Why Flatland cannot build ``level`` (with seed 0), or None when it can.

    Cached: one scenario checks the same configuration for every stress point and at every step of
    ``validate`` and ``run``, and a build takes a good part of a second; a ``Level`` is frozen.
    """
    try:
        make_rail_env(level, 0)
    except Exception as exc:  # Flatland's generators raise ValueError and others for impossible layouts
        return " ".join(str(exc).split())[:200] or type(exc).__name__
    return None


class RailParams(BaseModel):
    """A Flatland 3 test level and how the controller meets it."""

    model_config = ConfigDict(extra="forbid", strict=True)

    level: LevelIndex = Field(
        0,
        description="Flatland 3 test level (a preset): 0 (7 trains, 30x30, 2 cities), 1 (10, 30x30, 2), "
        "2 (20, 30x30, 3), 3 (50, 30x35, 3), 4 (80, 35x30, 5).",
    )
    flatland: FlatlandConfig | None = Field(
        None, description="Your own Flatland configuration; fields not given come from the `level` preset."
    )
    env_file: str | None = Field(
        None,
        description="A Flatland environment saved with RailEnvPersister.save(env, 'name.pkl'): its network, "
        "trains and timetable; each seed draws the malfunctions. At most "
        f"{ENV_FILE_MAX_BYTES >> 20} MiB, building at most {ENV_FILE_BUDGET >> 20} MiB when read, "
        f"{MAX_GRID_SIDE} cells a side and {MAX_TRAINS} trains.",
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
    advice: bool = Field(
        False,
        description="semi mode, a learned entry's own design: show the policy what the priority dispatcher "
        "would decide for the train now (its default settings, shield_paths paths), as 8 more observation "
        "entries; the policy learns when to follow it. Dispatchers ignore it.",
    )
    team_reward: float = Field(
        0.0,
        ge=0.0,
        le=1.0,
        description="A learned entry's own design: share of each train's reward that is the team's mean "
        "(0 = its own reward only, 1 = every train is rewarded with the team's mean, so waiting for others "
        "is credited with what they gain).",
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

    @model_validator(mode="after")
    def _advice_needs_semi(self) -> RailParams:
        if self.advice and self.mode != "semi":
            raise ValueError("advice applies to mode 'semi' only (the dispatcher's decisions are semi's)")
        return self

    @model_validator(mode="after")
    def _buildable(self) -> RailParams:
        """A configuration Flatland can build, a readable environment file, and not both."""
        if self.env_file is not None and self.flatland is not None:
            raise ValueError("env_file fixes network and trains; give env_file or flatland, not both")
        if self.curriculum and (self.env_file is not None or self.flatland is not None):
            raise ValueError(
                "curriculum samples the built-in levels; it cannot be combined with flatland or env_file"
            )
        if self.env_file is not None:
            path = Path(self.env_file)
            if not path.is_file():
                raise ValueError(f"env_file {self.env_file!r} does not exist")
            try:
                read_env_file(path)
            except ValueError as exc:
                raise ValueError(f"env_file {self.env_file!r}: {exc}") from None
        if self.flatland is not None:
            level = self.configuration()
            if level.malfunction_min > level.malfunction_max:
                raise ValueError(
                    f"flatland.malfunction_min ({level.malfunction_min}) must not exceed "
                    f"flatland.malfunction_max ({level.malfunction_max})"
                )
            if not SIMULATOR_CHECKS.get():
                return self
            reason = build_failure(level)
            if reason is not None:
                raise ValueError(f"flatland: Flatland cannot build this configuration ({reason})")
        return self

    def configuration(self) -> Level:
        """The Flatland configuration evaluated: the ``level`` preset with ``flatland`` applied."""
        preset = LEVELS[self.level]
        return self.flatland.apply(preset) if self.flatland is not None else preset
