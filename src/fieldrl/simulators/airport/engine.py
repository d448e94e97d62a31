"""Airport surface engine: departures and arrivals taxiing on a cell graph, with exact conflict detection.

Time advances in steps of ``dt_s`` seconds; an aircraft moves at most one cell per step (with
60 m cells and 5 s steps that is 12 m/s = 23 kt) or holds. The engine does not stop aircraft
from meeting: it *detects* conflicts, exactly, after every step (see :meth:`SurfaceSim.conflicts`):

* ``separation`` — two aircraft in one cell or fewer than ``separation`` cells apart;
* ``head_on`` — two aircraft inside the same segment travelling in opposite directions, or
  swapping cells in one step;
* ``runway`` — an aircraft on a runway cell (a crossing node or the segments into it, inside
  the hold-short lines) while that runway is active (a landing within ``approach_steps`` of
  touchdown or rolling out, or a take-off roll).

Traffic: movements arrive as a Poisson process (``movements_per_hour``); each is a departure
(pushback from a stand, goal a line-up point) or an arrival (lands at a scheduled time, rolls
out for ``roll_steps``, appears at a runway exit, goal a stand). A departure that reaches its
line-up point leaves the surface and takes off at the earliest time its runway is free of
landings and other take-offs. Stands and exits are only entered when free: a departure waits
at the gate, and a landed aircraft waits on the runway (which then stays active) until its
spawn cell and the cells around it are clear and fewer than ``max_active`` aircraft taxi.
All random draws happen at reset, so traffic is identical for every policy given the seed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from fieldrl.simulators.airport.layout import UNREACHABLE, Surface

KT_PER_MPS = 1.0 / 0.514444
CONFLICT_KINDS = ("separation", "head_on", "runway")


@dataclass(frozen=True)
class TrafficConfig:
    """Traffic and timing of one episode.

    :param movements_per_hour: Poisson rate of movements (departures + arrivals).
    :param departure_share: probability that a movement is a departure.
    :param horizon_steps: movements are generated over ``[0, horizon_steps)``.
    :param drain_steps: steps after the horizon before the episode is truncated.
    :param dt_s: seconds per step.
    :param approach_steps: steps before touchdown during which the landing runway is active.
    :param roll_steps: landing roll-out / take-off roll, in steps.
    :param max_active: most aircraft taxiing at once (further spawns wait).
    :param max_movements: cap on movements per episode (the agent name space).
    """

    movements_per_hour: float = 20.0
    departure_share: float = 0.5
    horizon_steps: int = 360
    drain_steps: int = 240
    dt_s: float = 5.0
    approach_steps: int = 6
    roll_steps: int = 8
    max_active: int = 16
    max_movements: int = 64


@dataclass
class Movement:
    """One scheduled movement and, once it taxis, its state."""

    index: int
    departure: bool
    request: int  # pushback request time, or touchdown time for arrivals
    goal: int  # node index (line-up point for departures; stand chosen at spawn for arrivals)
    start: int  # exit node for arrivals, -1 for departures (stand chosen at spawn)
    runway: int
    stand_order: np.ndarray  # stand preference (random permutation drawn at reset)
    pos: int = -1
    spawn_t: int = -1
    done_t: int = -1
    unimpeded: int = 0
    held: int = 0
    wait_run: int = 0  # consecutive steps held
    crossing_wait: int = 0
    heading: float = 0.0
    conflicts: int = 0
    takeoff_t: int = -1


@dataclass
class StepResult:
    """What one step did, per aircraft index (movement index)."""

    moved: dict[int, int] = field(default_factory=dict)  # index -> progress (hops closer to goal)
    held: dict[int, bool] = field(default_factory=dict)
    finished: list[int] = field(default_factory=list)
    spawned: list[int] = field(default_factory=list)
    new_conflicts: dict[int, int] = field(default_factory=dict)
    in_conflict: dict[int, bool] = field(default_factory=dict)
    near: dict[int, bool] = field(default_factory=dict)


class SurfaceSim:
    """The surface engine for one airport (one episode at a time, deterministic given the seed)."""

    def __init__(self, surface: Surface, config: TrafficConfig):
        self.s = surface
        self.cfg = config
        layout = surface.layout
        idx = layout.index
        self.stands = np.array([idx[n] for n in layout.kind_ids("stand")], dtype=np.int32)
        self.entries: dict[int, list[int]] = {}
        self.exits: dict[int, list[int]] = {}
        for r, rid in enumerate(surface.runway_ids):
            use = layout.runway_use(rid)
            ent = [idx[n] for n in layout.kind_ids("runway_entry", rid)]
            ext = [idx[n] for n in layout.kind_ids("runway_exit", rid)]
            if use in ("departures", "mixed") and ent:
                self.entries[r] = ent
            if use in ("arrivals", "mixed") and ext:
                self.exits[r] = ext
        if not self.entries and not self.exits:
            raise ValueError("layout has no usable runway entry or exit")
        self.max_steps = config.horizon_steps + config.drain_steps
        self._near_ball = _balls(surface, surface.separation + 1)
        # cells from which another aircraft cannot get `separation` away in one step
        self._sure_ball = _balls(surface, surface.separation - 1) if surface.separation > 1 else None
        self.reset(0)

    @property
    def speed_kt(self) -> float:
        return self.s.cell_m / self.cfg.dt_s * KT_PER_MPS

    # ------------------------------------------------------------------ schedule
    def reset(self, seed: int | None) -> None:
        rng = np.random.default_rng(seed)
        cfg = self.cfg
        rate = cfg.movements_per_hour / 3600.0 * cfg.dt_s  # per step
        times: list[int] = []
        t = 0.0
        while len(times) < cfg.max_movements:
            t += rng.exponential(1.0 / rate) if rate > 0 else math.inf
            if t >= cfg.horizon_steps:
                break
            times.append(int(t))
        if not times:  # an episode always has at least one movement
            times = [0]
        self.movements: list[Movement] = []
        dep_runways, arr_runways = sorted(self.entries), sorted(self.exits)
        for i, when in enumerate(times):
            u = rng.random()
            departure = (u < cfg.departure_share or not arr_runways) and bool(dep_runways)
            order = rng.permutation(len(self.stands))
            if departure:
                r = dep_runways[int(rng.integers(len(dep_runways)))]
                goal = self.entries[r][int(rng.integers(len(self.entries[r])))]
                self.movements.append(Movement(i, True, when, goal, -1, r, order))
            else:
                r = arr_runways[int(rng.integers(len(arr_runways)))]
                start = self.exits[r][int(rng.integers(len(self.exits[r])))]
                # touchdown at least approach_steps after the start so its window is known in advance
                self.movements.append(Movement(i, False, when + cfg.approach_steps, -1, start, r, order))
        self.t = 0
        self.active: list[int] = []
        self.pending = list(range(len(self.movements)))
        # runway windows: [start, end, owner]; landings are known from the schedule
        self.windows: dict[int, list[list[int]]] = {r: [] for r in range(len(self.s.runway_ids))}
        self._window_of: dict[int, list[int]] = {}
        for m in self.movements:
            if not m.departure:
                w = [m.request - cfg.approach_steps, m.request + cfg.roll_steps, m.index]
                self.windows[m.runway].append(w)
                self._window_of[m.index] = w
        self._active_keys: set[tuple[int, int, str]] = set()
        self.events: list[tuple[int, str, float, float]] = []  # (t, kind, x, y)
        self.conflict_counts = {k: 0 for k in CONFLICT_KINDS}
        self._spawn()

    # ------------------------------------------------------------------ queries
    def cell(self, i: int) -> int:
        return int(self.s.pos_cell[self.movements[i].pos])

    def runway_active(self, r: int, t: int, exclude: int = -1) -> bool:
        return any(a <= t < b and owner != exclude for a, b, owner in self.windows[r])

    def dist_to_goal(self, i: int) -> int:
        m = self.movements[i]
        return int(self.s.dist_to(m.goal)[m.pos])

    def legal_actions(self, i: int) -> list[int]:
        """Actions allowed for aircraft ``i`` now: hold (0) and every move toward a reachable goal."""
        m = self.movements[i]
        dist = self.s.dist_to(m.goal)
        return [0] + [a for a, q in self.s.successors(m.pos, m.goal) if dist[q] < UNREACHABLE]

    def safe_actions(self, i: int) -> list[int]:
        """:meth:`legal_actions` without the moves that make a conflict whatever the others do.

        A move is left out when its target cell is so close to another aircraft's cell that no
        move of that aircraft restores separation (with 2 cells: the target cell is occupied), when
        it enters a segment in which another aircraft comes the opposite way (it cannot turn back
        inside a segment, so the two meet head-on or swap), or when it enters a runway that is
        active next step by someone else. Holding is always allowed. (The only escape
        the rule ignores is the other aircraft reaching its goal in that step and leaving.)
        """
        s, m = self.s, self.movements[i]
        occupied: set[int] = set()
        oncoming: dict[int, set[int]] = {}
        for j in self.active:
            if j == i:
                continue
            pj = self.movements[j].pos
            occupied.add(int(s.pos_cell[pj]))
            e = int(s.pos_edge[pj])
            if e >= 0:
                oncoming.setdefault(e, set()).add(int(s.pos_dir[pj]))
        out = [0]
        for a in self.legal_actions(i)[1:]:
            q = s.action_target(m.pos, a)
            c = int(s.pos_cell[q])
            if self._sure_ball is not None and any(int(cc) in occupied for cc in self._sure_ball[c]):
                continue
            e = int(s.pos_edge[q])
            if e >= 0 and int(s.pos_edge[m.pos]) != e and (oncoming.get(e, set()) - {int(s.pos_dir[q])}):
                continue
            r = int(s.cell_runway[c])
            here = int(s.cell_runway[s.pos_cell[m.pos]])
            if r >= 0 and r != here and self.runway_active(r, self.t + 1, exclude=i):
                continue  # entering an active runway (one already on it may move on to clear it)
            out.append(a)
        return out

    @property
    def finished(self) -> bool:
        return not self.pending and not self.active

    @property
    def truncated(self) -> bool:
        return self.t >= self.max_steps

    # ------------------------------------------------------------------ stepping
    def _spawn_cells_free(self, pos: int) -> bool:
        cell = int(self.s.pos_cell[pos])
        near = set(map(int, self.s.ball[cell]))
        return not any(self.cell(j) in near for j in self.active)

    def _pick_stand(self, m: Movement) -> int:
        busy = {self.movements[j].goal for j in self.active if not self.movements[j].departure}
        busy |= {int(self.s.pos_cell[self.movements[j].pos]) for j in self.active}
        for k in m.stand_order:
            stand = int(self.stands[k])
            if stand not in busy:
                return stand
        return int(self.stands[m.stand_order[0]])

    def _spawn(self) -> list[int]:
        spawned: list[int] = []
        still: list[int] = []
        for n, i in enumerate(self.pending):
            m = self.movements[i]
            if m.request - (0 if m.departure else self.cfg.approach_steps) > self.t:
                still.extend(self.pending[n:])  # the schedule is in time order: nobody later is ready
                break
            ready = m.request if m.departure else m.request + self.cfg.roll_steps
            if ready > self.t or len(self.active) >= self.cfg.max_active:
                if ready <= self.t and not m.departure:
                    self._hold_runway(m)
                still.append(i)
                continue
            if m.departure:
                start = self._pick_stand(m)
                arrival_goals = {self.movements[j].goal for j in self.active}
                if start in arrival_goals or not self._spawn_cells_free(start):
                    still.append(i)
                    continue
            else:
                start = m.start
                if not self._spawn_cells_free(start):
                    self._hold_runway(m)
                    still.append(i)
                    continue
                m.goal = self._pick_stand(m)
            m.pos = start
            m.spawn_t = self.t
            m.unimpeded = int(self.s.dist_to(m.goal)[start])
            self.active.append(i)
            spawned.append(i)
        self.pending = still
        return spawned

    def _hold_runway(self, m: Movement) -> None:
        """A landed aircraft that cannot vacate yet keeps its runway active for one more step."""
        w = self._window_of.get(m.index)
        if w is not None:
            w[1] = max(w[1], self.t + 1)

    def _takeoff(self, m: Movement) -> None:
        r, roll = m.runway, self.cfg.roll_steps
        start = self.t
        # earliest start whose roll overlaps no window: one pass in order of window start
        for a, b in sorted((a, b) for a, b, _ in self.windows[r] if b > start):
            if a >= start + roll:
                break
            start = max(start, b)
        self.windows[r].append([start, start + roll, m.index])
        m.takeoff_t = start

    def step(self, actions: dict[int, int]) -> StepResult:
        """Apply one action per active aircraft (missing or illegal actions hold), advance one step."""
        res = StepResult()
        s = self.s
        moves: dict[int, tuple[int, int]] = {}
        for i in list(self.active):
            m = self.movements[i]
            a = int(actions.get(i, 0))
            before = m.pos
            after = s.action_target(before, a) if a in self.legal_actions(i) else before
            d0 = int(s.dist_to(m.goal)[before])
            d1 = int(s.dist_to(m.goal)[after])
            moves[i] = (before, after)
            res.moved[i] = d0 - d1
            res.held[i] = after == before
            if after == before:
                m.held += 1
                m.wait_run += 1
                nxt = int(s.next_to(m.goal)[before])
                if nxt >= 0 and s.cell_runway[s.pos_cell[nxt]] >= 0 and s.cell_runway[s.pos_cell[before]] < 0:
                    m.crossing_wait += 1
            else:
                m.wait_run = 0
                (x0, y0), (x1, y1) = s.cell_xy[s.pos_cell[before]], s.cell_xy[s.pos_cell[after]]
                m.heading = math.atan2(y1 - y0, x1 - x0)
            m.pos = after
        self.t += 1
        if self.t % 16 == 0:  # windows that ended can no longer matter
            for r, wins in self.windows.items():
                self.windows[r] = [w for w in wins if w[1] >= self.t - 1]
        for i in list(self.active):
            m = self.movements[i]
            if m.pos == m.goal:
                m.done_t = self.t
                self.active.remove(i)
                res.finished.append(i)
                if m.departure:
                    self._takeoff(m)
        res.spawned = self._spawn()
        self._detect(moves, res)
        return res

    def advance_idle(self) -> None:
        """Skip time while nobody taxis and movements are still to come (no decisions to make)."""
        while not self.active and self.pending and self.t < self.max_steps:
            self.t += 1
            self._spawn()

    # ------------------------------------------------------------------ conflicts
    def conflicts(self, moves: dict[int, tuple[int, int]] | None = None) -> set[tuple[int, int, str]]:
        """Every conflict now, as ``(i, j, kind)`` with ``i < j`` (``j = -1`` for a runway incursion).

        :param moves: ``index -> (position before, position after)`` of the last step, to find
            aircraft that swapped cells (head-on without an interior cell between them).
        """
        s = self.s
        found: set[tuple[int, int, str]] = set()
        occ: dict[int, list[int]] = {}
        for i in self.active:
            occ.setdefault(self.cell(i), []).append(i)
        on_edge: dict[int, list[tuple[int, int]]] = {}
        for i in self.active:
            c = self.cell(i)
            for cc in s.ball[c]:
                for j in occ.get(int(cc), ()):
                    if j != i:
                        found.add((min(i, j), max(i, j), "separation"))
            p = self.movements[i].pos
            e = int(s.pos_edge[p])
            if e >= 0:
                on_edge.setdefault(e, []).append((i, int(s.pos_dir[p])))
            r = int(s.cell_runway[c])
            if r >= 0 and self.runway_active(r, self.t, exclude=i):
                found.add((i, -1, "runway"))
        for group in on_edge.values():
            for a, (i, di) in enumerate(group):
                for j, dj in group[a + 1 :]:
                    if di != dj:
                        found.add((min(i, j), max(i, j), "head_on"))
        if moves:
            hops = {(int(s.pos_cell[b]), int(s.pos_cell[a])): i for i, (b, a) in moves.items() if a != b}
            for (cb, ca), i in hops.items():
                j = hops.get((ca, cb))
                if j is not None and j != i and j in self.active and i in self.active:
                    found.add((min(i, j), max(i, j), "head_on"))
        return found

    def _detect(self, moves: dict[int, tuple[int, int]], res: StepResult) -> None:
        found = self.conflicts(moves)
        new = found - self._active_keys
        self._active_keys = found
        for i, j, _ in found:
            for k in (i, j):
                if k >= 0:
                    res.in_conflict[k] = True
        for i, j, kind in sorted(new, key=lambda x: (x[0], x[1], x[2])):
            self.conflict_counts[kind] += 1
            x, y = self.s.cell_xy[self.cell(i)]
            self.events.append((self.t, kind, float(x), float(y)))
            for k in (i, j):
                if k >= 0:
                    self.movements[k].conflicts += 1
                    res.new_conflicts[k] = res.new_conflicts.get(k, 0) + 1
        cells = {i: self.cell(i) for i in self.active}
        occupied: dict[int, int] = {}
        for c in cells.values():
            occupied[c] = occupied.get(c, 0) + 1
        for i, c in cells.items():
            n = sum(occupied.get(int(cc), 0) for cc in self._near_ball[c]) - 1
            res.near[i] = n > 0

    # ------------------------------------------------------------------ prediction (foresight)
    def path_ahead(self, i: int, horizon: int) -> list[int]:
        """Positions of aircraft ``i`` over the next ``horizon`` steps if it follows its shortest path."""
        m = self.movements[i]
        nxt = self.s.next_to(m.goal)
        out, p = [], m.pos
        for _ in range(horizon):
            q = int(nxt[p])
            p = p if q < 0 else q
            out.append(p)
        return out

    # ------------------------------------------------------------------ KPIs
    def stats(self) -> dict[str, float]:
        done = [m for m in self.movements if m.done_t >= 0]
        n_sched = len(self.movements)
        # departures: pushback request to start of the take-off roll (queueing at the runway included)
        taxi = np.array(
            [
                m.takeoff_t - m.request if m.departure else m.done_t - m.request - self.cfg.roll_steps
                for m in done
            ],
            dtype=float,
        )
        unimp = np.array([m.unimpeded for m in done], dtype=float)
        hours = max(self.t, 1) * self.cfg.dt_s / 3600.0
        total_conf = sum(self.conflict_counts.values())
        moved = max(len(done) + len(self.active), 1)
        return {
            "movements": float(n_sched),
            "completed": float(len(done)),
            "completed_pct": 100.0 * len(done) / max(n_sched, 1),
            "conflicts": float(total_conf),
            "conflicts_per_100": 100.0 * total_conf / moved,
            "separation_conflicts": float(self.conflict_counts["separation"]),
            "head_on_conflicts": float(self.conflict_counts["head_on"]),
            "runway_conflicts": float(self.conflict_counts["runway"]),
            "taxi_time_min": float(taxi.mean() * self.cfg.dt_s / 60.0) if len(done) else math.nan,
            "unimpeded_min": float(unimp.mean() * self.cfg.dt_s / 60.0) if len(done) else math.nan,
            "delay_pct": float(100.0 * (taxi.sum() / max(unimp.sum(), 1.0) - 1.0)) if len(done) else math.nan,
            "throughput_per_hour": len(done) / hours,
            "crossing_wait_s": float(np.mean([m.crossing_wait for m in done]) * self.cfg.dt_s)
            if len(done)
            else 0.0,
            "sim_minutes": self.t * self.cfg.dt_s / 60.0,
        }


def _balls(surface: Surface, radius: int) -> list[np.ndarray]:
    """Cells closer than ``radius`` hops to each cell."""
    from collections import deque

    adj = surface.cell_adj  # type: ignore[attr-defined]
    out = []
    for c in range(surface.n_cells):
        seen = {c: 0}
        queue = deque([c])
        while queue:
            a = queue.popleft()
            if seen[a] + 1 >= radius:
                continue
            for b in adj[a]:
                if b not in seen:
                    seen[b] = seen[a] + 1
                    queue.append(b)
        out.append(np.array(sorted(seen), dtype=np.int32))
    return out
