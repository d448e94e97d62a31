"""Stochastic inflation of goal costs in the wealth (GBWM) domain: the extension where DP is infeasible.

Off (the default) must leave the engine exactly as it was; on, goal costs follow a price index
drawn from the episode's own generator, the index is in the observation, DP is refused and
``pct_of_dp`` is not applicable (NaN), while heuristics and PPO still run and are compared.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import shipped_untuned
from gymnasium.utils.env_checker import check_env as gym_check_env
from pypdf import PdfReader
from stable_baselines3.common.env_checker import check_env as sb3_check_env
from typer.testing import CliRunner

from fieldrl import api
from fieldrl.cli import app, print_summary
from fieldrl.domains.wealth import DOMAIN
from fieldrl.domains.wealth.env import WealthEnv, observe
from fieldrl.domains.wealth.envs import WealthEvalEnvs, WealthVecEnv
from fieldrl.domains.wealth.heuristics import greedy_goal
from fieldrl.domains.wealth.params import WealthParams
from fieldrl.domains.wealth.report import plt, quantile_bands
from fieldrl.errors import FieldrlError, ScenarioError
from fieldrl.reports.findings import variant_findings
from fieldrl.reports.pdf import best_policies
from fieldrl.scenario import load_scenario, parse_scenario, scenario_text
from fieldrl.simulators.gbwm.engine import Goal, Inflation, Problem, WealthBatch, benchmark_problem, simulate

INFLATION = {"mean": 0.025, "vol": 0.01, "rho": 0.5}
ON = WealthParams(benchmark=4, max_levels=1, inflation=INFLATION)

# WealthEnv(benchmark 4, max_levels 1).reset(seed=2024), then action [1, 10] every year, recorded
# with the engine as it was before inflation existed.
OLD_WEALTH = [
    48.31520233612092, 65.32670166672156, 82.32278741483827, 76.74499869068886, 55.4529497873355,
    59.93709597804031, 72.52773577556965, 83.47706022872956, 89.9706851682405, 107.17311344249734,
    125.66417024242453, 121.24829662270277, 87.86077022421915, 116.16512058818637, 125.23271493564556,
    116.21034832413886,
]  # fmt: skip
OLD_REWARDS = [0, 0, 0, 0, 14, 0, 0, 0, 18, 0, 0, 0, 22, 0, 0, 26]


@pytest.mark.parametrize("params", [{}, {"inflation": None}], ids=["default", "explicit-null"])
def test_inflation_off_reproduces_the_old_engine_exactly(params: dict) -> None:
    env = DOMAIN.make_env(WealthParams(benchmark=4, max_levels=1, **params))
    obs, _ = env.reset(seed=2024)
    assert obs.shape == (25,) and env.inflation is None
    wealth, rewards, done = [], [], False
    while not done:
        obs, reward, done, _, info = env.step(np.array([1, 10]))
        wealth.append(info["wealth"])
        rewards.append(reward)
        assert "price_index" not in info
    # the same arithmetic; only the last bit may move with the installed libm / numpy build
    np.testing.assert_allclose(wealth, OLD_WEALTH, rtol=1e-13, atol=0)
    assert rewards == OLD_REWARDS


def test_zero_volatility_index_is_exp_mean_t_and_goal_costs_follow_it() -> None:
    mean = 0.03
    problem = Problem(6, 100.0, (Goal.single(3, 20.0, 5.0), Goal.single(6, 30.0, 7.0)))
    batch = WealthBatch(problem, 2, Inflation(mean=mean, vol=0.0, rho=0.7))
    drift, sigma = problem.frontier.drift[[2, 9]], problem.frontier.sigma[[2, 9]]
    z = np.array([0.3, -0.4])
    wealth = np.full(2, 100.0)
    for t in range(6):
        assert np.allclose(batch.price_index, math.exp(mean * t), rtol=1e-12)
        take = np.array([1, 0]) if t == 3 else np.zeros(2, dtype=np.int64)
        if t == 3:  # the year-3 goal costs its listed 20 times exp(3 mean)
            assert np.allclose(batch.option_costs()[:, 1], 20.0 * math.exp(mean * 3), rtol=1e-12)
        reward, _ = batch.step(take, np.array([2, 9]), z, e=np.array([1.7, -2.5]))  # no effect at vol 0
        wealth = (wealth - take * 20.0 * math.exp(mean * 3)) * np.exp(drift + sigma * z)
        if t == 3:
            assert reward.tolist() == [5.0, 0.0]
        if t < 5:
            assert np.allclose(batch.wealth, wealth, rtol=1e-12)
    assert batch.done.all()
    assert np.allclose(batch.price_index, math.exp(mean * 6), rtol=1e-12)
    assert np.allclose(batch.terminal_wealth, wealth, rtol=1e-12)
    paid = 30.0 * math.exp(mean * 6)  # the goal at T is paid at the index of T
    assert np.allclose(batch.wealth, np.where(wealth >= paid, wealth - paid, wealth), rtol=1e-12)
    assert batch.goals_taken[:, 0].tolist() == [1, 0]


def test_a_goal_affordable_at_listed_but_not_at_inflated_cost_is_refused() -> None:
    problem = Problem(2, 10.5, (Goal.single(1, 10.0, 1.0),))
    batch = WealthBatch(problem, 1, Inflation(mean=0.1, vol=0.0))
    batch.step(np.array([0]), np.array([0]), np.array([0.0]), e=np.zeros(1))
    batch.wealth[:] = 10.5  # >= 10 listed, < 10 * exp(0.1) = 11.05 at today's prices
    assert not batch.feasible()[0, 1]
    reward, _ = batch.step(np.array([1]), np.array([0]), np.array([0.0]), e=np.zeros(1))
    assert reward[0] == 0.0 and batch.goals_taken[0, 0] == 0
    with pytest.raises(ValueError, match="needs e"):
        WealthBatch(problem, 1, Inflation()).step(np.zeros(1), np.zeros(1), np.zeros(1))


def test_env_index_follows_the_ar1_recursion_from_the_seeds_own_stream() -> None:
    env = DOMAIN.make_env(ON)
    seed = 31
    obs, _ = env.reset(seed=seed)
    draws = np.random.default_rng(seed).standard_normal((16, 2))  # (market, inflation) per year
    rate, index = INFLATION["mean"], 1.0
    assert obs[-2:].tolist() == pytest.approx([1.0, 10 * rate])
    for t in range(16):
        obs, _, _, _, info = env.step(np.array([0, 7]))
        rate = (
            INFLATION["mean"] + INFLATION["rho"] * (rate - INFLATION["mean"]) + INFLATION["vol"] * draws[t, 1]
        )
        index *= math.exp(rate)
        assert info["price_index"] == pytest.approx(index, rel=1e-12)
        assert obs[-2:] == pytest.approx([index, 10 * rate], rel=1e-6)
        if t == 14:  # wealth used the market half of the same draws (no goal taken so far)
            f, w0 = benchmark_problem(4).frontier, benchmark_problem(4).W0
            expected = w0 * math.exp(15 * f.drift[7] + f.sigma[7] * draws[:15, 0].sum())
            assert info["wealth"] == pytest.approx(expected, rel=1e-9)
    # the goal due at T = 16 was settled at the index of year 16
    f, w0 = benchmark_problem(4).frontier, benchmark_problem(4).W0
    reached = w0 * math.exp(16 * f.drift[7] + f.sigma[7] * draws[:, 0].sum())
    cost = 10.0 * 1.08**16 * index
    took = reached >= cost
    assert info["utility"] == (26.0 if took else 0.0)
    assert info["wealth"] == pytest.approx(reached - cost if took else reached, rel=1e-9)


def test_simulate_records_the_index_path() -> None:
    problem = benchmark_problem(2)
    res = simulate(problem, lambda t, w: (1, 7), 5, np.random.default_rng(0), inflation=Inflation(0.02, 0.0))
    assert res.price_index is not None and res.price_index.shape == (5, 17)
    assert np.allclose(res.price_index, np.exp(0.02 * np.arange(17))[None, :])
    assert simulate(problem, lambda t, w: (1, 7), 5, np.random.default_rng(0)).price_index is None


def test_observation_grows_by_the_index_and_rate_only_when_inflation_is_on() -> None:
    assert DOMAIN.make_env(WealthParams(benchmark=4, max_levels=1)).observation_space.shape == (25,)
    assert DOMAIN.make_env(ON).observation_space.shape == (27,)
    assert DOMAIN.make_env(WealthParams(random=True, inflation=INFLATION)).observation_space.shape == (
        WealthEnv(random=True).observation_space.shape[0] + 2,
    )


def test_inflation_env_passes_gymnasium_and_sb3_checks() -> None:
    gym_check_env(DOMAIN.make_env(ON), skip_render_check=True)
    sb3_check_env(DOMAIN.make_env(ON))


def test_eval_envs_replay_wealth_env_and_every_policy_meets_the_same_index_paths() -> None:
    seeds = [5, 6, 7]
    evals = WealthEvalEnvs(ON, seeds)
    envs = [DOMAIN.make_env(ON) for _ in seeds]
    obs = np.asarray(evals.reset())
    assert np.isnan(evals.initial_info["dp_value"]).all()
    assert np.array_equal(obs, np.stack([e.reset(seed=s)[0] for e, s in zip(envs, seeds, strict=True)]))
    rng = np.random.default_rng(0)
    for _ in range(16):
        actions = np.stack([rng.integers(0, 2, 3), rng.integers(0, 15, 3)], axis=1)
        obs, reward, *_, info = evals.step(actions)
        single = [e.step(a) for e, a in zip(envs, actions, strict=True)]
        assert np.array_equal(np.asarray(obs), np.stack([s[0] for s in single]))
        assert np.array_equal(reward, np.array([s[1] for s in single]))
        assert np.array_equal(info["price_index"], np.array([s[4]["price_index"] for s in single]))
    venv = WealthVecEnv(ON, 4, seed=3)
    assert venv.reset().shape == (4, 27)


def test_greedy_compares_wealth_with_the_inflated_cost() -> None:
    problem = benchmark_problem(4)
    cost = 10.0 * 1.08**4
    for wealth, index, taken in [(cost * 1.05, 1.1, 0), (cost * 1.15, 1.1, 1), (cost * 1.05, 1.0, 1)]:
        obs = observe(problem, 4, wealth, 4, 1, price=(index, 0.02))
        assert greedy_goal(obs[None, :], 2)[0] == taken


def test_dp_heuristic_is_refused_under_inflation() -> None:
    spec = DOMAIN.heuristics["dp"]
    with pytest.raises(FieldrlError, match="not available under stochastic inflation"):
        spec.build(spec.settings_model.model_validate({}), ON, "DP")
    assert DOMAIN.heuristic_problem("dp", ON) is not None
    assert DOMAIN.heuristic_problem("dp", WealthParams(benchmark=4, max_levels=1)) is None
    assert all(DOMAIN.heuristic_problem(h, ON) is None for h in DOMAIN.heuristics if h != "dp")


@pytest.mark.parametrize("in_variant", [False, True], ids=["params", "variant"])
def test_dp_with_inflation_fails_at_validation_with_one_message(tmp_path, in_variant: bool) -> None:
    data = yaml.safe_load(scenario_text("wealth/inflation")[1])
    data["policies"]["heuristics"].insert(1, {"use": "dp", "name": "DP optimum"})
    data["policies"]["learned"], data["report"]["comparisons"] = [], []  # nothing to build: fast
    if in_variant:  # inflation only in one of two settings
        data["variants"] = {"plain": {}, "inflated": {"inflation": data["params"].pop("inflation")}}
    file = tmp_path / "dp-inflation.yaml"
    file.write_text(yaml.safe_dump(data, sort_keys=False))
    out = tmp_path / "run"
    for args in (["validate", str(file)], ["run", str(file), "--out", str(out), "--quiet"]):
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 2, result.output
        assert "Traceback" not in result.output and len(result.output.strip().splitlines()) <= 4
        flat = " ".join(result.output.split())
        for piece in (
            "policies.heuristics[1].use = 'dp'",
            "params.inflation",
            "not available under stochastic inflation",
            "heuristics allowed with these params: fixed-portfolio, glide-path, greedy-goals",
        ):
            assert piece in flat, f"{piece!r} not in {flat!r}"
        assert ("(variant inflated)" in flat) == in_variant
    assert not out.exists()


@pytest.mark.parametrize(
    ("inflation", "field"),
    [
        ({"vol": -0.01}, "params.inflation.vol"),
        ({"rho": 1.0}, "params.inflation.rho"),
        ({"mean": "x"}, "params.inflation.mean"),
    ],
)
def test_bad_inflation_values_give_a_scenario_error_naming_the_field(inflation: dict, field: str) -> None:
    data = shipped_untuned("wealth/inflation")  # a tuned file is relative to a scenario file: written in
    data["params"]["inflation"] = {**INFLATION, **inflation}
    with pytest.raises(ScenarioError) as info:
        parse_scenario(yaml.safe_dump(data))
    assert info.value.field == field


@pytest.mark.filterwarnings("error::RuntimeWarning")  # no NaN warnings from the all-NaN pct_of_dp
def test_quick_inflation_scenario_runs_end_to_end_to_a_pdf(tmp_path, capsys) -> None:
    scenario = load_scenario("wealth/inflation")
    assert scenario.report.primary_kpi == "utility"
    assert not any(h.use == "dp" for h in scenario.policies.heuristics) and scenario.policies.learned
    result = api.run("wealth/inflation", out=tmp_path / "run", budget="demo", show_progress=False)
    results = result.results
    assert set(results["policy"]) == {
        "greedy balanced",
        "greedy aggressive",
        "greedy conservative",
        "glide path",
        "PPO",
    }
    assert results.loc[results["metric"] == "pct_of_dp", "value"].isna().all()
    assert results.loc[results["metric"] == "utility", "value"].notna().all()
    text = " ".join(" ".join((p.extract_text() or "").split()) for p in PdfReader(result.report).pages)
    assert "not available under stochastic inflation" in text and "Price index of goal costs" in text
    assert (result.run_dir / "figures" / "price-index-default.png").is_file()
    # pct_of_dp has no value for anyone: no finding about it, a note under the table, never "best"
    findings = " ".join(variant_findings(result.summary, "default"))
    assert "DP" not in findings and "no clear difference in share" not in text
    assert "'Share of the DP optimum' has no value for any policy in this setting" in text
    assert best_policies(result.summary.variant("default"), result.summary.kpis)["pct_of_dp"] is None
    assert "pct_of_dp" not in [k.name for k in result.summary.measured_kpis("default")]
    print_summary(result.summary)  # the terminal table leaves it out too
    table = capsys.readouterr().out
    assert "Utility" in table and "optimum" not in table  # KPI labels: "Share of the DP optimum"


def test_quantile_bands_draw_the_median_and_two_bands() -> None:
    frame = pd.DataFrame({"year": np.repeat([0, 1, 2], 101), "value": np.tile(np.arange(101.0), 3)})
    fig, ax = plt.subplots()
    years = np.array([0, 1, 2])
    quantile_bands(ax, frame.groupby("year")["value"], years, "#d62728")
    assert len(ax.collections) == 2 and ax.lines[0].get_ydata().tolist() == [50.0] * 3
    plt.close(fig)
