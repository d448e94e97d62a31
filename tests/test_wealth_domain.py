"""The wealth (GBWM) domain: heuristics, evaluation envs and their seeds, KPIs, scenarios, report."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pytest
import yaml
from pypdf import PdfReader

from fieldrl.domains.wealth import DOMAIN
from fieldrl.domains.wealth.env import WealthEnv, observe
from fieldrl.domains.wealth.envs import WealthEvalEnvs, WealthVecEnv
from fieldrl.domains.wealth.heuristics import ProblemObs, dp_solution
from fieldrl.domains.wealth.params import WealthParams
from fieldrl.errors import ScenarioError
from fieldrl.evaluation.runner import episode_seed, run_episodes
from fieldrl.scenario import load_scenario, parse_scenario

BASE_CASE = {"T": 10, "W0": 100, "goals": [{"time": 10, "levels": [[200, 1]]}], "max_levels": 1}
SETTINGS = {
    "fixed-portfolio": {"portfolio": "aggressive"},
    "glide-path": {},
    "greedy-goals": {"portfolio": 3},
    "dp": {},
}


def build(name: str, params: WealthParams, settings: dict[str, Any] | None = None):
    spec = DOMAIN.heuristics[name]
    return spec.build(spec.settings_model.model_validate(settings or SETTINGS[name]), params, name)


def plan(eval_seeds: range, episodes: int) -> list[int]:
    return [episode_seed(s, e) for s in eval_seeds for e in range(episodes)]


# ----------------------------------------------------------------------------- heuristics


@pytest.mark.parametrize(
    "params", [WealthParams(benchmark=4), WealthParams(random=True)], ids=["4-goal", "random"]
)
@pytest.mark.parametrize("name", sorted(SETTINGS))
def test_heuristics_give_valid_actions_for_every_env(name: str, params: WealthParams) -> None:
    seeds = plan(range(50, 54), 2)
    envs = WealthEvalEnvs(params, seeds)
    space = DOMAIN.make_env(params).action_space
    policy = build(name, params)
    policy.reset(len(seeds))
    obs = envs.reset()
    for _ in range(max(p.T for p in envs.problems)):
        actions = policy.act(obs, np.zeros(len(seeds), dtype=bool))
        assert actions.shape == (len(seeds), 2) and actions.dtype == np.int64
        assert all(space.contains(a) for a in actions)
        obs, *_ = envs.step(actions)


def test_greedy_takes_every_affordable_goal_and_fixed_can_skip_them() -> None:
    params = WealthParams(benchmark=4, max_levels=1)
    greedy = build("greedy-goals", params, {"portfolio": "conservative"})
    never = build("fixed-portfolio", params, {"portfolio": "conservative", "goals": "none"})
    kpis, trace = run_episodes(DOMAIN, params, greedy, list(range(200, 240)))
    due = trace[trace["goal_due"] == 1]
    affordable = due["wealth"] >= 10 * 1.08 ** due["year"]
    assert ((due["goal"] > 0) == affordable).all()
    assert (trace.loc[trace["year"] < 16, "portfolio"].isin([0, -1])).all()
    none_kpis, _ = run_episodes(DOMAIN, params, never, list(range(200, 240)))
    # only the goal at T (settled automatically) can be reached without taking goals
    assert none_kpis["goals_taken"].max() <= 25.0 < kpis["goals_taken"].mean()


def test_glide_path_cuts_risk_as_the_target_nears() -> None:
    params = WealthParams(**BASE_CASE)
    policy = build("glide-path", params, {"target": "horizon", "span": 10})
    _, trace = run_episodes(DOMAIN, params, policy, [7])
    assert trace["portfolio"].tolist()[:-1] == [14, 13, 11, 10, 8, 7, 6, 4, 3, 1]


def test_dp_heuristic_reaches_100_pct_of_dp_and_simple_rules_fall_short() -> None:
    params = WealthParams(**BASE_CASE)
    seeds = list(range(1000, 3000))
    dp, _ = run_episodes(DOMAIN, params, build("dp", params), seeds, trace_index=None)
    pct = dp["pct_of_dp"]
    assert abs(pct.mean() - 100.0) < 3 * pct.std(ddof=1) / np.sqrt(len(pct))
    assert dp["utility"].mean() == pytest.approx(dp_solution(params.problem()).p_goal, abs=0.035)
    for name in ("fixed-portfolio", "greedy-goals", "glide-path"):
        other, _ = run_episodes(DOMAIN, params, build(name, params), seeds, trace_index=None)
        diff = dp["pct_of_dp"] - other["pct_of_dp"]  # same market paths: a paired comparison
        assert diff.mean() > 3 * diff.std(ddof=1) / np.sqrt(len(diff)), name


def test_dp_on_random_problems_reads_each_envs_problem_from_the_observations() -> None:
    params = WealthParams(random=True)
    seeds = plan(range(70, 73), 2)
    kpis, _ = run_episodes(DOMAIN, params, build("dp", params), seeds)
    assert np.isfinite(kpis["pct_of_dp"]).all() and len(kpis["pct_of_dp"]) == 6
    with pytest.raises(ValueError, match="needs the problem of every env"):
        policy = build("dp", params)
        policy.act(np.asarray(WealthEvalEnvs(params, seeds).reset()), np.ones(6, dtype=bool))


# ----------------------------------------------------------------------------- envs and seeds


@pytest.mark.parametrize("random", [False, True])
def test_eval_env_of_a_seed_is_wealth_env_reset_with_that_seed(random: bool) -> None:
    params = WealthParams(random=True) if random else WealthParams(benchmark=4)
    envs = WealthEvalEnvs(params, [11, 12])
    env = DOMAIN.make_env(params)
    obs0, _ = env.reset(seed=12)
    obs = envs.reset()
    assert isinstance(obs, ProblemObs) and obs.problems[1] == env.problem
    np.testing.assert_array_equal(np.asarray(obs)[1], obs0)
    rng = np.random.default_rng(0)
    for _ in range(env.problem.T):
        action = np.array([rng.integers(0, 2), rng.integers(0, 15)])
        o, r, term, _, _ = env.step(action)
        obs, rewards, terms, _, _ = envs.step(np.stack([action, action]))
        np.testing.assert_allclose(np.asarray(obs)[1], o, rtol=1e-6)
        assert rewards[1] == pytest.approx(r) and terms[1] == term


def test_eval_seed_fixes_the_problem_and_the_episode_the_market_path() -> None:
    params = WealthParams(random=True)
    seeds = plan(range(300, 304), 3)
    cases = [s for s in range(300, 304) for _ in range(3)]
    envs = WealthEvalEnvs(params, seeds, cases)
    problems = [envs.problems[i : i + 3] for i in range(0, 12, 3)]
    assert all(a == b == c for a, b, c in problems)
    assert len({p[0] for p in problems}) == 4
    again = WealthEvalEnvs(params, seeds, cases)
    assert again.problems == envs.problems
    for g, h in zip(envs.groups, again.groups, strict=True):
        np.testing.assert_array_equal(g.z, h.z)  # same seed, same path
        assert len({tuple(row) for row in g.z}) == 3  # each episode its own path
    fixed = WealthEvalEnvs(WealthParams(benchmark=4), seeds[:3])
    assert len({tuple(row) for row in fixed.groups[0].z}) == 3


def test_train_vec_env_is_reproducible_and_restarts_finished_investors() -> None:
    for params in (WealthParams(benchmark=4), WealthParams(random=True)):
        runs = []
        for _ in range(2):
            venv = WealthVecEnv(params, 4, seed=5)
            obs = venv.reset()
            assert venv.observation_space.contains(obs[0])
            assert venv.action_space == DOMAIN.make_env(params).action_space
            rewards, dones = [], []
            for step in range(40):
                venv.step_async(np.tile([1, step % 15], (4, 1)))
                obs, r, d, infos = venv.step_wait()
                rewards.append(r)
                dones.append(d)
                for i in np.flatnonzero(d):
                    assert "terminal_observation" in infos[i] and obs[i][0] == 0.0  # year 0 again
            runs.append((np.array(rewards), np.array(dones)))
        np.testing.assert_array_equal(runs[0][0], runs[1][0])
        assert runs[0][1].any()
    venv = WealthVecEnv(WealthParams(benchmark=4), 2, seed=0)
    obs = venv.reset()
    np.testing.assert_array_equal(obs[0], observe(venv.fixed, 0, venv.fixed.W0, 4, 2))


def test_kpis_and_trace_agree_with_the_engine() -> None:
    params = WealthParams(benchmark=4, max_levels=1)
    kpis, trace = run_episodes(DOMAIN, params, build("greedy-goals", params), list(range(40)))
    per_path = trace.groupby("path")
    np.testing.assert_allclose(per_path["utility"].sum().to_numpy(), kpis["utility"])
    np.testing.assert_allclose(
        per_path["goal"].apply(lambda g: (g > 0).sum() * 25.0).to_numpy(), kpis["goals_taken"]
    )
    value = dp_solution(params.problem()).value_w0
    np.testing.assert_allclose(kpis["pct_of_dp"], 100 * kpis["utility"] / value)
    assert (trace.groupby("path")["year"].max() == 16).all() and (kpis["final_wealth"] >= 0).all()
    env = WealthEnv(params.problem(), max_levels=1)
    env.reset(seed=3)
    assert trace.loc[(trace["path"] == 3) & (trace["year"] == 0), "wealth"].item() == env.problem.W0


# ----------------------------------------------------------------------------- scenarios


def scenario_yaml(params: dict[str, Any]) -> str:
    return yaml.safe_dump(
        {
            "name": "bad",
            "domain": "wealth",
            "params": params,
            "policies": {"heuristics": [{"use": "dp"}]},
            "seeds": {"train": [0], "eval": [1]},
        }
    )


@pytest.mark.parametrize(
    ("params", "field", "words"),
    [
        ({**BASE_CASE, "W0": -5}, "params.W0", "greater than 0"),
        (
            {**BASE_CASE, "goals": [{"time": 12, "levels": [[200, 1]]}]},
            "params",
            "goals[0].time = 12 is outside",
        ),
        ({**BASE_CASE, "frontier": {"portfolios": []}}, "params", "at least one portfolio"),
        (
            {**BASE_CASE, "goals": [{"time": 5, "levels": [[-1, 1]]}]},
            "params",
            "cost must be finite and >= 0",
        ),
    ],
    ids=["negative-wealth", "goal-after-horizon", "empty-frontier", "negative-cost"],
)
def test_bad_problems_give_a_scenario_error_naming_the_field(params: dict, field: str, words: str) -> None:
    with pytest.raises(ScenarioError) as info:
        parse_scenario(scenario_yaml(params))
    assert info.value.field == field and words in str(info.value)


def test_bad_heuristic_settings_name_the_setting() -> None:
    data = yaml.safe_load(scenario_yaml(BASE_CASE))
    data["policies"]["heuristics"] = [{"use": "fixed-portfolio", "settings": {"portfolio": "reckless"}}]
    with pytest.raises(ScenarioError) as info:
        parse_scenario(yaml.safe_dump(data))
    assert info.value.field.startswith("policies.heuristics[0].settings.portfolio")


@pytest.mark.parametrize("name", ["single-goal", "multi-goal", "meta"])
def test_builtin_scenarios_are_valid(name: str) -> None:
    scenario = load_scenario(f"wealth/{name}")
    assert scenario.report.primary_kpi == "pct_of_dp"
    assert any(h.use == "dp" for h in scenario.policies.heuristics)
    if name == "meta":
        assert len(scenario.seeds.eval) >= 60 and scenario.episodes_per_seed > 1


def test_tiny_wealth_scenario_runs_end_to_end_to_a_pdf(tmp_path) -> None:
    import fieldrl

    data = yaml.safe_load(scenario_yaml({**BASE_CASE, "max_obs_goals": 1}))
    data["policies"]["heuristics"] += [{"use": "fixed-portfolio", "name": "aggressive"}]
    data["policies"]["learned"] = [
        {
            "algorithm": "ppo",
            "train_steps": 256,
            "n_envs": 4,
            "hyperparameters": {"n_steps": 64, "batch_size": 64, "n_epochs": 1, "gamma": 1.0},
        }
    ]
    data["seeds"] = {"train": [0], "eval": [10, 11, 12]}
    data["episodes_per_seed"] = 3
    data["report"] = {"primary_kpi": "pct_of_dp"}
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(copy.deepcopy(data)))
    result = fieldrl.run(path, out=tmp_path / "run", show_progress=False)
    assert set(result.results["metric"]) == {"utility", "pct_of_dp", "goals_taken", "final_wealth"}
    assert len(result.results) == 3 * 9 * 4
    text = " ".join(" ".join((p.extract_text() or "").split()) for p in PdfReader(result.report).pages)
    for words in ("Share of the DP optimum", "Wealth fan charts", "Goals reached", "Policy maps"):
        assert words in text
    assert (result.run_dir / "figures" / "wealth-fan-default.png").is_file()
