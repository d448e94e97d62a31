"""Airport surface layouts: a graph of nodes and taxiway segments, and the cell graph built from it.

A layout is loaded from YAML (``load_layout``) or imported from an OpenStreetMap ``aeroway``
GeoJSON extract (``airport.osm.layout_from_geojson``). ``build_surface`` discretises every
segment into cells of ``cell_m`` metres and returns a :class:`Surface`, the structure the
engine, the planners and the environment share.

Node kinds (``KINDS``):

* ``stand`` — a gate / parking position; departures start here, arrivals end here;
* ``intersection`` — a taxiway junction or a bend;
* ``hold_short`` — a runway-holding position in front of a runway crossing;
* ``runway_crossing`` — where a taxiway crosses a runway (``runway:`` names the runway);
* ``runway_entry`` — a line-up point; departures end here and take off (``runway:``);
* ``runway_exit`` — where a landed aircraft leaves the runway; arrivals start here (``runway:``).

Positions. Aircraft move on a *directed* position graph: every node is one position, and each
interior cell of a segment is two positions (one per travel direction) sharing one physical
cell. Travelling in a segment's interior cannot reverse; at a node any incident segment may be
taken, except into a stand, line-up point or runway exit that is not the aircraft's own goal
(those are dead ends or one-way). Separation is measured in cells along the undirected
physical cell graph.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

KINDS = ("stand", "intersection", "hold_short", "runway_crossing", "runway_entry", "runway_exit")
RUNWAY_KINDS = ("runway_crossing", "runway_entry", "runway_exit")
#: node kinds an aircraft may only enter when it is its goal (or never, for exits)
PRIVATE_KINDS = ("stand", "runway_entry", "runway_exit")
UNREACHABLE = np.iinfo(np.int32).max // 4


class LayoutError(ValueError):
    """A malformed layout; the message names the field, the bad value and what is allowed."""


@dataclass(frozen=True)
class Node:
    id: str
    kind: str
    x: float
    y: float
    runway: str | None = None


@dataclass(frozen=True)
class Edge:
    u: str
    v: str
    length: float
    name: str = ""


@dataclass
class Layout:
    """An airport surface graph (metres, any local planar frame)."""

    name: str
    nodes: list[Node]
    edges: list[Edge]
    runways: list[dict[str, Any]]
    source: str = ""

    def node(self, node_id: str) -> Node:
        return self.nodes[self.index[node_id]]

    @property
    def index(self) -> dict[str, int]:
        return {n.id: i for i, n in enumerate(self.nodes)}

    def kind_ids(self, kind: str, runway: str | None = None) -> list[str]:
        return [n.id for n in self.nodes if n.kind == kind and (runway is None or n.runway == runway)]

    def runway_use(self, runway: str) -> str:
        for r in self.runways:
            if r["id"] == runway:
                return str(r.get("use", "mixed"))
        raise KeyError(runway)


# ----------------------------------------------------------------------------- loading and validation


def _need(mapping: Any, key: str, where: str) -> Any:
    if not isinstance(mapping, dict) or key not in mapping:
        raise LayoutError(f"{where}.{key}: missing (required)")
    return mapping[key]


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise LayoutError(f"{where}: {value!r} is not a finite number")
    return float(value)


def layout_from_dict(data: Any, source: str = "") -> Layout:
    """Validate a layout mapping (as read from YAML) and return the :class:`Layout`.

    Raises :class:`LayoutError` naming the field and value for unknown node kinds, duplicate
    ids, unknown runways, dangling edges (an end that is no node), non-positive lengths,
    unreachable stands and runway points, and layouts without stands or runways.
    """
    if not isinstance(data, dict):
        raise LayoutError(f"layout: expected a mapping, got {type(data).__name__}")
    allowed_top = {"name", "source", "runways", "nodes", "edges"}
    extra = set(data) - allowed_top
    if extra:
        raise LayoutError(f"layout: unknown field(s) {sorted(extra)}; allowed: {sorted(allowed_top)}")
    runways = _need(data, "runways", "layout")
    if not isinstance(runways, list) or not runways:
        raise LayoutError("layout.runways: needs a non-empty list of {id, use}")
    runway_ids: list[str] = []
    for i, r in enumerate(runways):
        rid = str(_need(r, "id", f"runways[{i}]"))
        use = r.get("use", "mixed")
        if use not in ("arrivals", "departures", "mixed"):
            raise LayoutError(f"runways[{i}].use: {use!r} is not one of arrivals, departures, mixed")
        if rid in runway_ids:
            raise LayoutError(f"runways[{i}].id: duplicate runway {rid!r}")
        ends = r.get("ends")
        if ends is not None and (
            not isinstance(ends, list)
            or len(ends) != 2
            or any(not isinstance(e, list) or len(e) != 2 for e in ends)
        ):
            raise LayoutError(
                f"runways[{i}].ends: {ends!r} must be [[x0, y0], [x1, y1]] (optional, for maps)"
            )
        runway_ids.append(rid)
    raw_nodes = _need(data, "nodes", "layout")
    if not isinstance(raw_nodes, list) or not raw_nodes:
        raise LayoutError("layout.nodes: needs a non-empty list")
    nodes: list[Node] = []
    seen: set[str] = set()
    for i, n in enumerate(raw_nodes):
        where = f"nodes[{i}]"
        nid = str(_need(n, "id", where))
        if nid in seen:
            raise LayoutError(f"{where}.id: duplicate node id {nid!r}")
        seen.add(nid)
        kind = _need(n, "kind", where)
        if kind not in KINDS:
            raise LayoutError(
                f"{where}.kind: unknown node kind {kind!r} (node {nid}); allowed: {', '.join(KINDS)}"
            )
        runway = n.get("runway")
        if kind in RUNWAY_KINDS:
            if runway is None:
                raise LayoutError(f"{where}.runway: missing for {kind} node {nid!r}")
            if str(runway) not in runway_ids:
                raise LayoutError(
                    f"{where}.runway: unknown runway {runway!r} (node {nid}); known: {', '.join(runway_ids)}"
                )
        nodes.append(
            Node(
                nid,
                kind,
                _number(_need(n, "x", where), f"{where}.x"),
                _number(_need(n, "y", where), f"{where}.y"),
                None if runway is None else str(runway),
            )
        )
    by_id = {n.id: n for n in nodes}
    raw_edges = _need(data, "edges", "layout")
    if not isinstance(raw_edges, list) or not raw_edges:
        raise LayoutError("layout.edges: needs a non-empty list")
    edges: list[Edge] = []
    pairs: set[frozenset[str]] = set()
    for i, e in enumerate(raw_edges):
        where = f"edges[{i}]"
        if isinstance(e, list | tuple):
            if len(e) != 2:
                raise LayoutError(f"{where}: {e!r} must be [from, to] or {{from, to, length, name}}")
            e = {"from": e[0], "to": e[1]}
        u, v = str(_need(e, "from", where)), str(_need(e, "to", where))
        for end, nid in (("from", u), ("to", v)):
            if nid not in by_id:
                raise LayoutError(f"{where}.{end}: dangling edge, unknown node {nid!r}")
        if u == v:
            raise LayoutError(f"{where}: self-loop at node {u!r}")
        if frozenset((u, v)) in pairs:
            raise LayoutError(f"{where}: duplicate segment {u}-{v}")
        pairs.add(frozenset((u, v)))
        a, b = by_id[u], by_id[v]
        length = e.get("length")
        length = math.hypot(a.x - b.x, a.y - b.y) if length is None else _number(length, f"{where}.length")
        if length <= 0:
            raise LayoutError(f"{where}.length: {length} must be > 0 (segment {u}-{v})")
        edges.append(Edge(u, v, float(length), str(e.get("name", ""))))
    layout = Layout(
        str(data.get("name", "layout")), nodes, edges, list(runways), str(data.get("source", source))
    )
    _check_structure(layout)
    return layout


def _check_structure(layout: Layout) -> None:
    degree = {n.id: 0 for n in layout.nodes}
    for e in layout.edges:
        degree[e.u] += 1
        degree[e.v] += 1
    for n in layout.nodes:
        if degree[n.id] == 0:
            raise LayoutError(f"nodes: node {n.id!r} ({n.kind}) has no segment")
    stands = layout.kind_ids("stand")
    if not stands:
        raise LayoutError("nodes: the layout has no stand (kind: stand)")
    entries, exits = layout.kind_ids("runway_entry"), layout.kind_ids("runway_exit")
    if not entries and not exits:
        raise LayoutError("nodes: the layout has no runway_entry or runway_exit node")
    # reachability on the public taxi graph (private nodes are ends only)
    adj: dict[str, list[str]] = {n.id: [] for n in layout.nodes}
    for e in layout.edges:
        adj[e.u].append(e.v)
        adj[e.v].append(e.u)
    kind = {n.id: n.kind for n in layout.nodes}

    def reach(start: str) -> set[str]:
        seen, queue = {start}, deque([start])
        while queue:
            u = queue.popleft()
            for v in adj[u]:
                if v in seen:
                    continue
                seen.add(v)
                if kind[v] not in PRIVATE_KINDS:
                    queue.append(v)
        return seen

    if exits:
        for x in exits:
            got = reach(x)
            for s in stands:
                if s not in got:
                    raise LayoutError(f"nodes: unreachable stand {s!r} from runway exit {x!r}")
    if entries:
        for s in stands:
            got = reach(s)
            for x in entries:
                if x not in got:
                    raise LayoutError(f"nodes: runway entry {x!r} unreachable from stand {s!r}")


def load_layout(path: str | Path) -> Layout:
    """Load and validate a layout YAML file."""
    from fieldrl.errors import FieldrlError
    from fieldrl.limits import load_yaml

    path = Path(path)
    try:
        data = load_yaml(path.read_text(), path.name, 50 << 20)  # nesting and alias-expansion limits
    except FieldrlError as exc:
        raise LayoutError(f"{path.name}: not valid YAML ({exc})") from None
    return layout_from_dict(data, source=str(path))


def layout_to_dict(layout: Layout) -> dict[str, Any]:
    nodes = []
    for n in layout.nodes:
        row: dict[str, Any] = {"id": n.id, "kind": n.kind, "x": round(n.x, 1), "y": round(n.y, 1)}
        if n.runway is not None:
            row["runway"] = n.runway
        nodes.append(row)
    edges = [
        {"from": e.u, "to": e.v, "length": round(e.length, 1), **({"name": e.name} if e.name else {})}
        for e in layout.edges
    ]
    return {
        "name": layout.name,
        "source": layout.source,
        "runways": layout.runways,
        "nodes": nodes,
        "edges": edges,
    }


# ----------------------------------------------------------------------------- the cell graph


@dataclass
class Surface:
    """A layout discretised into cells, with the directed position graph and lookup tables.

    Arrays are indexed by position ``p`` (``n_pos``), physical cell ``c`` (``n_cells``) or
    node index ``k`` (``n_nodes``).
    """

    layout: Layout
    cell_m: float
    separation: int
    n_nodes: int
    n_cells: int
    n_pos: int
    max_degree: int
    pos_cell: np.ndarray  # p -> physical cell
    pos_edge: np.ndarray  # p -> segment index, -1 at nodes
    pos_dir: np.ndarray  # p -> +1 (u->v) / -1 (v->u), 0 at nodes
    pos_node: np.ndarray  # p -> node index, -1 on segments
    cell_xy: np.ndarray  # c -> (x, y)
    cell_runway: np.ndarray  # c -> runway index or -1
    node_kind: list[str]
    node_runway: np.ndarray  # k -> runway index or -1
    runway_ids: list[str]
    #: node position -> list of (segment index, first position along it, far-end node)
    node_moves: list[list[tuple[int, int, int]]]
    #: interior position -> next position along its direction
    next_interior: np.ndarray
    ball: list[np.ndarray] = field(default_factory=list)  # c -> cells closer than `separation`
    _dist: dict[int, np.ndarray] = field(default_factory=dict)
    _next: dict[int, np.ndarray] = field(default_factory=dict)

    # -- moves
    def successors(self, p: int, goal: int) -> list[tuple[int, int]]:
        """``(action, next position)`` for every move allowed from ``p`` toward goal node ``goal``.

        Action 0 (hold) is not listed. At a node, action ``i + 1`` takes incident segment ``i``;
        inside a segment action 1 continues.
        """
        k = int(self.pos_node[p])
        if k < 0:
            return [(1, int(self.next_interior[p]))]
        out = []
        for i, (_, first, far) in enumerate(self.node_moves[k]):
            if far != goal and self.node_kind[far] in PRIVATE_KINDS:
                continue
            out.append((i + 1, first))
        return out

    def action_target(self, p: int, action: int) -> int:
        """Position reached from ``p`` by ``action`` (``p`` itself for hold or an invalid action)."""
        if action <= 0:
            return p
        k = int(self.pos_node[p])
        if k < 0:
            return int(self.next_interior[p]) if action == 1 else p
        moves = self.node_moves[k]
        return moves[action - 1][1] if action - 1 < len(moves) else p

    # -- distances to a goal node (hops in the position graph, respecting private nodes)
    def dist_to(self, goal: int) -> np.ndarray:
        if goal not in self._dist:
            self._dist[goal], self._next[goal] = self._bfs_to(goal)
        return self._dist[goal]

    def next_to(self, goal: int) -> np.ndarray:
        """Next position on a shortest path to ``goal`` from each position (-1 where none)."""
        self.dist_to(goal)
        return self._next[goal]

    def _bfs_to(self, goal: int) -> tuple[np.ndarray, np.ndarray]:
        dist = np.full(self.n_pos, UNREACHABLE, dtype=np.int32)
        nxt = np.full(self.n_pos, -1, dtype=np.int32)
        preds = self._preds(goal)
        dist[goal] = 0
        queue = deque([goal])
        while queue:
            q = queue.popleft()
            for p in preds[q]:
                if dist[p] == UNREACHABLE:
                    dist[p] = dist[q] + 1
                    nxt[p] = q
                    queue.append(p)
        return dist, nxt

    def _preds(self, goal: int) -> list[list[int]]:
        preds: list[list[int]] = [[] for _ in range(self.n_pos)]
        for p in range(self.n_pos):
            for _, q in self.successors(p, goal):
                preds[q].append(p)
        return preds


def build_surface(layout: Layout, cell_m: float = 60.0, separation: int = 2) -> Surface:
    """Discretise ``layout`` into cells of about ``cell_m`` metres (each segment at least one hop).

    :param separation: minimum separation in cells: two aircraft whose cells are fewer than this many
        hops apart on the cell graph are in conflict (1 = only the same cell).
    """
    if cell_m <= 0:
        raise LayoutError(f"cell_m: {cell_m} must be > 0")
    if separation < 1:
        raise LayoutError(f"separation: {separation} must be >= 1 cell")
    idx = layout.index
    n_nodes = len(layout.nodes)
    runway_ids = [str(r["id"]) for r in layout.runways]
    rw_index = {r: i for i, r in enumerate(runway_ids)}
    node_kind = [n.kind for n in layout.nodes]
    node_runway = np.array(
        [
            rw_index.get(n.runway, -1)
            if n.kind == "runway_crossing"
            else (rw_index.get(n.runway, -1) if n.runway else -1)
            for n in layout.nodes
        ],
        dtype=np.int32,
    )
    cell_xy: list[tuple[float, float]] = [(n.x, n.y) for n in layout.nodes]
    cell_runway = [int(node_runway[k]) if node_kind[k] == "runway_crossing" else -1 for k in range(n_nodes)]
    pos_cell = list(range(n_nodes))
    pos_edge = [-1] * n_nodes
    pos_dir = [0] * n_nodes
    pos_node = list(range(n_nodes))
    next_interior: list[int] = [-1] * n_nodes
    node_moves: list[list[tuple[int, int, int]]] = [[] for _ in range(n_nodes)]
    cell_adj: list[set[int]] = [set() for _ in range(n_nodes)]
    for e_i, e in enumerate(layout.edges):
        u, v = idx[e.u], idx[e.v]
        hops = max(1, round(e.length / cell_m))
        m = hops - 1
        nu, nv = layout.nodes[u], layout.nodes[v]
        runway = -1
        for k in (u, v):
            if node_kind[k] == "runway_crossing":
                runway = int(node_runway[k])
        cells = []
        for j in range(1, m + 1):
            f = j / hops
            cell_xy.append((nu.x + f * (nv.x - nu.x), nu.y + f * (nv.y - nu.y)))
            cell_runway.append(runway)
            cell_adj.append(set())
            cells.append(len(cell_xy) - 1)
        chain = [u, *cells, v]
        for a, b in zip(chain, chain[1:], strict=False):
            cell_adj[a].add(b)
            cell_adj[b].add(a)
        fwd = []
        bwd = []
        for c in cells:
            pos_cell.append(c)
            pos_edge.append(e_i)
            pos_dir.append(1)
            pos_node.append(-1)
            next_interior.append(-1)
            fwd.append(len(pos_cell) - 1)
        for c in reversed(cells):
            pos_cell.append(c)
            pos_edge.append(e_i)
            pos_dir.append(-1)
            pos_node.append(-1)
            next_interior.append(-1)
            bwd.append(len(pos_cell) - 1)
        for seq, end in ((fwd, v), (bwd, u)):
            for a, b in zip(seq, seq[1:], strict=False):
                next_interior[a] = b
            if seq:
                next_interior[seq[-1]] = end
        node_moves[u].append((e_i, fwd[0] if fwd else v, v))
        node_moves[v].append((e_i, bwd[0] if bwd else u, u))
    n_cells = len(cell_xy)
    ball = []
    for c in range(n_cells):
        seen = {c: 0}
        queue = deque([c])
        while queue:
            a = queue.popleft()
            if seen[a] + 1 >= separation:
                continue
            for b in cell_adj[a]:
                if b not in seen:
                    seen[b] = seen[a] + 1
                    queue.append(b)
        ball.append(np.array(sorted(seen), dtype=np.int32))
    surface = Surface(
        layout=layout,
        cell_m=float(cell_m),
        separation=int(separation),
        n_nodes=n_nodes,
        n_cells=n_cells,
        n_pos=len(pos_cell),
        max_degree=max(len(m) for m in node_moves),
        pos_cell=np.array(pos_cell, dtype=np.int32),
        pos_edge=np.array(pos_edge, dtype=np.int32),
        pos_dir=np.array(pos_dir, dtype=np.int8),
        pos_node=np.array(pos_node, dtype=np.int32),
        cell_xy=np.array(cell_xy, dtype=np.float64),
        cell_runway=np.array(cell_runway, dtype=np.int32),
        node_kind=node_kind,
        node_runway=node_runway,
        runway_ids=runway_ids,
        node_moves=node_moves,
        next_interior=np.array(next_interior, dtype=np.int32),
        ball=ball,
    )
    surface.cell_adj = cell_adj  # type: ignore[attr-defined]
    return surface
