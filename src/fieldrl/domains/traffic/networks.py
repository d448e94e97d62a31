"""Road networks built with SUMO's own ``netgenerate``, cached by their options.

Three layouts, all with sidewalks, zebra-free signalised crossings and walking areas
(``--sidewalks.guess --crossings.guess --walkingareas``) and signals only at the inner
junctions (``--tls.set``); fringe nodes are plain dead ends where traffic enters and leaves:

* ``single``: one four-arm intersection (netgenerate grid 1 x 1 with attached arms);
* ``grid``: 2 x 2 signalised intersections;
* ``arterial``: four signalised intersections in a row along a main road.

Files are written once per distinct option set into a cache folder (``FIELDRL_TRAFFIC_DIR`` or
``~/.cache/fieldrl/traffic``) with atomic renames, so parallel workers can share them.

Other networks: a RESCO benchmark network sumo-rl ships, by name (:func:`resco_config`, its own
``.sumocfg``), any SUMO configuration file (:func:`read_sumocfg`: net, routes, additional files,
begin and end), or an OpenStreetMap extract converted by SUMO's ``netconvert``
(:func:`convert_osm`, cached by the extract's content).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import math
import os
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from xml.etree import ElementTree

from fieldrl.domains.traffic import sumo

#: yellow and pedestrian-clearance seconds of the signal programs netgenerate/netconvert build
#: (their defaults; only the all-red follows the scenario, ``NetworkOptions.all_red_s``)
NETCONVERT_YELLOW_CLEARANCE = (3, 5)

LAYOUTS = {
    # layout: (x junctions, y junctions)
    "single": (1, 1),
    "grid": (2, 2),
    "arterial": (4, 1),
}


def cache_root() -> Path:
    root = Path(os.environ.get("FIELDRL_TRAFFIC_DIR", Path.home() / ".cache" / "fieldrl" / "traffic"))
    root.mkdir(parents=True, exist_ok=True)
    return root


def digest(obj: object) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()[:12]


def write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)


@dataclass(frozen=True)
class NetworkOptions:
    """What netgenerate is told; every field changes the cached file name."""

    layout: str = "single"
    block_m: float = 200.0
    arm_m: float = 150.0
    lanes: int = 2
    speed_ms: float = 13.89
    #: all-red seconds after each yellow of netgenerate's fixed-time programs (the scenario's
    #: ``all_red_s``, so SUMO's programs change stage on the same intergreen as fieldrl's controller)
    all_red_s: int = 0

    def junction_ids(self) -> list[str]:
        nx, ny = LAYOUTS[self.layout]
        return [f"{chr(ord('A') + i)}{j}" for i in range(nx) for j in range(ny)]


def build_network(opts: NetworkOptions) -> Path:
    """Generate (or reuse) the ``.net.xml`` for ``opts`` and return its path."""
    nx, ny = LAYOUTS[opts.layout]
    path = cache_root() / f"{opts.layout}-{digest(opts.__dict__)}.net.xml"
    if path.exists():
        return path
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}.", suffix=".net.xml")
    os.close(fd)
    cmd = [
        sumo.binary("netgenerate"),
        "--grid",
        "--grid.x-number", str(nx),
        "--grid.y-number", str(ny),
        "--grid.length", str(opts.block_m),
        "--grid.attach-length", str(opts.arm_m),
        "--default.lanenumber", str(opts.lanes),
        "--default.speed", str(opts.speed_ms),
        "--sidewalks.guess",
        "--crossings.guess",
        "--walkingareas",
        "--tls.set", ",".join(opts.junction_ids()),
        "--tls.default-type", "static",
        "--tls.allred.time", str(opts.all_red_s),
        "--no-turnarounds", "true",
        "--seed", "1",
        "--output-file", tmp,
    ]  # fmt: skip
    result = subprocess.run(
        cmd, capture_output=True, text=True, env={**os.environ, "SUMO_HOME": str(sumo.SUMO_HOME)}
    )
    if result.returncode != 0:
        Path(tmp).unlink(missing_ok=True)
        raise RuntimeError(f"netgenerate failed: {result.stderr.strip()[-500:]}")
    os.replace(tmp, path)
    return path


#: RESCO benchmark networks bundled with sumo-rl (Ault & Sharon 2021), each with its own .sumocfg
RESCO_NETWORKS = (
    "arterial4x4",
    "cologne1",
    "cologne3",
    "cologne8",
    "grid4x4",
    "ingolstadt1",
    "ingolstadt7",
    "ingolstadt21",
)
#: netconvert options for OpenStreetMap extracts: SUMO's recommendations for OSM imports (join
#: clustered junctions and signals, guess ramps and roundabouts), signals where OSM tags them,
#: sidewalks, crossings and walking areas for pedestrians, fixed-time programs as netgenerate builds
OSM_OPTIONS = (
    "--geometry.remove", "--roundabouts.guess", "--ramps.guess",
    "--junctions.join", "--tls.guess-signals", "--tls.discard-simple", "--tls.join",
    "--tls.default-type", "static",
    "--sidewalks.guess", "--crossings.guess", "--walkingareas",
    "--no-turnarounds", "true", "--seed", "1",
)  # fmt: skip


def sumo_rl_nets() -> Path:
    """The ``nets`` folder of the installed sumo-rl package."""
    spec = importlib.util.find_spec("sumo_rl")
    if spec is None or spec.origin is None:
        raise FileNotFoundError("sumo-rl is not installed: its RESCO networks are not available")
    return Path(spec.origin).parent / "nets"


def resco_config(name: str) -> Path:
    """The ``.sumocfg`` of RESCO network ``name`` (one of :data:`RESCO_NETWORKS`)."""
    if name not in RESCO_NETWORKS:
        raise ValueError(f"unknown RESCO network {name!r}; allowed: {', '.join(RESCO_NETWORKS)}")
    return sumo_rl_nets() / "RESCO" / name / f"{name}.sumocfg"


@dataclass(frozen=True)
class SumoConfig:
    """What a SUMO configuration file names: its network, demand and simulated time."""

    net_file: Path
    route_files: tuple[Path, ...]
    additional_files: tuple[Path, ...]
    begin_s: int | None
    end_s: int | None


def read_sumocfg(path: Path) -> SumoConfig:
    """The input files (relative to the file's folder, as SUMO resolves them) and times of a ``.sumocfg``.

    :raises ValueError: not SUMO configuration XML, no ``net-file``, a listed file missing, a bad time.
    """
    try:
        root = ElementTree.parse(path).getroot()
    except (ElementTree.ParseError, OSError) as exc:
        raise ValueError(f"not readable as XML ({' '.join(str(exc).split())[:200]})") from None
    if root.tag not in ("configuration", "sumoConfiguration"):
        raise ValueError(f"root element is <{root.tag}>, expected <configuration>")

    def value(name: str) -> str | None:
        found = root.find(f".//{name}")
        return None if found is None else (found.get("value") or "").strip()

    def files(name: str) -> tuple[Path, ...]:
        listed = [f.strip() for f in (value(name) or "").replace(" ", ",").split(",") if f.strip()]
        out = tuple(path.parent / f for f in listed)
        missing = [str(f) for f in out if not f.is_file()]
        if missing:
            raise ValueError(f"{name} lists {missing[0]!r}, which does not exist")
        return out

    def seconds(name: str) -> int | None:
        text = value(name)
        if not text:
            return None
        try:
            number = float(text)
        except ValueError:
            raise ValueError(f"{name} {text!r} is not a number of seconds") from None
        if not (math.isfinite(number) and 0 <= number <= 10**7):
            raise ValueError(f"{name} {text!r} is outside 0..10000000 s")
        return int(number)

    nets = files("net-file")
    if len(nets) != 1:
        raise ValueError("it names no net-file" if not nets else "it names several net-files")
    return SumoConfig(
        nets[0], files("route-files"), files("additional-files"), seconds("begin"), seconds("end")
    )


def file_digest(path: Path) -> str:
    """SHA-256 (first 12 hex digits) of a file's content."""
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()[:12]


def convert_osm(osm_file: Path, all_red_s: int = 0) -> Path:
    """Convert an OpenStreetMap extract with SUMO's ``netconvert`` (or reuse the cached result).

    The cached file is named by a hash of the extract's content and the options
    (:data:`OSM_OPTIONS`, ``all_red_s``: the all-red after each yellow of the fixed-time programs
    it builds), never by the user's path, so it always lands inside the cache folder.

    :raises RuntimeError: netconvert failed (its last message).
    """
    options = (*OSM_OPTIONS, "--tls.allred.time", str(all_red_s))
    path = cache_root() / "osm" / f"osm-{digest([file_digest(osm_file), options])}.net.xml"
    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}.", suffix=".net.xml")
    os.close(fd)
    cmd = [sumo.binary("netconvert"), "--osm-files", str(osm_file), *options, "--output-file", tmp]
    result = subprocess.run(
        cmd, capture_output=True, text=True, env={**os.environ, "SUMO_HOME": str(sumo.SUMO_HOME)}
    )
    if result.returncode != 0 or os.path.getsize(tmp) == 0:
        Path(tmp).unlink(missing_ok=True)
        lines = [ln for ln in (result.stderr or result.stdout).splitlines() if ln.startswith("Error")]
        raise RuntimeError(f"netconvert failed: {(lines[-1] if lines else result.stderr.strip())[-300:]}")
    os.replace(tmp, path)
    return path


@dataclass(frozen=True)
class Fringe:
    """Where traffic enters and leaves the network: one dead-end node and its two edges."""

    node: str
    entry: str  # edge into the network
    exit: str  # edge out of the network
    heading: float  # direction of travel on the entry edge, radians
    main: bool  # True on the arterial's main road (horizontal)


def fringes(net_file: Path) -> list[Fringe]:
    """Entry/exit edge pairs at every dead-end node of ``net_file`` (read with sumolib)."""
    import sumolib

    net = sumolib.net.readNet(str(net_file), withPedestrianConnections=True)
    out = []
    for node in net.getNodes():
        inc = [e for e in node.getIncoming() if not e.getID().startswith(":") and e.allows("passenger")]
        outg = [e for e in node.getOutgoing() if not e.getID().startswith(":") and e.allows("passenger")]
        if len(inc) != 1 or len(outg) != 1:
            continue
        entry, exit_ = outg[0], inc[0]
        (x0, y0), (x1, y1) = entry.getFromNode().getCoord(), entry.getToNode().getCoord()
        heading = math.atan2(y1 - y0, x1 - x0)
        out.append(Fringe(node.getID(), entry.getID(), exit_.getID(), heading, abs(math.cos(heading)) > 0.7))
    return sorted(out, key=lambda f: f.node)
