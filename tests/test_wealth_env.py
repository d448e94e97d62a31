"""The wealth (GBWM) Gymnasium env and its scenario parameters."""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env as gym_check_env
from pydantic import ValidationError
from stable_baselines3.common.env_checker import check_env as sb3_check_env

from fieldrl.domains.wealth.env import WealthEnv
from fieldrl.domains.wealth.params import WealthParams
from fieldrl.simulators.gbwm.engine import benchmark_problem


@pytest.mark.parametrize("random", [False, True])
def test_env_passes_gymnasium_and_sb3_checkers(random: bool) -> None:
    make = (lambda: WealthEnv(random=True)) if random else (lambda: WealthEnv(benchmark_problem(4)))
    gym_check_env(make(), skip_render_check=True)
    sb3_check_env(make(), warn=True)


def test_episode_lasts_T_years_and_rewards_sum_to_utility() -> None:
    env = WealthEnv(benchmark_problem(4))
    obs, info = env.reset(seed=3)
    assert env.observation_space.contains(obs) and info["wealth"] == pytest.approx(env.problem.W0)
    total, steps, done = 0.0, 0, False
    while not done:
        obs, reward, done, truncated, info = env.step(np.array([1, 7]))
        total += reward
        steps += 1
        assert not truncated
    assert steps == 16 and total == pytest.approx(info["utility"])
    assert 0 <= info["goals_taken"] <= 1


def test_infeasible_goal_choice_is_take_nothing() -> None:
    env = WealthEnv(benchmark_problem(1))  # the only goal is at T: choices before it do nothing
    env.reset(seed=0)
    _, reward, _, _, info = env.step(np.array([2, 0]))
    assert reward == 0.0 and info["utility"] == 0.0


def test_random_env_draws_a_new_problem_per_episode_reproducibly() -> None:
    env = WealthEnv(random=True)
    o1, _ = env.reset(seed=1)
    p1 = env.problem
    env.reset(seed=2)
    assert env.problem != p1
    o1b, _ = env.reset(seed=1)
    np.testing.assert_array_equal(o1, o1b)


def test_params_choose_one_kind_of_problem() -> None:
    assert WealthParams().problem() == benchmark_problem(4)
    assert WealthParams(benchmark=8).problem().W0 == benchmark_problem(8).W0
    assert WealthParams(random=True).problem() is None
    p = WealthParams(T=10, W0=100, goals=[{"time": 10, "levels": [[200, 1]]}]).problem()
    assert p.is_single_goal
    with pytest.raises(ValidationError, match="choose one"):
        WealthParams(benchmark=4, random=True)
    with pytest.raises(ValidationError, match="extra"):
        WealthParams(bogus=1)
    with pytest.raises(ValidationError, match="goals"):
        WealthParams(T=10, W0=100, goals=[{"time": 12, "levels": [[200, 1]]}])
