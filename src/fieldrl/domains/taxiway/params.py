"""Scenario parameters of the taxiway domain."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from fieldrl.simulators.airport.engine import KT_PER_MPS
from fieldrl.simulators.airport.layout import MAX_CELLS, MAX_NODES, MAX_SPAN_M
from fieldrl.simulators.airport.osm import MAX_VERTICES

LAYOUTS = ("small", "large")
#: largest layout file read (an OpenStreetMap export of a large airport is a few MB)
MAX_LAYOUT_BYTES = 50 << 20
#: movements per hour of the named densities, per layout
DENSITIES: dict[str, dict[str, float]] = {
    "small": {"low": 20.0, "medium": 35.0, "high": 50.0},
    "large": {"low": 40.0, "medium": 70.0, "high": 100.0},
}


class RewardWeights(BaseModel):
    """Weights of the separate reward terms (reward = sum of weight x term)."""

    model_config = ConfigDict(extra="forbid")

    safety: float = Field(10.0, ge=0.0, le=1000.0, description="Per new conflict (-1) and near-separation.")
    efficiency: float = Field(
        0.1,
        ge=0.0,
        le=100.0,
        description="Per step taxiing (-1) and holding (-0.5); remaining cells if stranded.",
    )
    progress: float = Field(0.1, ge=0.0, le=100.0, description="Per cell closer to the goal; +5 on arrival.")


class TaxiwayParams(BaseModel):
    """An airport layout, a traffic density and the engine's resolution."""

    model_config = ConfigDict(extra="forbid")

    layout: Literal["small", "large"] = Field("small", description="Shipped layout: small or large.")
    layout_file: str | None = Field(
        None,
        description="Your own layout file (.yaml, or .geojson OSM aeroway export); replaces layout. At most "
        f"{MAX_SPAN_M / 1000:g} km across, {MAX_NODES:,} nodes ({MAX_VERTICES:,} GeoJSON coordinates) and "
        f"{MAX_CELLS:,} cells of cell_m.",
    )
    density: Literal["low", "medium", "high"] | None = Field(
        "low", description="Named traffic density (see DENSITIES); ignored if movements_per_hour is set."
    )
    movements_per_hour: float | None = Field(
        None, gt=0.0, le=200.0, description="Poisson rate of movements; overrides density."
    )
    departure_share: float = Field(0.5, ge=0.0, le=1.0, description="Share of movements that are departures.")
    horizon_min: float = Field(
        30.0, ge=1.0, le=600.0, description="Minutes over which movements are generated."
    )
    drain_min: float = Field(
        20.0, ge=0.0, le=600.0, description="Minutes after the horizon before truncation."
    )
    cell_m: float = Field(60.0, ge=10.0, le=500.0, description="Cell length in metres.")
    dt_s: float = Field(5.0, ge=0.5, le=60.0, description="Seconds per step (one cell per step at most).")
    separation_cells: int = Field(2, ge=1, le=10, description="Conflict if fewer cells apart than this.")
    approach_steps: int = Field(6, ge=0, le=100, description="Steps before touchdown the runway is active.")
    roll_steps: int = Field(8, ge=1, le=100, description="Landing roll-out / take-off roll in steps.")
    max_slots: int = Field(16, ge=1, le=256, description="Most aircraft taxiing at once (agent slots).")
    safety_mask: bool = Field(
        True,
        strict=True,
        description="Mask moves that make a conflict whatever the others do (occupied cell, oncoming "
        "aircraft in the segment, active runway); false masks only what the layout forbids.",
    )
    detour_after: int | None = Field(
        None,
        ge=0,
        le=100,
        strict=True,
        description="If set, mask moves at a node that take an aircraft farther from its goal until it "
        "has held this many steps in a row (no circling; detours only after waiting). None: no such mask.",
    )
    horizon_cells: int = Field(8, ge=1, le=50, description="Foresight horizon along the own path, in cells.")
    advice: bool = Field(
        False,
        strict=True,
        description="Also show each aircraft the move prioritized planning would make now (one-hot after "
        "the rest of the observation), planned around the moves actually made; the policy may follow it.",
    )
    weights: RewardWeights = Field(default_factory=RewardWeights, description="Reward term weights.")
    train_weights: RewardWeights | None = Field(
        None,
        description="Reward term weights a learned policy trains on, if not weights; validation, model "
        "selection and the held-out return keep weights, so every policy is scored on the same return.",
    )

    @model_validator(mode="after")
    def _layout_file_exists(self) -> TaxiwayParams:
        if self.layout_file is not None:
            path = Path(self.layout_file)
            if path.suffix.lower() not in (".yaml", ".yml", ".geojson", ".json"):
                raise ValueError(
                    f"layout_file {self.layout_file!r}: must end in .yaml, .yml, .geojson or .json"
                )
            if not path.is_file():
                raise ValueError(f"layout_file {self.layout_file!r}: no such file")
            if path.stat().st_size > MAX_LAYOUT_BYTES:
                raise ValueError(f"layout_file {self.layout_file!r}: larger than {MAX_LAYOUT_BYTES:,} bytes")
            from fieldrl.domains.taxiway.env import shared_surface

            try:
                shared_surface(self.layout, self.cell_m, self.separation_cells, self.layout_file)
            except Exception as exc:  # YAML, JSON and geometry errors alike: not a usable layout
                reason = " ".join(str(exc).split())[:200] or type(exc).__name__
                raise ValueError(
                    f"layout_file {self.layout_file!r}: not a usable layout ({reason})"
                ) from None
        return self

    @model_validator(mode="after")
    def _speed_in_range(self) -> TaxiwayParams:
        kt = self.cell_m / self.dt_s * KT_PER_MPS
        if not 20.0 <= kt <= 30.0:
            raise ValueError(
                f"cell_m / dt_s gives a taxi speed of {kt:.1f} kt; allowed 20-30 kt (e.g. cell_m 60, dt_s 5)"
            )
        return self

    def rate(self) -> float:
        if self.movements_per_hour is not None:
            return float(self.movements_per_hour)
        return DENSITIES["large" if self.layout_file else self.layout][self.density or "low"]
