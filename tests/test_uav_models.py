"""UAV engine: channel, energy and mobility models against hand-computed values; SOCP and LP feasibility."""

from __future__ import annotations

import math

import numpy as np
import pytest
from pydantic import ValidationError

from fieldrl.simulators.uav import channel as ch
from fieldrl.simulators.uav.engine import LOCAL, Allocation, UavWorld
from fieldrl.simulators.uav.mobility import RoadGrid
from fieldrl.simulators.uav.opt import TrajectoryPlanner, solve_offloading_lp
from fieldrl.simulators.uav.params import UavParams


def test_los_probability_matches_al_hourani_urban_curve():
    # 1 / (1 + 9.61 exp(-0.16 (45 - 9.61))), worked by hand
    expected = 1.0 / (1.0 + 9.61 * math.exp(-0.16 * (45.0 - 9.61)))
    assert ch.los_probability(45.0) == pytest.approx(expected, rel=1e-12)
    assert ch.los_probability(45.0) == pytest.approx(0.9677, abs=1e-4)
    assert ch.los_probability(90.0) > 0.999 and ch.los_probability(0.0) < 0.03
    assert ch.elevation_deg(100.0, 100.0) == pytest.approx(45.0)


def test_air_to_ground_loss_is_fspl_plus_weighted_excess_loss():
    # 100 m away horizontally, 100 m up, 2 GHz: FSPL = 20 log10(4 pi f d / c)
    d = math.hypot(100.0, 100.0)
    fspl = 20 * math.log10(4 * math.pi * 2e9 * d / 299_792_458.0)
    assert fspl == pytest.approx(81.47, abs=0.01)
    p = 1.0 / (1.0 + 9.61 * math.exp(-0.16 * (45.0 - 9.61)))
    expected = fspl + p * 1.0 + (1 - p) * 20.0
    assert ch.a2g_path_loss_db(100.0, 100.0, 2e9) == pytest.approx(expected, rel=1e-12)


def test_uma_loss_follows_3gpp_38901_and_never_drops_below_los():
    # NLOS at 500 m, 2 GHz, UT 1.5 m: 13.54 + 39.08 log10(500) + 20 log10(2)
    expected = 13.54 + 39.08 * math.log10(500.0) + 20 * math.log10(2.0)
    assert ch.uma_path_loss_db(500.0, 2.0) == pytest.approx(expected, rel=1e-12)
    assert ch.uma_path_loss_db(500.0, 2.0) == pytest.approx(125.04, abs=0.01)
    los_10m = 28.0 + 22.0 * 1.0 + 20 * math.log10(2.0)
    assert ch.uma_path_loss_db(10.0, 2.0) >= los_10m - 1e-9


def test_shannon_rate_with_noise_over_the_granted_band():
    # 1 MHz, 0.2 W, 100 dB loss, -174 dBm/Hz + 9 dB: N = 10^((-174+9-30)/10) * 1e6 W
    noise = 10 ** ((-174 + 9 - 30) / 10) * 1e6
    snr = 0.2 * 1e-10 / noise
    assert ch.shannon_rate_bps(1e6, 0.2, 100.0, -174.0, 9.0) == pytest.approx(1e6 * math.log2(1 + snr))
    assert ch.shannon_rate_bps(0.0, 0.2, 100.0, -174.0, 9.0) == 0.0


def test_propulsion_power_matches_zeng_2019_hand_values():
    assert ch.propulsion_power_w(0.0) == pytest.approx(79.86 + 88.63)  # hover: P0 + Pi
    v = 10.0
    blade = 79.86 * (1 + 3 * v**2 / 120.0**2)
    induced = 88.63 * math.sqrt(math.sqrt(1 + v**4 / (4 * 4.03**4)) - v**2 / (2 * 4.03**2))
    parasite = 0.5 * 0.6 * 1.225 * 0.05 * 0.503 * v**3
    assert ch.propulsion_power_w(v) == pytest.approx(blade + induced + parasite, rel=1e-12)
    # the familiar U shape: cheaper to cruise at ~10-20 m/s than to hover or to race
    assert ch.propulsion_power_w(15.0) < ch.propulsion_power_w(0.0) < ch.propulsion_power_w(40.0)


def test_computing_energy_is_kappa_f_squared_cycles():
    assert ch.computing_energy_j(1e-28, 1e9, 4e8) == pytest.approx(0.04)


def test_partial_offloading_delay_is_max_of_local_and_remote():
    p = UavParams(n_uavs=1, n_vehicles=1, deadline_max_s=1.0, deadline_min_s=1.0)
    world = UavWorld(p)
    world.reset(0)
    world.tasks.bits[:] = 1e6
    world.tasks.cycles_per_bit[:] = 500.0
    world.tasks.present[:] = True
    alloc = Allocation(np.array([1]), np.array([1.0]), np.array([1.0]))  # BS, whole band and CPU
    terms = world.remote_terms(alloc)
    out = world.evaluate(alloc, np.array([0.3]))
    local = 0.7 * 5e8 / 1e9
    remote = 0.3 * (1e6 / terms["rate"][0] + 5e8 / 20e9)
    assert out.delay[0] == pytest.approx(max(local, remote))
    assert out.e_local[0] == pytest.approx(1e-28 * 1e18 * 0.7 * 5e8)
    assert out.e_remote[0] == pytest.approx(1e-28 * (20e9) ** 2 * 0.3 * 5e8)
    assert out.success[0]


def test_vehicles_stay_on_roads_inside_the_area_and_are_seeded():
    grid = RoadGrid(1000.0, 250.0)
    rng = np.random.default_rng(3)
    grid.reset(50, rng, 8.0, 16.0)
    for _ in range(100):
        grid.step(1.0, rng, 0.3)
        on_road = np.isclose(grid.pos / 250.0, np.round(grid.pos / 250.0), atol=1e-6).any(axis=1)
        assert on_road.all()
        assert (grid.pos >= -1e-9).all() and (grid.pos <= 1000.0 + 1e-9).all()
    again = RoadGrid(1000.0, 250.0)
    rng2 = np.random.default_rng(3)
    again.reset(50, rng2, 8.0, 16.0)
    for _ in range(100):
        again.step(1.0, rng2, 0.3)
    assert np.array_equal(grid.pos, again.pos)


def test_socp_waypoints_respect_speed_altitude_area_and_separation():
    p = UavParams(n_uavs=4, n_vehicles=40, load=2.0, d_min_m=60.0)
    world = UavWorld(p)
    planner = TrajectoryPlanner(world)
    for seed in range(3):
        world.reset(seed)
        for _ in range(8):
            before = world.uav.copy()
            result = planner.plan()
            q = result.waypoints
            assert all(s in ("optimal", "optimal_inaccurate", "hover") for s in result.status)
            # checked independently of the solver
            step = np.linalg.norm(q[:, :2] - before[:, :2], axis=1)
            assert (step <= p.v_max_mps * p.slot_s + 1e-4).all()
            assert (np.abs(q[:, 2] - before[:, 2]) <= p.vz_max_mps * p.slot_s + 1e-4).all()
            assert (q[:, 2] >= p.z_min_m - 1e-4).all() and (q[:, 2] <= p.z_max_m + 1e-4).all()
            assert (q[:, :2] >= -1e-4).all() and (q[:, :2] <= p.area_m + 1e-4).all()
            gaps = np.linalg.norm(q[:, None] - q[None], axis=2)[np.triu_indices(4, 1)]
            assert (gaps >= p.d_min_m - 1e-3).all()
            world.fly(q)
            world.advance()
    assert result.solve_ms.shape == (4,)


def test_socp_moves_a_lone_uav_towards_its_vehicles():
    p = UavParams(n_uavs=1, n_vehicles=5)
    world = UavWorld(p)
    world.reset(0)
    world.roads.pos[:] = [900.0, 900.0]
    world.uav[:] = [100.0, 100.0, 100.0]
    q = TrajectoryPlanner(world).plan().waypoints[0]
    assert np.linalg.norm(q[:2] - world.uav[0, :2]) == pytest.approx(p.v_max_mps, rel=1e-3)
    assert q[0] > 100 and q[1] > 100


def _brute_force(tl, tr, el, er, tau, w_d, w_e, w_o):
    lam = np.linspace(0, 1, 20001)
    t = np.maximum((1 - lam) * tl, lam * tr) if np.isfinite(tr) else (1 - 0 * lam) * tl
    if not np.isfinite(tr):
        lam = np.zeros_like(lam)
        er = 0.0
    cost = w_d * t + w_e * (el * (1 - lam) + er * lam) + w_o * np.maximum(t - tau, 0)
    return cost.min()


def test_lp_ratios_are_feasible_and_optimal_against_brute_force():
    rng = np.random.default_rng(0)
    n = 40
    tl = rng.uniform(0.1, 1.2, n)
    tr = rng.uniform(0.05, 2.0, n)
    tr[::7] = np.inf  # no server granted
    el, er = rng.uniform(0.01, 0.5, n), rng.uniform(0.01, 0.5, n)
    tau = rng.uniform(0.2, 0.8, n)
    include = rng.random(n) < 0.9
    w_d, w_e, w_o = 1.0, 0.5, 50.0
    res = solve_offloading_lp(tl, tr, el, er, tau, include, w_d, w_e, w_o)
    assert res.status == 0
    lam = res.ratio
    assert ((lam >= -1e-9) & (lam <= 1 + 1e-9)).all()
    assert (lam[~include] == 0).all() and (lam[~np.isfinite(tr)] == 0).all()
    delay = np.maximum((1 - lam) * tl, np.where(np.isfinite(tr), lam * np.nan_to_num(tr, posinf=0), 0))
    best_possible = np.where(np.isfinite(tr), tl * np.nan_to_num(tr, posinf=0) / (tl + np.nan_to_num(tr)), tl)
    meetable = include & (best_possible <= tau)
    assert (delay[meetable] <= tau[meetable] + 1e-7).all()
    brute = sum(
        _brute_force(tl[k], tr[k], el[k], er[k], tau[k], w_d, w_e, w_o) for k in np.flatnonzero(include)
    )
    assert res.objective == pytest.approx(brute, rel=1e-3, abs=1e-4)


def test_lp_with_no_tasks_and_with_impossible_deadlines_does_not_fail():
    empty = solve_offloading_lp(*(np.zeros(3) for _ in range(5)), np.zeros(3, bool), 1.0, 1.0, 10.0)
    assert (empty.ratio == 0).all()
    res = solve_offloading_lp(
        np.array([1.0]), np.array([1.0]), np.ones(1), np.ones(1), np.array([1e-3]), np.ones(1, bool), 1, 0, 10
    )
    assert res.status == 0 and res.ratio[0] == pytest.approx(0.5, abs=1e-6)  # least overshoot


def test_bad_parameters_name_the_field_and_the_rule():
    with pytest.raises(ValidationError, match="n_uavs"):
        UavParams(n_uavs=0)
    with pytest.raises(ValidationError, match="deadline_max_s"):
        UavParams(deadline_max_s=2.0, slot_s=1.0)
    with pytest.raises(ValidationError, match="z_min_m"):
        UavParams(z_min_m=200.0, z_max_m=100.0)
    with pytest.raises(ValidationError, match="rectifer"):
        UavParams(rectifer="rule")


def test_local_server_index_means_no_offloading():
    world = UavWorld(UavParams(n_uavs=1, n_vehicles=3))
    world.reset(1)
    alloc = Allocation(np.full(3, LOCAL), np.zeros(3), np.zeros(3))
    out = world.evaluate(alloc, np.ones(3))
    assert (out.e_tx == 0).all() and (out.e_remote == 0).all()
    assert out.delay == pytest.approx(world.tasks.cycles / 1e9)
