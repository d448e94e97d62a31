"""Build a layout from an OpenStreetMap ``aeroway`` extract in GeoJSON (e.g. exported with overpass-turbo).

Features read (others are ignored):

* ``aeroway=taxiway`` (LineString) — taxiway centre lines; they are split into segments at
  junctions (vertices shared by several lines), at runway contacts, holding positions and
  where stands attach;
* ``aeroway=runway`` (LineString; ``ref`` names it, e.g. ``09/27``) — a taxiway vertex on the
  runway line becomes a ``runway_crossing`` if the taxiway continues on both sides, else a
  ``runway_entry`` (within ``entry_share`` of a runway end) or a ``runway_exit``;
* ``aeroway=holding_position`` (Point) — the nearest taxiway vertex within ``snap_m`` becomes
  a ``hold_short`` node;
* ``aeroway=parking_position`` (Point or LineString) — a ``stand`` joined by a segment to the
  nearest taxiway vertex.

Longitude/latitude are projected to local metres (equirectangular about the centroid; fine
over an airport's few kilometres). The result goes through the same validation as a YAML
layout (:func:`~fieldrl.simulators.airport.layout.layout_from_dict`).

An extract may hold at most :data:`MAX_VERTICES` coordinates spread over at most
:data:`~fieldrl.simulators.airport.layout.MAX_SPAN_M`; nearest-vertex searches use a k-d tree, so
the import takes time about linear in the vertices (all-pairs searches took minutes on 1 MB).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from fieldrl.simulators.airport.layout import MAX_SPAN_M, Layout, LayoutError, layout_from_dict

Point = tuple[float, float]
Key = tuple[int, int]

#: most coordinates an extract may hold: a large hub's aeroway export has a few tens of thousands
#: (a 0.9 MB extract: 23,000); importing the limit takes about 5 s
MAX_VERTICES = 200_000
#: spacing (m) of the points along a runway around which taxiway vertices are looked up; any vertex
#: within 1 m of the runway lies within RUNWAY_STEP_M / 2 + 1 m of one of them
RUNWAY_STEP_M = 50.0


def _lines(geometry: dict[str, Any]) -> list[list[Point]]:
    kind, coords = geometry.get("type"), geometry.get("coordinates")
    if kind == "LineString":
        return [[(float(c[0]), float(c[1])) for c in coords]]
    if kind == "MultiLineString":
        return [[(float(c[0]), float(c[1])) for c in line] for line in coords]
    if kind == "Point":
        return [[(float(coords[0]), float(coords[1]))]]
    if kind == "Polygon":
        return [[(float(c[0]), float(c[1])) for c in coords[0]]]
    return []


def layout_from_geojson(
    source: str | Path | dict[str, Any],
    name: str = "OpenStreetMap extract",
    snap_m: float = 40.0,
    entry_share: float = 0.15,
) -> Layout:
    """Layout from a GeoJSON FeatureCollection (a path, a JSON string or the parsed mapping)."""
    if isinstance(source, dict):
        data = source
    else:
        text = Path(source).read_text() if Path(str(source)).exists() else str(source)
        data = json.loads(text)
    feats = [f for f in data.get("features", []) if isinstance(f, dict)]
    by_kind: dict[str, list[tuple[dict[str, Any], list[list[Point]]]]] = {}
    for f in feats:
        props = f.get("properties") or {}
        kind = props.get("aeroway")
        if kind in ("taxiway", "runway", "holding_position", "parking_position"):
            by_kind.setdefault(kind, []).append((props, _lines(f.get("geometry") or {})))
    if not by_kind.get("taxiway"):
        raise LayoutError("geojson: no aeroway=taxiway LineString features")
    if not by_kind.get("runway"):
        raise LayoutError("geojson: no aeroway=runway LineString features")
    if not by_kind.get("parking_position"):
        raise LayoutError("geojson: no aeroway=parking_position features (stands)")
    all_pts = [p for items in by_kind.values() for _, lines in items for line in lines for p in line]
    if len(all_pts) > MAX_VERTICES:
        raise LayoutError(
            f"geojson: {len(all_pts):,} coordinates in the aeroway features read; allowed: at most "
            f"{MAX_VERTICES:,} (one airport's extract)"
        )
    geographic = all(abs(x) <= 180 and abs(y) <= 90 for x, y in all_pts)
    lon0 = sum(p[0] for p in all_pts) / len(all_pts)
    lat0 = sum(p[1] for p in all_pts) / len(all_pts)

    def proj(p: Point) -> Point:
        if not geographic:
            return p
        return ((p[0] - lon0) * 111320.0 * math.cos(math.radians(lat0)), (p[1] - lat0) * 110540.0)

    def key(p: Point) -> tuple[int, int]:
        return (round(p[0] * 10), round(p[1] * 10))  # 0.1 m

    taxi_lines = [
        [proj(p) for p in line] for _, lines in by_kind["taxiway"] for line in lines if len(line) >= 2
    ]
    _check_extent([proj(p) for p in all_pts])
    taxi_pts = [p for tl in taxi_lines for p in tl]
    taxi_tree = _tree(taxi_pts)
    runways: list[dict[str, Any]] = []
    runway_pts: dict[tuple[int, int], tuple[int, float]] = {}  # vertex -> (runway, position along 0..1)
    for r_i, (props, lines) in enumerate(by_kind["runway"]):
        line = [proj(p) for p in lines[0]] if lines else []
        if len(line) < 2:
            continue
        rid = str(props.get("ref") or f"RW{r_i + 1}")
        runways.append({"id": rid, "use": "mixed", "ends": [list(line[0]), list(line[-1])]})
        total = sum(math.dist(a, b) for a, b in zip(line, line[1:], strict=False))
        for i in _near_line(taxi_tree, line):
            p = taxi_pts[i]
            d, along = _project_on(line, p)
            if d < 1.0:
                runway_pts[key(p)] = (len(runways) - 1, along / max(total, 1e-9))
    coord: dict[tuple[int, int], Point] = {}
    uses: dict[tuple[int, int], int] = {}
    for tl in taxi_lines:
        for j, p in enumerate(tl):
            k = key(p)
            coord[k] = p
            uses[k] = uses.get(k, 0) + (2 if j in (0, len(tl) - 1) else 1)
    node_keys = {k for k, n in uses.items() if n != 1} | set(runway_pts)
    vertices = _Vertices(coord)
    holds: set[tuple[int, int]] = set()
    for _, lines in by_kind.get("holding_position", []):
        for line in lines:
            k = vertices.nearest(proj(line[0]), snap_m)
            if k is not None:
                holds.add(k)
                node_keys.add(k)
    stands: list[tuple[Point, tuple[int, int], str]] = []
    for s_i, (props, lines) in enumerate(by_kind["parking_position"]):
        pts = [proj(p) for line in lines for p in line]
        if not pts:
            continue
        best = None
        for p in (pts[0], pts[-1]):
            k = vertices.nearest(p, math.inf)
            if k is not None:
                d = math.dist(coord[k], p)
                if best is None or d > best[0]:
                    best = (d, p, k)
        assert best is not None
        _, spot, k = best
        node_keys.add(k)
        stands.append((spot, k, str(props.get("ref") or f"S{s_i + 1}")))
    # split taxiway lines into segments between node vertices
    edges: dict[frozenset[tuple[int, int]], float] = {}
    for tl in taxi_lines:
        start, length = key(tl[0]), 0.0
        for a, b in zip(tl, tl[1:], strict=False):
            length += math.dist(a, b)
            kb = key(b)
            if kb in node_keys:
                if kb != start:
                    pair = frozenset((start, kb))
                    edges[pair] = min(edges.get(pair, math.inf), length)
                start, length = kb, 0.0
    degree: dict[tuple[int, int], int] = {}
    for pair in edges:
        for k in pair:
            degree[k] = degree.get(k, 0) + 1
    ids = {k: f"n{i}" for i, k in enumerate(sorted(node_keys))}
    nodes = []
    for k in sorted(node_keys):
        x, y = coord[k]
        row: dict[str, Any] = {"id": ids[k], "kind": "intersection", "x": x, "y": y}
        if k in runway_pts:
            r, along = runway_pts[k]
            row["runway"] = runways[r]["id"]
            if degree.get(k, 0) >= 2:
                row["kind"] = "runway_crossing"
            else:
                row["kind"] = "runway_entry" if min(along, 1 - along) <= entry_share else "runway_exit"
        elif k in holds:
            row["kind"] = "hold_short"
        nodes.append(row)
    edge_rows = [
        {"from": ids[a], "to": ids[b], "length": max(length, 1.0)}
        for a, b in (tuple(sorted(p)) for p in edges)
        for length in [edges[frozenset((a, b))]]
    ]
    for spot, k, ref in stands:
        sid = f"stand {ref}"
        nodes.append({"id": sid, "kind": "stand", "x": spot[0], "y": spot[1]})
        edge_rows.append({"from": ids[k], "to": sid, "length": max(math.dist(spot, coord[k]), 1.0)})
    return layout_from_dict(
        {
            "name": name,
            "source": "OpenStreetMap aeroway extract (ODbL)",
            "runways": runways,
            "nodes": nodes,
            "edges": edge_rows,
        }
    )


def _project_on(line: list[Point], p: Point) -> tuple[float, float]:
    """Distance from ``p`` to the polyline and the distance along it of the closest point."""
    best, along, walked = math.inf, 0.0, 0.0
    for a, b in zip(line, line[1:], strict=False):
        seg = math.dist(a, b)
        if seg == 0:
            continue
        t = max(0.0, min(1.0, ((p[0] - a[0]) * (b[0] - a[0]) + (p[1] - a[1]) * (b[1] - a[1])) / seg**2))
        q = (a[0] + t * (b[0] - a[0]), a[1] + t * (b[1] - a[1]))
        d = math.dist(p, q)
        if d < best:
            best, along = d, walked + t * seg
        walked += seg
    return best, along


def _check_extent(points: list[Point]) -> None:
    """Refuse an extract spread wider than :data:`MAX_SPAN_M` (before searching anything in it)."""
    xy = np.asarray(points, dtype=np.float64).reshape(-1, 2)
    if not np.isfinite(xy).all():
        raise LayoutError("geojson: a coordinate is not a finite number")
    for axis, name in ((0, "east-west"), (1, "north-south")):
        spread = float(np.ptp(xy[:, axis])) if len(xy) else 0.0
        if spread > MAX_SPAN_M:
            raise LayoutError(
                f"geojson: the aeroway features spread over {spread:,.0f} m {name}; allowed: at most "
                f"{MAX_SPAN_M:,.0f} m (one airport)"
            )


def _tree(points: list[Point]) -> Any:
    """A k-d tree of ``points`` (scipy's; imported here so that checking a scenario stays light)."""
    from scipy.spatial import cKDTree

    return cKDTree(np.asarray(points, dtype=np.float64).reshape(-1, 2))


def _near_line(tree: Any, line: list[Point]) -> list[int]:
    """Indices (ascending) of the tree's points that may lie within 1 m of the polyline ``line``."""
    found: set[int] = set()
    radius = RUNWAY_STEP_M / 2 + 1.0
    for a, b in zip(line, line[1:], strict=False):
        steps = max(1, math.ceil(math.dist(a, b) / RUNWAY_STEP_M))
        t = np.linspace(0.0, 1.0, steps + 1)[:, None]
        samples = np.asarray(a) + t * (np.asarray(b) - np.asarray(a))
        for near in tree.query_ball_point(samples, radius):
            found.update(near)
    return sorted(found)


class _Vertices:
    """Nearest taxiway vertex to a point: the last one in ``coord``'s order among equally near ones
    (as a scan of ``coord`` keeping ``d <= best`` finds), by a k-d tree instead of a scan."""

    def __init__(self, coord: dict[Key, Point]) -> None:
        self.keys = list(coord)
        self.points = [coord[k] for k in self.keys]
        self.tree = _tree(self.points)

    def nearest(self, p: Point, limit: float) -> Key | None:
        """The nearest vertex within ``limit`` metres of ``p``, or None."""
        if not self.keys:
            return None
        d, _ = self.tree.query(p)
        if not d <= limit:
            return None
        ties = self.tree.query_ball_point(p, d * (1 + 1e-9) + 1e-9)
        distances = ((math.dist(p, self.points[i]), -i) for i in ties)
        best = min((pair for pair in distances if pair[0] <= limit), default=None)
        return None if best is None else self.keys[-best[1]]
