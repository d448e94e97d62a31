"""Chemo baseline controllers and the domain's KPIs."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from fieldrl.domains.base import EpisodeRecord
from fieldrl.domains.chemo import DOMAIN
from fieldrl.domains.chemo.params import ChemoParams
from fieldrl.policies.base import Policy


def _build(name: str, **settings: object) -> Policy:
    spec = DOMAIN.heuristics[name]
    return spec.build(spec.settings_model(**settings), ChemoParams(), name)


def _evaluate(policy: Policy, preset: str, seeds: list[int]) -> dict[str, np.ndarray]:
    envs = DOMAIN.make_eval_envs(ChemoParams(preset=preset), seeds)
    obs = envs.reset()
    policy.reset(envs.n)
    start = np.ones(envs.n, dtype=bool)
    done = np.zeros(envs.n, dtype=bool)
    rows: dict[str, list] = {k: [] for k in ("r", "a", "active", "term", "state", "dose")}
    while not done.all():
        actions = policy.act(obs, start)
        start[:] = False
        rows["active"].append(~done)
        obs, reward, terminated, truncated, info = envs.step(actions)
        for key, value in zip(
            ("r", "a", "term", "state", "dose"),
            (reward, actions, terminated, info["state"], info["dose"]),
            strict=True,
        ):
            rows[key].append(value)
        done |= terminated | truncated
    record = EpisodeRecord(
        rewards=np.array(rows["r"]),
        actions=np.array(rows["a"]),
        active=np.array(rows["active"]),
        terminated=np.array(rows["term"]),
        info={"state": np.array(rows["state"]), "dose": np.array(rows["dose"])},
        initial_info=envs.initial_info,
    )
    return DOMAIN.episode_kpis(record)


@pytest.mark.parametrize("name", sorted(DOMAIN.heuristics))
def test_actions_have_batch_shape_and_dose_range(name: str) -> None:
    policy = _build(name)
    assert isinstance(policy, Policy) and policy.name == name
    policy.reset(5)
    obs = np.random.default_rng(0).random((5, 3)).astype(np.float32) * [2, 2, 1]
    for start in (np.ones(5, dtype=bool), np.zeros(5, dtype=bool)):
        actions = policy.act(obs, start)
        assert actions.shape == (5, 1) and actions.dtype == np.float32
        assert np.all((actions >= 0) & (actions <= 1))


def test_pulsed_alternates_on_and_off_days_and_restarts_at_episode_start() -> None:
    policy = _build("pulsed", dose=0.8, on_days=1.0, off_days=0.5)  # 4 steps on, 2 off
    policy.reset(2)
    obs = np.zeros((2, 3), dtype=np.float32)
    doses = []
    for k in range(9):
        start = np.array([k == 0, k in (0, 7)])
        doses.append(policy.act(obs, start)[:, 0])
    doses = np.array(doses)
    on = np.float32(0.8)
    np.testing.assert_array_equal(doses[:, 0], [on, on, on, on, 0, 0, on, on, on])
    np.testing.assert_array_equal(doses[:, 1], [on, on, on, on, 0, 0, on, on, on])
    start = np.array([False, True])
    np.testing.assert_array_equal(policy.act(obs, start)[:, 0], [on, on])
    # env 0 continues its cycle (steps 10, 11 are off), env 1 restarted (steps 1, 2 are on)
    np.testing.assert_array_equal(policy.act(obs, np.zeros(2, bool))[:, 0], [0, on])
    np.testing.assert_array_equal(policy.act(obs, np.zeros(2, bool))[:, 0], [0, on])


def test_tumour_feedback_doses_with_tumour_and_pauses_on_high_drug() -> None:
    policy = _build("tumour-feedback", gain=2.0, target=0.1, max_dose=0.9, b_limit=0.5)
    policy.reset(4)
    obs = np.array([[0.05, 1, 0], [0.3, 1, 0], [1.5, 1, 0], [1.5, 1, 0.6]], dtype=np.float32)
    actions = policy.act(obs, np.ones(4, dtype=bool))[:, 0]
    np.testing.assert_allclose(actions, [0.0, 0.4, 0.9, 0.0], rtol=1e-6)


def test_max_dose_shrinks_tumour_and_keeps_patient_alive_where_no_treatment_does_not() -> None:
    seeds = [0, 1]
    untreated = _evaluate(_build("none"), "s1", seeds)
    treated = _evaluate(_build("max-dose"), "s1", seeds)
    assert np.all(treated["tumour_burden"] < 1.0) and np.all(untreated["tumour_burden"] > 100)
    assert np.all(treated["survival"] == 100) and np.all(untreated["survival"] == 0)
    np.testing.assert_allclose(treated["total_dose"], 150.0)
    assert np.all(untreated["normal_cells"] < 70) and np.all(treated["normal_cells"] > 70)


def test_tumour_feedback_default_beats_fixed_schedules_on_return_in_s1() -> None:
    feedback = _evaluate(_build("tumour-feedback"), "s1", [0])
    constant = _evaluate(_build("constant"), "s1", [0])
    assert feedback["survival"][0] == 100
    assert feedback["return"][0] > constant["return"][0]
    assert feedback["total_dose"][0] < constant["total_dose"][0]


@pytest.mark.parametrize(
    ("name", "settings"),
    [
        ("constant", {"dose": 1.5}),
        ("constant", {"dose": -0.1}),
        ("pulsed", {"on_days": 0}),
        ("pulsed", {"off_days": -1}),
        ("tumour-feedback", {"b_limit": 2}),
        ("tumour-feedback", {"gain": -1}),
        ("none", {"dose": 0.5}),
        ("max-dose", {"anything": 1}),
    ],
)
def test_settings_models_reject_out_of_range_or_unknown_values(name: str, settings: dict) -> None:
    with pytest.raises(ValidationError):
        DOMAIN.heuristics[name].settings_model(**settings)


def test_trace_starts_at_day_zero_in_percent_of_initial() -> None:
    envs = DOMAIN.make_eval_envs(ChemoParams(), [0])
    envs.reset()
    states, doses = [], []
    for _ in range(8):
        _, _, _, _, info = envs.step(np.full((1, 1), 0.5))
        states.append(info["state"])
        doses.append(info["dose"])
    record = EpisodeRecord(
        rewards=np.zeros((8, 1)),
        actions=np.full((8, 1, 1), 0.5),
        active=np.ones((8, 1), dtype=bool),
        terminated=np.zeros((8, 1), dtype=bool),
        info={"state": np.array(states), "dose": np.array(doses)},
        initial_info=envs.initial_info,
    )
    trace = DOMAIN.episode_trace(record, 0)
    assert list(trace.columns) == ["day", "tumour", "normal", "immune", "drug", "dose"]
    assert len(trace) == 9 and trace["day"].iloc[-1] == 2.0
    assert trace["tumour"].iloc[0] == 100.0 and trace["normal"].iloc[0] == 100.0
    assert trace["dose"].iloc[0] == 0.5
