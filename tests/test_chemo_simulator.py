"""The batched chemo engine: accuracy against solve_ivp, reproducibility, episode semantics."""

from __future__ import annotations

import numpy as np
import pytest

from fieldrl.simulators.chemo import (
    DEATH_REWARD,
    NOMINAL_PARAMS,
    NOMINAL_STATE,
    PRESETS,
    ChemoBatch,
    ChemoNoise,
    reference_trajectory,
    rhs,
)

STEPS = 600


def _schedules() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {
        "zero": np.zeros(STEPS),
        "one": np.ones(STEPS),
        "random": rng.random(STEPS),
        "bang-bang": (rng.random(STEPS) < 0.5).astype(float),
        "pulsed-weekly": np.tile(np.r_[np.ones(12), np.zeros(16)], 30)[:STEPS],
        "pulsed-short": np.tile(np.r_[1.0, 0.0, 0.0, 0.0], STEPS // 4),
    }


def _run(batch: ChemoBatch, doses: np.ndarray) -> np.ndarray:
    """States (steps + 1, n, 4) for doses (steps, n)."""
    states = [batch.state.copy()]
    for d in doses:
        batch.step(d)
        states.append(batch.state.copy())
    return np.array(states)


def _rel_err(x: np.ndarray, ref: np.ndarray) -> np.ndarray:
    return np.max(np.abs(x - ref) / np.maximum(np.abs(ref), 1e-9), axis=0)


@pytest.mark.parametrize("pkpd", [0.0, 0.1])
def test_rk4_matches_solve_ivp_within_1e_3_relative_at_every_step(pkpd: float) -> None:
    schedules = _schedules()
    doses = np.stack(list(schedules.values()), axis=1)  # (steps, n)
    n = doses.shape[1]
    batch = ChemoBatch(n, ChemoNoise(pkpd_noise=pkpd))
    batch.reset_patients(np.arange(n), [np.random.default_rng(10 + i) for i in range(n)])
    params, init = batch.params.copy(), batch.init_state.copy()
    states = _run(batch, doses)
    for i, name in enumerate(schedules):
        ref = reference_trajectory(params[i], init[i], doses[:, i])
        err = _rel_err(states[:, i], ref)
        assert err.max() <= 1e-3, (name, err)


def test_rhs_matches_the_engine_derivative() -> None:
    rng = np.random.default_rng(3)
    x = rng.random((4, 5))
    p = np.array(list(NOMINAL_PARAMS.values()))[:, None] * (1 + 0.05 * rng.random((16, 5)))
    u = rng.random(5)
    np.testing.assert_allclose(ChemoBatch._f(x, u, p), rhs(x, u, p), rtol=1e-12)


@pytest.mark.parametrize("preset", ["s1", "s5"])
def test_same_seed_gives_identical_trajectory(preset: str) -> None:
    doses = np.random.default_rng(1).random((200, 1))
    runs = []
    for _ in range(2):
        b = ChemoBatch(1, PRESETS[preset])
        obs0 = b.reset_patients([0], [np.random.default_rng(123)])
        obs = [obs0]
        for d in doses:
            obs.append(b.step(d)[0])
        runs.append((b.params.copy(), np.array(obs), b.state.copy()))
    for a, b in zip(runs[0], runs[1], strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("preset", ["s1", "s5"])
def test_patient_is_identical_alone_and_inside_a_batch(preset: str) -> None:
    n, pos, seed = 64, 37, 42
    rng = np.random.default_rng(7)
    doses = rng.random((STEPS, n))
    alone = ChemoBatch(1, PRESETS[preset])
    batch = ChemoBatch(n, PRESETS[preset])
    seeds = [1000 + i for i in range(n)]
    seeds[pos] = seed
    alone.reset_patients([0], [np.random.default_rng(seed)])
    batch.reset_patients(np.arange(n), [np.random.default_rng(s) for s in seeds])
    for d in doses:
        o1, r1, te1, tr1 = alone.step(d[pos : pos + 1])
        o2, r2, te2, tr2 = batch.step(d)
        np.testing.assert_array_equal(alone.state[0], batch.state[pos])
        np.testing.assert_array_equal(o1[0], o2[pos])
        assert (r1[0], te1[0], tr1[0]) == (r2[pos], te2[pos], tr2[pos])


def test_noise_level_does_not_change_the_patient_draws() -> None:
    """Draw layout is fixed, so the same seed gives the same unit draws in every preset."""
    quiet, noisy = ChemoBatch(1, PRESETS["s1"]), ChemoBatch(1, PRESETS["s2"])
    quiet.reset_patients([0], [np.random.default_rng(5)])
    noisy.reset_patients([0], [np.random.default_rng(5)])
    nominal = np.array(list(NOMINAL_PARAMS.values()))
    np.testing.assert_array_equal(quiet.params[0], nominal)
    multipliers = noisy.params[0] / nominal - 1.0
    assert np.all(np.abs(multipliers) <= 0.05) and np.any(np.abs(multipliers) > 0.01)
    rng = np.random.default_rng(5)
    np.testing.assert_allclose(multipliers, 0.05 * rng.uniform(-1, 1, 16), rtol=1e-9)


def test_initial_state_spread_and_zero_drug() -> None:
    b = ChemoBatch(200, ChemoNoise(state_noise=0.2))
    b.reset_patients(np.arange(200), [np.random.default_rng(s) for s in range(200)])
    ratio = b.init_state[:, :3] / NOMINAL_STATE[:3]
    assert np.all(np.abs(ratio - 1) <= 0.1) and np.abs(ratio - 1).max() > 0.09
    assert np.all(b.init_state[:, 3] == 0.0)


def test_no_treatment_kills_with_reward_minus_100_and_stops_with_terminated() -> None:
    b = ChemoBatch(1)
    b.reset_patients([0], [np.random.default_rng(0)])
    n0 = b.init_state[0, 0]
    for _ in range(STEPS):
        pre = b.state[0].copy()
        _, reward, terminated, truncated = b.step(np.zeros(1))
        if terminated[0]:
            break
        assert reward[0] == pytest.approx(pre[0] / n0 - pre[1] / b.init_state[0, 1])
    assert terminated[0] and not truncated[0]
    assert reward[0] == DEATH_REWARD
    assert b.state[0, 0] < 0.7 * n0 <= pre[0]


def test_max_dose_survives_and_truncates_exactly_at_max_t() -> None:
    b = ChemoBatch(1, max_t=600)
    b.reset_patients([0], [np.random.default_rng(0)])
    flags = [b.step(np.ones(1))[2:] for _ in range(600)]
    terminated = np.array([f[0][0] for f in flags])
    truncated = np.array([f[1][0] for f in flags])
    assert not terminated.any()
    assert truncated[-1] and not truncated[:-1].any()
    assert b.t[0] == 600


def test_reward_uses_the_pre_step_state_and_the_clipped_dose() -> None:
    b = ChemoBatch(1)
    b.reset_patients([0], [np.random.default_rng(0)])
    _, reward, _, _ = b.step(np.array([5.0]))  # clipped to 1
    assert reward[0] == pytest.approx(1.0 - 1.0 - 1.0)  # N/N0 = T/T0 = 1 at the start
    assert b.state[0, 3] > 0


def test_states_are_clipped_at_zero_and_observations_within_bounds() -> None:
    b = ChemoBatch(32, PRESETS["s4"])
    b.reset_patients(np.arange(32), [np.random.default_rng(s) for s in range(32)])
    rng = np.random.default_rng(0)
    for _ in range(300):
        obs, *_ = b.step(rng.random(32))
        assert np.all(b.state >= 0.0)
        assert obs.dtype == np.float32
        assert np.all(obs >= 0.0) and np.all(obs <= np.array([2.0, 2.0, 1.0], dtype=np.float32))


def test_inactive_patients_do_not_change() -> None:
    b = ChemoBatch(2, PRESETS["s3"])
    b.reset_patients([0, 1], [np.random.default_rng(0), np.random.default_rng(1)])
    before = b.state.copy()
    obs, reward, terminated, truncated = b.step(np.ones(2), active=np.array([True, False]))
    assert not np.array_equal(b.state[0], before[0])
    np.testing.assert_array_equal(b.state[1], before[1])
    assert reward[1] == 0.0 and b.t[1] == 0 and not terminated[1] and not truncated[1]


def test_presets_map_to_dtr_bench_settings() -> None:
    expected = {
        "s1": (0.0, 0.0, 0.0, 0.0),
        "s2": (0.0, 0.0, 0.1, 0.0),
        "s3": (0.2, 0.1, 0.1, 0.0),
        "s4": (0.5, 0.2, 0.1, 0.0),
        "s5": (0.5, 0.2, 0.1, 0.5),
    }
    for name, (obs, state, pkpd, missing) in expected.items():
        assert PRESETS[name] == ChemoNoise(obs, state, pkpd, missing)
