"""Write the two shipped layouts (``small.yaml``, ``large.yaml``); run ``python make_layouts.py``.

Both are schematic: distances are rounded and nothing is surveyed. See ``docs/taxiway.md``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).parent


def _node(
    nodes: list[dict[str, Any]], nid: str, kind: str, x: float, y: float, runway: str | None = None
) -> str:
    row: dict[str, Any] = {"id": nid, "kind": kind, "x": float(x), "y": float(y)}
    if runway:
        row["runway"] = runway
    nodes.append(row)
    return nid


def small() -> dict[str, Any]:
    """Single mixed-use runway 09/27 with a full parallel taxiway A, two line-up points, three exits
    and one apron taxilane P with nine stands (the standard regional layout of ICAO Doc 9157 Part 2)."""
    nodes: list[dict[str, Any]] = []
    edges: list[dict[str, Any]] = []
    rw = "09/27"
    a = [_node(nodes, f"A{i}", "intersection", 300 * i, 240) for i in range(9)]
    for u, v in zip(a, a[1:], strict=False):
        edges.append({"from": u, "to": v, "name": "A"})
    for i, x in ((1, 0), (2, 600)):
        h = _node(nodes, f"H{i}", "hold_short", x, 120, rw)
        e = _node(nodes, f"E{i}", "runway_entry", x, 0, rw)
        edges += [{"from": a[x // 300], "to": h}, {"from": h, "to": e}]
    for i, x in enumerate((1200, 1800, 2400), start=1):
        xn = _node(nodes, f"X{i}", "runway_exit", x, 120, rw)
        edges.append({"from": xn, "to": a[x // 300]})
    p = [_node(nodes, f"P{i}", "intersection", 600 + 150 * i, 480) for i in range(9)]
    for u, v in zip(p, p[1:], strict=False):
        edges.append({"from": u, "to": v, "name": "P"})
    edges += [{"from": a[3], "to": p[2], "name": "L1"}, {"from": a[5], "to": p[6], "name": "L2"}]
    for i, pn in enumerate(p):
        s = _node(nodes, f"S{i + 1}", "stand", 600 + 150 * i, 600)
        edges.append({"from": pn, "to": s})
    return {
        "name": "small regional airport (schematic)",
        "source": "schematic single-runway layout after ICAO Doc 9157 Aerodrome Design Manual Part 2 "
        "(full parallel taxiway, line-up points, exits, one apron); not a real airport",
        "runways": [{"id": rw, "use": "mixed", "ends": [[-60, 0], [2460, 0]]}],
        "nodes": nodes,
        "edges": edges,
    }


def large() -> dict[str, Any]:
    """Two parallel runways after the LAX north airfield (FAA airport diagram): arrivals land on the
    outer runway 24R, exit onto the taxiway between the runways and cross the inner departure runway
    24L at four crossings; two parallel taxiways B and C; terminal apron with four taxilanes."""
    nodes: list[dict[str, Any]] = []
    edges: list[dict[str, Any]] = []
    outer, inner = "06L/24R", "06R/24L"
    xs = list(range(0, 3001, 150))
    b = {x: _node(nodes, f"B{x // 150}", "intersection", x, 240) for x in xs}
    c = {x: _node(nodes, f"C{x // 150}", "intersection", x, 120) for x in xs}
    for row, name in ((b, "B"), (c, "C")):
        for x0, x1 in zip(xs, xs[1:], strict=False):
            edges.append({"from": row[x0], "to": row[x1], "name": name})
    for x in range(0, 3001, 600):
        edges.append({"from": b[x], "to": c[x], "name": "BC"})
    mid_xs = list(range(300, 2851, 150))
    m = {x: _node(nodes, f"M{x // 150}", "intersection", x, 760) for x in mid_xs}
    for x0, x1 in zip(mid_xs, mid_xs[1:], strict=False):
        edges.append({"from": m[x0], "to": m[x1], "name": "M"})
    for i, x in enumerate((2850, 2400, 1950, 1500, 1050), start=1):
        xn = _node(nodes, f"X{i}", "runway_exit", x, 900, outer)
        edges.append({"from": xn, "to": m[x]})
    for i, x in enumerate((600, 1200, 1800, 2400), start=1):
        hn = _node(nodes, f"HN{i}", "hold_short", x, 640, inner)
        rx = _node(nodes, f"RX{i}", "runway_crossing", x, 500, inner)
        hs = _node(nodes, f"HS{i}", "hold_short", x, 360, inner)
        edges += [
            {"from": m[x], "to": hn},
            {"from": hn, "to": rx},
            {"from": rx, "to": hs},
            {"from": hs, "to": b[x]},
        ]
    for i, x in enumerate((3000, 2700), start=1):
        h = _node(nodes, f"HE{i}", "hold_short", x, 360, inner)
        e = _node(nodes, f"E{i}", "runway_entry", x, 480, inner)
        edges += [{"from": b[x], "to": h}, {"from": h, "to": e}]
    stand = 0
    bottoms = []
    for li, x in enumerate((450, 1200, 1950, 2700), start=1):
        prev = c[x]
        for j in range(6):
            ln = _node(nodes, f"T{li}{j}", "intersection", x, -100 * j)
            edges.append({"from": prev, "to": ln, "name": f"T{li}"})
            prev = ln
            for dx in (-120, 120):
                stand += 1
                s = _node(nodes, f"S{stand}", "stand", x + dx, -100 * j)
                edges.append({"from": ln, "to": s})
        r = _node(nodes, f"R{li}", "intersection", x, -620)
        edges.append({"from": prev, "to": r, "name": "R"})
        bottoms.append(r)
    for u, v in zip(bottoms, bottoms[1:], strict=False):
        edges.append({"from": u, "to": v, "name": "R"})
    return {
        "name": "large two-runway airport (schematic, after LAX north airfield)",
        "source": "schematic after the FAA airport diagram of Los Angeles Intl (KLAX) north airfield: outer "
        "arrival runway, inner departure runway crossed by arrivals, parallel taxiways; distances rounded",
        "runways": [
            {"id": outer, "use": "arrivals", "ends": [[-100, 1000], [3100, 1000]]},
            {"id": inner, "use": "departures", "ends": [[-100, 500], [3100, 500]]},
        ],
        "nodes": nodes,
        "edges": edges,
    }


def main() -> None:
    for name, build in (("small", small), ("large", large)):
        (HERE / f"{name}.yaml").write_text(yaml.safe_dump(build(), sort_keys=False, width=110))


if __name__ == "__main__":
    main()
