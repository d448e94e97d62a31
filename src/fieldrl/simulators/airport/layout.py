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
from itertools import chain
from pathlib import Path
from typing import Any

import numpy as np

KINDS = ("stand", "intersection", "hold_short", "runway_crossing", "runway_entry", "runway_exit")
RUNWAY_KINDS = ("runway_crossing", "runway_entry", "runway_exit")
#: node kinds an aircraft may only enter when it is its goal (or never, for exits)
PRIVATE_KINDS = ("stand", "runway_entry", "runway_exit")
UNREACHABLE = np.iinfo(np.int32).max // 4

# Limits on what a layout may ask the surface build to hold. Without them a typo such as ``x: 1e9``
# cuts one segment into millions of cells (16 GB at 1e9) before anything is checked.
#: widest extent of a layout in x or in y and longest segment, in metres: the largest airports are
#: under 15 km across (the shipped large layout spans 6 km; a synthetic 0.9 MB OSM hub, 8 km)
MAX_SPAN_M = 50_000.0
#: most nodes and segments in a layout: a large hub's OSM extract gives a few thousand of each
#: (3,776 nodes and 3,856 segments for a 0.9 MB extract with 1,680 stands)
MAX_NODES = 50_000
MAX_EDGES = 100_000
#: most segments meeting at one node: an aircraft there has one action per segment (the shipped
#: layouts have at most 4; an OSM apron whose stands snap to one taxilane vertex, a few tens)
MAX_DEGREE = 100
#: most cells a surface may have: a large hub at the finest ``cell_m`` (10 m) needs a few tens of
#: thousands; a cell takes about 1 kB and 7-10 us to build, so the limit is about 1 GB and 10 s
MAX_CELLS = 1_000_000
#: most (cell, cell closer than separation) pairs the surface keeps: about 2 x separation per cell on
#: a real layout; many segments meeting at one node make it grow with the square of their number
MAX_BALL_PAIRS = 40 * MAX_CELLS


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
    _at_most(len(raw_nodes), MAX_NODES, "layout.nodes", "nodes")
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
    _check_span(nodes)
    by_id = {n.id: n for n in nodes}
    raw_edges = _need(data, "edges", "layout")
    if not isinstance(raw_edges, list) or not raw_edges:
        raise LayoutError("layout.edges: needs a non-empty list")
    _at_most(len(raw_edges), MAX_EDGES, "layout.edges", "segments")
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
        if length > MAX_SPAN_M:
            raise LayoutError(
                f"{where}.length: {length:g} m (segment {u}-{v}); allowed: at most {MAX_SPAN_M:,.0f} m"
            )
        edges.append(Edge(u, v, float(length), str(e.get("name", ""))))
    layout = Layout(
        str(data.get("name", "layout")), nodes, edges, list(runways), str(data.get("source", source))
    )
    _check_structure(layout)
    return layout


def _at_most(count: int, limit: int, where: str, what: str) -> None:
    if count > limit:
        raise LayoutError(f"{where}: {count:,} {what}; allowed: at most {limit:,}")


def _check_span(nodes: list[Node]) -> None:
    """Refuse nodes spread wider than :data:`MAX_SPAN_M` in x or y (any frame: only the extent counts)."""
    for axis in ("x", "y"):
        values = [getattr(n, axis) for n in nodes]
        low, high = min(values), max(values)
        if high - low > MAX_SPAN_M:
            far = nodes[values.index(high if abs(high) >= abs(low) else low)]
            raise LayoutError(
                f"nodes: node {far.id!r} at {axis} = {getattr(far, axis):g} spreads the layout over "
                f"{high - low:,.0f} m in {axis}; allowed: at most {MAX_SPAN_M:,.0f} m (metres, one airport)"
            )


def _check_structure(layout: Layout) -> None:
    degree = {n.id: 0 for n in layout.nodes}
    for e in layout.edges:
        degree[e.u] += 1
        degree[e.v] += 1
    for n in layout.nodes:
        if degree[n.id] == 0:
            raise LayoutError(f"nodes: node {n.id!r} ({n.kind}) has no segment")
        if degree[n.id] > MAX_DEGREE:
            raise LayoutError(
                f"nodes: node {n.id!r} ({n.kind}) has {degree[n.id]:,} segments; allowed: at most "
                f"{MAX_DEGREE} (an aircraft there has one action per segment)"
            )
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
    private = {n.id for n in layout.nodes if n.kind in PRIVATE_KINDS}
    touches = _public_components(adj, private)
    missed = _first_unreached(exits, stands, adj, touches)
    if missed:
        raise LayoutError(f"nodes: unreachable stand {missed[1]!r} from runway exit {missed[0]!r}")
    missed = _first_unreached(stands, entries, adj, touches)
    if missed:
        raise LayoutError(f"nodes: runway entry {missed[1]!r} unreachable from stand {missed[0]!r}")


def _public_components(adj: dict[str, list[str]], private: set[str]) -> dict[str, frozenset[int]]:
    """For every private node, the connected components of public nodes it touches.

    A taxi from a private node (stand, line-up point, runway exit) may pass through public nodes only,
    so it reaches exactly: its neighbours, and every node in or next to a public component it touches.
    """
    component: dict[str, int] = {}
    labels = 0
    for start in adj:
        if start in private or start in component:
            continue
        label, labels = labels, labels + 1
        component[start] = label
        queue = deque([start])
        while queue:
            for v in adj[queue.popleft()]:
                if v not in private and v not in component:
                    component[v] = label
                    queue.append(v)
    return {p: frozenset(component[v] for v in adj[p] if v not in private) for p in private}


def _first_unreached(
    sources: list[str], targets: list[str], adj: dict[str, list[str]], touches: dict[str, frozenset[int]]
) -> tuple[str, str] | None:
    """The first ``(source, target)`` (in list order) where the target cannot be reached, else None.

    ``target`` is reached from ``source`` if they are neighbours or touch a common public component.
    Sources touching the same components are judged once, so this takes time linear in the layout
    (not sources x targets breadth-first searches, which took minutes on a large OSM extract).
    """
    if not targets:
        return None
    near: dict[int, set[str]] = {}
    for t in targets:
        for label in touches[t]:
            near.setdefault(label, set()).add(t)
    covered: dict[frozenset[int], set[str]] = {}
    for s in sources:
        labels = frozenset(label for label in touches[s] if label in near)
        if any(len(near[label]) == len(targets) for label in labels):
            continue
        if labels not in covered:
            covered[labels] = set().union(*(near[label] for label in labels))
        reached = covered[labels]
        if len(reached) < len(targets):
            neighbours = set(adj[s])
            for t in targets:
                if t not in reached and t not in neighbours:
                    return s, t
    return None


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
    _check_cell_count(layout, cell_m)
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
        hops = _hops(e.length, cell_m)
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
    ball = _balls(cell_adj, separation)
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


def _hops(length: float, cell_m: float) -> int:
    """Cell-to-cell hops along a segment of ``length`` metres (at least one)."""
    return max(1, round(length / cell_m))


def _check_cell_count(layout: Layout, cell_m: float) -> None:
    """Refuse, before building anything, a surface of more than :data:`MAX_CELLS` cells."""
    n_cells = len(layout.nodes) + sum(_hops(e.length, cell_m) - 1 for e in layout.edges)
    if n_cells > MAX_CELLS:
        metres = sum(e.length for e in layout.edges)
        raise LayoutError(
            f"cell_m: {cell_m:g} m cells cut the layout's {metres:,.0f} m of segments into {n_cells:,} "
            f"cells; allowed: at most {MAX_CELLS:,} (larger cell_m, or a smaller layout)"
        )


def _balls(cell_adj: list[set[int]], separation: int) -> list[np.ndarray]:
    """For each cell, the cells fewer than ``separation`` hops away, sorted.

    Row ``c`` of ``(I + A) ** (separation - 1)`` (``A`` the cell graph's adjacency) as a sparse
    product: time and memory in proportion to the pairs kept, refused beyond :data:`MAX_BALL_PAIRS`.
    """
    from scipy import sparse  # imported here: checking a scenario without a layout file needs none

    n = len(cell_adj)
    rows = np.repeat(np.arange(n), [len(a) for a in cell_adj])
    cols = np.fromiter(chain.from_iterable(cell_adj), dtype=np.int64, count=len(rows))
    identity = sparse.identity(n, dtype=bool, format="csr")
    adjacency = sparse.csr_matrix((np.ones(len(rows), dtype=bool), (rows, cols)), shape=(n, n))
    step = (adjacency + identity).tocsr()
    reach = identity
    for _ in range(separation - 1):
        reach = _product_within(reach, step, separation)
    reach.sort_indices()
    return np.split(reach.indices.astype(np.int32), reach.indptr[1:-1])


#: rows of a sparse product computed at once hold at most about this many entries (bounds memory)
_CHUNK_PAIRS = 1 << 23


def _product_within(a: Any, b: Any, separation: int) -> Any:
    """``a @ b`` (sparse, boolean) in blocks of rows; refused once it holds :data:`MAX_BALL_PAIRS`."""
    from scipy import sparse

    bound = np.cumsum(a @ np.diff(b.indptr))  # per row: an upper bound on its entries in the product
    parts, kept, start = [], 0, 0
    while start < a.shape[0]:
        below = bound[start - 1] if start else 0
        stop = max(start + 1, int(np.searchsorted(bound, below + _CHUNK_PAIRS, side="right")))
        part = (a[start:stop] @ b).tocsr()
        kept += part.nnz
        if kept > MAX_BALL_PAIRS:
            raise LayoutError(
                f"separation: {separation} cells around each of the {a.shape[0]:,} cells add up to more "
                f"than {MAX_BALL_PAIRS:,} cell pairs; allowed: a smaller separation, a larger cell_m or "
                "a sparser layout"
            )
        parts.append(part)
        start = stop
    return sparse.vstack(parts, format="csr")
