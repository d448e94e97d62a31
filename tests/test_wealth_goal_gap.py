"""The wealth domain's ``goal_gap`` observation: a learned entry's own setting (``params:``) that appends
how far wealth is from the next goal's cost; the same two entries in every env, only for that entry."""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import shipped_untuned
from gymnasium.utils.env_checker import check_env as gym_check_env
from stable_baselines3.common.env_checker import check_env as sb3_check_env

from fieldrl.domains.wealth.env import GAP_CLIP, WealthEnv, append_goal_gap, observation_size
from fieldrl.domains.wealth.envs import WealthEvalEnvs, WealthVecEnv
from fieldrl.domains.wealth.params import WealthParams
from fieldrl.evaluation import runner
from fieldrl.scenario import load_scenario

SINGLE = {
    "T": 10,
    "W0": 100,
    "goals": [{"time": 10, "levels": [[200, 1]]}],
    "max_levels": 1,
    "max_obs_goals": 1,
}


def _expected(wealth: float, cost: float, years: float, sigma_max: float) -> tuple[float, float]:
    gap = float(np.clip(math.log(wealth / cost), -GAP_CLIP, GAP_CLIP))
    return gap, float(np.clip(gap / (sigma_max * math.sqrt(years + 1)), -2 * GAP_CLIP, 2 * GAP_CLIP))


@pytest.mark.parametrize("random", [False, True])
def test_env_with_the_gap_passes_gymnasium_and_sb3_checkers(random: bool) -> None:
    params = WealthParams.model_validate({"random": True} if random else SINGLE)

    def make() -> WealthEnv:
        return WealthEnv(params.problem(), random=random, max_levels=params.max_levels, goal_gap=True)

    gym_check_env(make(), skip_render_check=True)
    sb3_check_env(make(), warn=True)


def test_the_gap_is_log_wealth_over_the_goal_cost_and_that_over_the_volatility_of_the_years_left() -> None:
    params = WealthParams.model_validate(SINGLE)
    problem = params.problem()
    env = WealthEnv(problem, max_obs_goals=1, max_levels=1, goal_gap=True)
    plain = WealthEnv(problem, max_obs_goals=1, max_levels=1)
    obs, _ = env.reset(seed=3)
    assert obs.shape == (observation_size(1, 1, goal_gap=True),) == (plain.observation_space.shape[0] + 2,)
    sigma_max = float(problem.frontier.sigma.max())
    for year in range(problem.T):
        wealth = env._batch.wealth[0]
        gap, scaled = _expected(wealth, 200.0, problem.T - year, sigma_max)
        assert obs[-2] == pytest.approx(gap, rel=1e-5) and obs[-1] == pytest.approx(scaled, rel=1e-5)
        obs, _, done, _, _ = env.step(np.array([0, 14 if year % 2 else 0]))
    assert done and np.isfinite(obs).all()


def test_no_goal_ahead_gives_zeros() -> None:
    early = {**SINGLE, "goals": [{"time": 5, "levels": [[150, 1]]}]}
    env = WealthEnv(
        WealthParams.model_validate(early).problem(), max_obs_goals=1, max_levels=1, goal_gap=True
    )
    obs, _ = env.reset(seed=1)
    for year in range(10):
        assert (obs[-2] != 0.0) == (year <= 5), year  # the goal of year 5 is ahead up to year 5
        obs, *_ = env.step(np.array([1, 7]))
    assert obs[-2] == 0.0 and obs[-1] == 0.0


def test_clipping_keeps_the_gap_finite_at_zero_wealth() -> None:
    row = WealthEnv(WealthParams.model_validate(SINGLE).problem(), max_obs_goals=1, max_levels=1).reset(
        seed=0
    )[0]
    row[1] = 0.0  # wealth gone
    gap = append_goal_gap(row[None, :])[0]
    assert gap[-2] == -GAP_CLIP and np.isfinite(gap).all()


def test_training_and_held_out_envs_show_the_same_gap_as_the_single_env() -> None:
    params = WealthParams.model_validate({**SINGLE, "goal_gap": True})
    vec = WealthVecEnv(params, 3, seed=0)
    evals = WealthEvalEnvs(params, [7, 8, 9])
    assert vec.observation_space.shape[0] == evals.obs_size == observation_size(1, 1, goal_gap=True)
    single = [WealthEnv(params.problem(), max_obs_goals=1, max_levels=1, goal_gap=True) for _ in range(3)]
    held_out = evals.reset()
    firsts = [env.reset(seed=s)[0] for env, s in zip(single, [7, 8, 9], strict=True)]
    np.testing.assert_allclose(np.asarray(held_out), np.stack(firsts), rtol=1e-6)
    actions = np.array([[0, 3], [0, 9], [0, 14]])
    after, *_ = evals.step(actions)
    steps = [env.step(a)[0] for env, a in zip(single, actions, strict=True)]
    np.testing.assert_allclose(np.asarray(after), np.stack(steps), rtol=1e-5)
    obs = vec.reset()
    np.testing.assert_allclose(obs[:, -2], math.log(100 / 200), rtol=1e-6)
    plain = WealthVecEnv(WealthParams.model_validate(SINGLE), 3, seed=0)
    np.testing.assert_array_equal(plain.reset(), obs[:, :-2])  # the rest is the plain observation


def test_only_the_entry_that_asks_sees_the_gap(write_scenario) -> None:
    data = shipped_untuned("wealth/single-goal")
    data["policies"]["learned"][0]["params"] = {"goal_gap": True}
    data = load_scenario(write_scenario(data)).model_dump(mode="json")
    _, _, ppo = runner._context(data, "default", "PPO")
    _, _, dp = runner._context(data, "default", "DP optimum")
    assert ppo.goal_gap is True and dp.goal_gap is False


def test_fieldrl_tune_tries_the_gap_as_one_of_an_entry_s_own_settings(write_scenario) -> None:
    from fieldrl.domains import get_domain
    from fieldrl.evaluation import tuning

    domain = get_domain("wealth")
    data = shipped_untuned("wealth/single-goal")
    scenario = load_scenario(write_scenario(data))
    entry = scenario.policies.learned[0]
    space = tuning._space(entry, (), domain)
    assert space["params.goal_gap"].choices == ("no", "yes")
    # the hand-set trial is the entry as written: the shipped PPO's study chose the gap
    assert tuning._handset_params(scenario, "default", entry, domain, space) == {"params.goal_gap": "yes"}
    del data["policies"]["learned"][0]["params"]
    plain = load_scenario(write_scenario(data))
    assert tuning._handset_params(plain, "default", plain.policies.learned[0], domain, space) == {
        "params.goal_gap": "no"
    }
    assert tuning.split_sample({"gamma": 0.99, "params.goal_gap": "yes"}, domain) == (
        {"gamma": 0.99},
        {"goal_gap": True},
    )
    assert "params.goal_gap" not in tuning._space(entry, ("goal_gap",), domain)


def test_the_shipped_single_goal_ppo_sees_the_gap_its_study_chose_and_the_report_says_so() -> None:
    from fieldrl.reports.pdf import _own_params_text

    scenario = load_scenario("wealth/single-goal")
    ppo, warm = scenario.policies.learned
    assert ppo.params == {"goal_gap": True} and not warm.params  # the warm start's study had no gap in it
    assert (
        _own_params_text(ppo)
        == ". Runs with its own settings (the other policies use the scenario's): goal_gap = True"
    )
    assert _own_params_text(warm) == ""
