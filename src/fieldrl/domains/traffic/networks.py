"""Road networks built with SUMO's own ``netgenerate``, cached by their options.

Three layouts, all with sidewalks, zebra-free signalised crossings and walking areas
(``--sidewalks.guess --crossings.guess --walkingareas``) and signals only at the inner
junctions (``--tls.set``); fringe nodes are plain dead ends where traffic enters and leaves:

* ``single``: one four-arm intersection (netgenerate grid 1 x 1 with attached arms);
* ``grid``: 2 x 2 signalised intersections;
* ``arterial``: four signalised intersections in a row along a main road.

Files are written once per distinct option set into a cache folder (``FIELDRL_TRAFFIC_DIR`` or
``~/.cache/fieldrl/traffic``) with atomic renames, so parallel workers can share them.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from fieldrl.domains.traffic import sumo

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
