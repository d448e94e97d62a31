"""Scenario parameters of the traffic-light domain."""

from __future__ import annotations

import contextlib
import io
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from xml.etree import ElementTree

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from fieldrl.domains.base import SIMULATOR_CHECKS
from fieldrl.domains.traffic.demand import Period
from fieldrl.domains.traffic.networks import (
    RESCO_NETWORKS,
    convert_osm,
    read_sumocfg,
    resco_config,
    sumo_rl_nets,
)
from fieldrl.domains.traffic.rewards import TERMS

RescoName = Literal[RESCO_NETWORKS]  # type: ignore[valid-type]


def resolve_file(value: str) -> Path:
    """A path, or ``sumo-rl:<path>`` for a file bundled with sumo-rl (e.g. its RESCO benchmarks).

    A ``sumo-rl:`` path must stay inside sumo-rl's ``nets`` folder; one that climbs out of it
    resolves to a path that does not exist.
    """
    if value.startswith("sumo-rl:"):
        try:
            nets = sumo_rl_nets().resolve()
        except FileNotFoundError:
            return Path("/nonexistent-sumo-rl") / value[len("sumo-rl:") :]
        path = (nets / value[len("sumo-rl:") :]).resolve()
        return path if path.is_relative_to(nets) else Path("/nonexistent-sumo-rl/outside-nets")
    return Path(value)


@dataclass(frozen=True)
class NetworkSource:
    """The files a scenario's simulation reads besides what fieldrl generates."""

    net_file: Path
    route_files: tuple[Path, ...] = ()
    additional_files: tuple[Path, ...] = ()


def xml_problem(path: Path, root: str) -> str | None:
    """Why ``path`` is not a well-formed XML file whose root element is ``root``, or None."""
    try:
        for _, element in ElementTree.iterparse(path, events=("start",)):
            if element.tag != root:
                return f"root element is <{element.tag}>, expected <{root}>"
            break
        for _, element in ElementTree.iterparse(path):  # the whole file, without keeping it
            element.clear()
    except (ElementTree.ParseError, OSError) as exc:
        return f"not readable as XML ({' '.join(str(exc).split())[:200]})"
    return None


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class PeriodModel(_Strict):
    """One demand period; rates are hourly and per entry."""

    name: str = Field(min_length=1, max_length=40)
    duration_s: int = Field(ge=60, le=86400, description="Length of the period in simulated seconds.")
    vehicles_main: float = Field(ge=0.0, le=3000.0, description="Vehicles per hour per main-road entry.")
    vehicles_side: float = Field(ge=0.0, le=3000.0, description="Vehicles per hour per side-street entry.")
    pedestrians: float = Field(ge=0.0, le=5000.0, description="Pedestrians per hour per entry.")

    def period(self) -> Period:
        return Period(self.name, self.duration_s, self.vehicles_main, self.vehicles_side, self.pedestrians)


DEFAULT_PERIODS = [
    PeriodModel(name="off-peak", duration_s=600, vehicles_main=300, vehicles_side=150, pedestrians=100),
    PeriodModel(name="peak", duration_s=600, vehicles_main=600, vehicles_side=250, pedestrians=150),
    PeriodModel(
        name="pedestrian surge", duration_s=600, vehicles_main=350, vehicles_side=150, pedestrians=450
    ),
]


class TrafficParams(_Strict):
    """A network, its demand over time, signal timing rules and the reward."""

    network: Literal["single", "grid", "arterial"] = Field(
        "single",
        description="Generated layout: one intersection, a 2 x 2 grid, or four signals along an arterial.",
    )
    net_file: str | None = Field(None, description="Your own .net.xml (replaces the generated network).")
    route_file: str | None = Field(
        None, description="Your own .rou.xml (replaces the generated demand; seeds still vary SUMO's draws)."
    )
    resco: RescoName | None = Field(
        None,
        description="A RESCO benchmark network sumo-rl ships, by name: its network, demand, start and "
        "length from its own .sumocfg.",
    )
    sumocfg: str | None = Field(
        None,
        description="Your own SUMO configuration (.sumocfg): net-file, route-files, additional-files, "
        "begin and end are read from it (begin_s and periods given here take precedence).",
    )
    osm_file: str | None = Field(
        None,
        description="An OpenStreetMap extract (.osm XML), converted with SUMO's netconvert (signals where "
        "OSM tags them, sidewalks and crossings guessed); demand generated from periods, or route_file.",
    )
    begin_s: int = Field(
        0,
        ge=0,
        le=10**6,
        description="Simulation start time (s); for route files that start late (RESCO: 25200).",
    )
    lanes: int = Field(2, ge=1, le=4, description="Vehicle lanes per direction on generated networks.")
    arm_m: float = Field(150.0, ge=50.0, le=1000.0, description="Length of the approach arms (m).")
    block_m: float = Field(200.0, ge=80.0, le=1000.0, description="Distance between signals (m).")
    periods: list[PeriodModel] = Field(
        default_factory=lambda: list(DEFAULT_PERIODS), min_length=1, max_length=24
    )
    timing_periods: list[PeriodModel] | None = Field(
        None,
        min_length=1,
        max_length=24,
        description="The demand the standard timings (Webster's program and the advice it gives) are "
        "computed for, where it differs from the demand played (periods): a stress test (`fieldrl stress`, "
        "axes demand and pedestrians) sets it to the run's own periods. None: periods.",
    )
    demand_jitter: float = Field(
        0.2, ge=0.0, le=0.9, description="Each seed scales each entry's rates by U(1-j, 1+j)."
    )
    through_weight: float = Field(3.0, ge=0.1, le=100.0, description="Straight-on vs turn odds per exit.")
    decision_s: int = Field(5, ge=1, le=60, description="Seconds between decisions.")
    min_green_s: int = Field(10, ge=1, le=120)
    max_green_s: int = Field(90, ge=5, le=600)
    yellow_s: int = Field(3, ge=0, le=10)
    all_red_s: int = Field(
        1,
        ge=0,
        le=10,
        description="All-red seconds after each yellow, for every controller: fieldrl's own (learned "
        "policies and the controllers fieldrl drives) and the SUMO programs fieldrl builds for generated "
        "and OpenStreetMap networks. A network file's own programs keep their own phases.",
    )
    ped_clearance_s: int = Field(5, ge=0, le=60, description="Crossings red before the vehicle yellow.")
    pedestrian_stage: bool = Field(
        True, description="Offer an exclusive pedestrian stage (all vehicles red, all crossings green)."
    )
    reward_weights: dict[str, float] | None = Field(
        None, description=f"Weights of reward terms {sorted(TERMS)}; None = demand-adaptive defaults."
    )
    advice: bool = Field(
        False,
        description="A learned entry's own design: show it, for each junction, the stage SUMO's Webster "
        "program would ask for now (one-hot after the rest of the observation); generated demand only.",
    )
    traci: bool = Field(False, description="Run SUMO over TraCI instead of in-process libsumo.")
    gui: bool = Field(False, description="Show sumo-gui (needs traci: true and a display).")

    @field_validator("net_file", "route_file", "sumocfg", "osm_file")
    @classmethod
    def _exists(cls, value: str | None) -> str | None:
        if value is None:
            return value
        path = resolve_file(value)
        if not path.is_file():
            raise ValueError(
                f"file {value!r} does not exist (give a path, or sumo-rl:<path under sumo_rl/nets>)"
            )
        return value

    @field_validator("reward_weights")
    @classmethod
    def _terms(cls, value: dict[str, float] | None) -> dict[str, float] | None:
        if value is not None:
            bad = sorted(set(value) - set(TERMS))
            if bad:
                raise ValueError(f"unknown reward terms {bad}; allowed: {sorted(TERMS)}")
        return value

    @model_validator(mode="after")
    def _files_readable(self) -> TrafficParams:
        """One network source; its files must be SUMO (or OSM) XML with signals SUMO can run."""
        given = [f for f in ("net_file", "sumocfg", "resco", "osm_file") if getattr(self, f) is not None]
        if len(given) > 1:
            raise ValueError(
                f"{' and '.join(given)} both name the network: give one of net_file, sumocfg, resco, osm_file"
            )
        if self.route_file is not None and given and given[0] in ("sumocfg", "resco"):
            raise ValueError(f"route_file: {given[0]} names its own routes; give one or the other")
        for field, root in (("net_file", "net"), ("route_file", "routes"), ("osm_file", "osm")):
            value = getattr(self, field)
            if value is not None:
                problem = xml_problem(resolve_file(value), root)
                if problem:
                    raise ValueError(f"{field} {value!r}: {problem}")
        if given:
            source = self._checked_source(given[0])
            if not SIMULATOR_CHECKS.get():
                return self
            from fieldrl.domains.traffic.env import probe_layouts

            try:
                with contextlib.redirect_stdout(io.StringIO()):  # TraCI prints its connection retries
                    probe_layouts(source.net_file, self.pedestrian_stage)
            except Exception as exc:  # SUMO and TraCI raise many kinds; all mean "not a usable network"
                reason = " ".join(str(exc).split())[:200] or type(exc).__name__
                value = getattr(self, given[0])
                raise ValueError(f"{given[0]} {value!r}: SUMO cannot use its network ({reason})") from None
            self._check_inputs_load(given[0], source)
        return self

    def _check_inputs_load(self, field: str, source: NetworkSource) -> None:
        """SUMO starts on the network with your route and additional files, as every episode does.

        A file SUMO rejects (an additional file naming a lane the network lacks) would otherwise fail
        every held-out episode of the run. RESCO's own files ship with sumo-rl and are not rechecked.
        """
        if field == "resco" or not (source.route_files or source.additional_files):
            return
        from fieldrl.domains.traffic import sumo

        problem = sumo.load_error(source.net_file, source.route_files, source.additional_files, self.begin_s)
        if problem is not None:
            raise ValueError(f"{field} {getattr(self, field)!r}: SUMO refuses to start: {problem}")

    def _checked_source(self, field: str) -> NetworkSource:
        """:meth:`network_source`, with a config's begin and length filled in where not given."""
        value = getattr(self, field)
        try:
            source = self.network_source()
        except (ValueError, RuntimeError) as exc:
            raise ValueError(f"{field} {value!r}: {' '.join(str(exc).split())[:300]}") from None
        assert source is not None
        if field in ("sumocfg", "resco"):
            cfg = read_sumocfg(self._config_path())
            problem = xml_problem(cfg.net_file, "net")
            if problem:
                raise ValueError(f"{field} {value!r}: its net-file {str(cfg.net_file)!r}: {problem}")
            if "begin_s" not in self.model_fields_set and cfg.begin_s is not None:
                self.begin_s = cfg.begin_s
            if "periods" not in self.model_fields_set and cfg.end_s is not None:
                length = cfg.end_s - self.begin_s
                if not 60 <= length <= 86400:
                    raise ValueError(
                        f"{field} {value!r}: begin {self.begin_s} s to end {cfg.end_s} s is not 60..86400 s; "
                        "give periods"
                    )
                self.periods = [
                    PeriodModel(name=f"{field} {value}"[:40], duration_s=length, vehicles_main=0.0,
                                vehicles_side=0.0, pedestrians=0.0)
                ]  # fmt: skip
        return source

    def _config_path(self) -> Path:
        return resco_config(self.resco) if self.resco is not None else resolve_file(self.sumocfg or "")

    def network_source(self) -> NetworkSource | None:
        """The network and demand files the simulation reads (None: fieldrl generates both).

        Runs ``netconvert`` for an OpenStreetMap extract (once; the result is cached).
        """
        routes = (resolve_file(self.route_file),) if self.route_file is not None else ()
        if self.resco is not None or self.sumocfg is not None:
            cfg = read_sumocfg(self._config_path())
            return NetworkSource(cfg.net_file, cfg.route_files, cfg.additional_files)
        if self.osm_file is not None:
            return NetworkSource(convert_osm(resolve_file(self.osm_file), self.all_red_s), routes)
        if self.net_file is not None:
            return NetworkSource(resolve_file(self.net_file), routes)
        return None

    @property
    def generated_programs(self) -> bool:
        """True when netgenerate or netconvert built the network's signal programs here (generated or
        OSM networks), with ``all_red_s`` after each yellow."""
        return self.net_file is None and self.sumocfg is None and self.resco is None

    @property
    def own_demand(self) -> bool:
        """True when route files (yours, a config's or RESCO's) replace the generated demand."""
        source = self.network_source() if self.osm_file is None else None
        return self.route_file is not None or bool(source and source.route_files)

    @model_validator(mode="after")
    def _consistent(self) -> TrafficParams:
        if self.max_green_s < self.min_green_s:
            raise ValueError(f"max_green_s ({self.max_green_s}) must be >= min_green_s ({self.min_green_s})")
        if self.gui and not self.traci:
            raise ValueError("gui: true needs traci: true (libsumo has no GUI)")
        if self.route_file is not None and self.net_file is None and self.osm_file is None:
            raise ValueError("route_file needs net_file or osm_file")
        if self.begin_s > 0 and not self.own_demand:
            raise ValueError(
                f"begin_s ({self.begin_s}) needs your own routes (route_file, or a sumocfg or RESCO network "
                "naming route files); generated demand starts at 0"
            )
        if self.timing_periods is not None and self.own_demand:
            raise ValueError(
                "the demand and pedestrians stress axes move the generated demand (periods); this network "
                "brings its own routes (route_file, or a sumocfg or RESCO network naming route files)"
            )
        if self.advice and self.own_demand:
            raise ValueError(
                "advice shows Webster's timing, which fieldrl builds only for generated demand; this network "
                "brings its own routes (route_file, or a sumocfg or RESCO network naming route files)"
            )
        return self

    @property
    def duration_s(self) -> int:
        return sum(p.duration_s for p in self.periods)
