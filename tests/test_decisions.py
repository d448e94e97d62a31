"""Decision differences (issue 40, part 2): at every decision the best learned policy takes on held-out
episodes, the best standard policy that can be asked is asked what it would do; the report says how
often they agree and, as the rules of a depth-3 tree over named features, when they do not."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import TINY_SCENARIO
from pypdf import PdfReader

import fieldrl
from fieldrl.domains import get_domain
from fieldrl.evaluation.decision_story import SAME, difference_labels, explain
from fieldrl.evaluation.decisions import (
    DECISIONS_SUMMARY,
    DecisionSetting,
    askable,
    play_decisions,
    read_decision_summary,
    read_decisions,
    standard_to_ask,
)
from fieldrl.evaluation.store import RunFolder
from fieldrl.results import Summary
from fieldrl.scenario import load_scenario


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("decided")
    data = copy.deepcopy(TINY_SCENARIO)
    (base / "s.yaml").write_text(yaml.safe_dump(data))
    return fieldrl.run(base / "s.yaml", out=base / "run", show_progress=False).run_dir


def test_evaluation_records_the_learned_policys_decisions_beside_the_standard_policys(tiny_run):
    folder = RunFolder(tiny_run)
    summary = json.loads((tiny_run / "summary.json").read_text())["variants"]["default"]
    decided = read_decision_summary(folder)
    assert decided is not None and DECISIONS_SUMMARY in folder.hashes()
    setting = decided.variants["default"]
    assert setting.learned == summary["best_learned"] and setting.standard == summary["best_heuristic"]
    assert setting.substituted is None
    assert setting.features == ["tumour cells", "immune cells", "drug in the blood"]
    assert setting.action_kind == "continuous" and setting.action_words == ["dose"]
    frame = read_decisions(folder, setting)
    # every step of every recorded episode is a decision (single agent), from its first on
    assert len(frame) == setting.decisions
    assert frame.groupby(["eval_seed", "episode"]).ngroups == setting.episodes == 6
    for _, steps in frame.groupby(["eval_seed", "episode"])["step"]:
        assert steps.tolist() == list(range(len(steps)))
    assert set(frame["eval_seed"]) <= set(range(100, 106))
    # the learned policy's actions are the ones the evaluation played: its doses are in [0, 1]
    assert frame["l0"].between(0.0, 1.0).all()
    # what they show is worked out once, as recorded, from exactly these decisions
    assert setting.story is not None and setting.story == explain(frame, setting)
    assert sum(setting.story.progress_decisions) == setting.decisions
    assert 0 <= sum(setting.story.progress_alike) <= setting.decisions


def test_the_report_reads_what_the_decisions_show_and_fits_nothing(tiny_run, monkeypatch):
    import fieldrl.reports.decisions as pages
    from fieldrl import api

    def refit(*args, **kwargs):
        raise AssertionError("the report fitted the tree again")

    monkeypatch.setattr(pages, "explain", refit)
    api.report(tiny_run)
    text = " ".join((page.extract_text() or "") for page in PdfReader(tiny_run / "report.pdf").pages)
    assert "takes the same decision as" in " ".join(text.split())


def test_the_report_says_how_often_they_agree_and_how_it_was_measured(tiny_run):
    text = " ".join((page.extract_text() or "") for page in PdfReader(tiny_run / "report.pdf").pages)
    text = " ".join(text.split())
    assert "What the learned policy does differently" in text
    assert "takes the same decision as" in text
    assert "what it would do in the same state" in text


def _policy(domain, use: str, params, name: str, **settings):
    spec = domain.heuristics[use]
    return spec.build(spec.settings_model.model_validate(settings), params, name)


def test_a_standard_policy_asked_about_its_own_twins_states_agrees_always():
    """Chemo's pulsed schedule keeps a counter: asked in lockstep with its twin, it must still agree."""
    domain = get_domain("chemo")
    params = domain.params_model.model_validate({"preset": "s1", "max_t": 30})
    envs = domain.make_eval_envs(params, [1, 2, 3])
    try:
        drive = _policy(domain, "pulsed", params, "pulsed", on_days=2, off_days=2)
        asked = _policy(domain, "pulsed", params, "pulsed", on_days=2, off_days=2)
        episode, step, slot, feats, acts, other = play_decisions(domain, envs, drive, asked, 3)
    finally:
        envs.close()
    assert set(episode) == {0, 1, 2} and len(acts) == len(step) == 3 * (step.max() + 1)
    assert np.array_equal(acts, other) and len(np.unique(acts)) == 2  # on-days and off-days both seen
    setting = _setting("continuous", 3, action_low=[0.0], action_high=[1.0])
    frame = _frame(feats, acts, other)
    tell = explain(frame, setting)
    assert tell.agreement == 1.0 and tell.rules == [] and tell.kinds == []


def test_multi_agent_decisions_pool_the_agents_that_really_decide():
    """Taxiway: one row per aircraft with more than one move open; a planner asked about its twin's
    states agrees at every one of them."""
    domain = get_domain("taxiway")
    params = domain.params_model.model_validate({"layout": "small", "density": "medium", "max_slots": 8})
    envs = domain.make_eval_envs(params, [5, 6])
    try:
        drive = _policy(domain, "fcfs", params, "FCFS")
        asked = _policy(domain, "fcfs", params, "FCFS")
        episode, step, slot, feats, acts, other = play_decisions(domain, envs, drive, asked, 2)
        names = domain.decision_features(envs, feats.shape[1])
        words = domain.action_words(envs)
    finally:
        envs.close()
    assert len(acts) > 50 and np.array_equal(acts, other)
    assert set(slot) != {0}  # several aircraft's decisions pooled
    assert len(names) == feats.shape[1] and names[:2] == ["x position", "y position"]
    assert not any(n.startswith("obs[") for n in names)
    assert words[0] == "hold"


def _setting(kind: str, n_features: int, **extra) -> DecisionSetting:
    return DecisionSetting(
        learned="PPO",
        standard="rule",
        best_standard="rule",
        features=[f"feature {k}" for k in range(n_features)],
        action_kind=kind,
        files=[],
        episodes=1,
        decisions=0,
        **extra,
    )


def _frame(feats: np.ndarray, learned: np.ndarray, standard: np.ndarray) -> pd.DataFrame:
    learned, standard = (
        np.asarray(learned).reshape(len(feats), -1),
        np.asarray(standard).reshape(len(feats), -1),
    )
    columns = {f"f{k}": feats[:, k] for k in range(feats.shape[1])}
    columns |= {f"l{k}": learned[:, k] for k in range(learned.shape[1])}
    columns |= {f"s{k}": standard[:, k] for k in range(standard.shape[1])}
    return pd.DataFrame(columns)


def test_the_tree_says_where_the_differences_gather_with_support_and_fidelity():
    rng = np.random.default_rng(0)
    feats = rng.uniform(0, 1, size=(4000, 3))
    standard = np.zeros(4000, dtype=np.int64)
    learned = np.where(feats[:, 1] > 0.6, 2, 0)  # "go" where the rule "holds", when feature 1 is high
    setting = _setting("discrete", 3, action_words=["hold", "wait", "go"])
    tell = explain(_frame(feats, learned, standard), setting)
    assert tell.agreement == pytest.approx(0.6, abs=0.03)
    assert tell.kinds[0].label == "go instead of hold"
    rule = tell.rules[0]
    assert rule.label == "go instead of hold" and rule.fidelity > 0.97
    assert rule.support == pytest.approx(0.4, abs=0.03)
    assert rule.conditions.startswith("feature 1 > 0.6")
    assert tell.tree_fidelity > 0.97


def test_continuous_actions_differ_beyond_a_twentieth_of_their_range():
    setting = _setting("continuous", 1, action_words=["dose"], action_low=[0.0], action_high=[2.0])
    frame = _frame(np.zeros((4, 1)), [0.5, 0.59, 0.8, 0.1], [0.5, 0.5, 0.5, 0.5])
    assert list(difference_labels(frame, setting)) == [SAME, SAME, "higher dose", "lower dose"]


def test_a_goal_the_engine_would_not_take_is_no_difference():
    """Wealth: a goal level chosen in a year when no goal is due is "take nothing" to the engine."""
    domain = get_domain("wealth")
    params = domain.params_model.model_validate(load_scenario("wealth/single-goal").params)
    envs = domain.make_eval_envs(params, [3])
    try:
        envs.reset()
        chosen = domain.effective_actions(envs, np.array([[1, 4]]))
    finally:
        envs.close()
    assert chosen.tolist() == [[0, 4]]  # no goal is due in the first year of single-goal


def test_a_program_inside_sumo_is_replaced_by_the_best_standard_policy_that_can_be_asked():
    scenario = load_scenario("traffic/quick")
    domain = get_domain("traffic")
    labels = {e.use: e.label for e in scenario.policies.heuristics}
    assert not askable(scenario, domain, labels["actuated"])
    askable_ones = [e.label for e in scenario.policies.heuristics if askable(scenario, domain, e.label)]
    assert askable_ones
    primary = scenario.report.primary_kpi or domain.kpis[0].name
    means = {labels["actuated"]: 10.0, **{name: 20.0 + k for k, name in enumerate(askable_ones)}}
    summary = Summary.model_validate(
        {
            "confidence": 0.95,
            "bootstrap_samples": 100,
            "primary_kpi": primary,
            "kpis": [],
            "policies": [],
            "variants": {
                "default": {
                    "best_heuristic": labels["actuated"],
                    "policies": {
                        n: {primary: {"mean": {"value": v}, "iqm": {"value": v}}} for n, v in means.items()
                    },
                }
            },
        }
    )
    standard, why = standard_to_ask(scenario, domain, summary, "default")
    assert standard == askable_ones[0]  # lowest delay of those that can be asked
    assert why and labels["actuated"] in why and "cannot be asked" in why


@pytest.mark.needs("uav")
def test_a_rule_that_hands_the_simulator_a_plan_cannot_be_asked():
    scenario = load_scenario("uav/quick")
    domain = get_domain("uav")
    kinds = {e.label: askable(scenario, domain, e.label) for e in scenario.policies.heuristics}
    plans = [e.label for e in scenario.policies.heuristics if not domain.heuristics[e.use].imitable]
    assert plans and not any(kinds[p] for p in plans)
    fixed = next(e.label for e in scenario.policies.heuristics if e.use == "pipeline-fixed")
    assert askable(scenario, domain, fixed, "pipeline")  # its actions are the learned policy's kind
    assert not askable(scenario, domain, fixed, "marl")  # without the pipeline they mean other moves


def test_a_reservation_dispatcher_asked_about_its_twins_trains_reads_their_real_reservations():
    """Rail: the dispatcher asked about another policy's episode reserves what the trains really took
    (the env's kept plan), so asked about its own twin's it answers as the twin did at every decision."""
    scenario = load_scenario("rail/quick")
    domain = get_domain("rail")
    variant = scenario.variant_names[0]
    params = domain.params_model.model_validate(scenario.variant_params(variant))
    envs = domain.make_eval_envs(params, [11, 12])
    try:
        drive = _policy(domain, "priority-reroute", params, "priority", k=2)
        asked = _policy(domain, "priority-reroute", params, "priority", k=2)
        episode, step, slot, feats, acts, other = play_decisions(domain, envs, drive, asked, 2)
        words = domain.action_words(envs)
    finally:
        envs.close()
    assert len(acts) > 20 and np.array_equal(acts, other)
    assert {words[a] for a in np.unique(acts)} >= {"depart"}


class _HoldEveryTrain:
    """A driver that holds every train at every dispatch decision (and stops at every switch)."""

    name = "hold"

    def reset(self, n_envs: int) -> None:
        pass

    def bind_envs(self, envs) -> None:
        pass

    def act(self, obs, episode_start):
        from fieldrl.domains.rail.actions import HOLD

        return np.full(np.asarray(obs).shape[:2], HOLD, dtype=np.int64)


def test_a_reservation_dispatcher_asked_about_another_policys_trains_reserves_what_they_took():
    """The driver holds every train; the priority dispatcher is asked. Its answers must be the env's own
    advice (the same dispatcher on the env's plan of the trains as they really move: none departed), not
    those of a dispatcher that counts the trains it would have released as gone (it then holds others
    back for them)."""
    scenario = load_scenario("rail/quick")
    domain = get_domain("rail")
    raw = {**scenario.variant_params(scenario.variant_names[0]), "advice": True}
    params = domain.params_model.model_validate(raw)
    envs = domain.make_eval_envs(params, [11, 12])
    try:
        settings = {"k": params.shield_paths, "order": "slack", "cancel_late": True}
        asked = _policy(domain, "priority-reroute", params, "priority", **settings)
        episode, step, slot, feats, acts, other = play_decisions(domain, envs, _HoldEveryTrain(), asked, 2)
    finally:
        envs.close()
    advised = feats[:, -8:].argmax(axis=1)  # the advice, one-hot at the end of each observation
    assert len(other) > 20 and np.array_equal(other[:, 0], advised)
    assert (other[step > 0, 0] == 1).sum() > 0  # it still says "depart" after the first step (DEPART = 1)


def test_the_time_estimate_counts_the_episodes_decisions_replay():
    from fieldrl import estimates
    from fieldrl.evaluation import decisions

    assert estimates.DECISION_EPISODES == decisions.MAX_EPISODES
    work = estimates.workload(load_scenario("chemo/quick"))
    assert work.explain_episodes == decisions.MAX_EPISODES + 2


def test_one_fixed_choice_is_said_as_such_without_a_rule():
    rng = np.random.default_rng(1)
    feats = rng.uniform(0, 1, size=(500, 2))
    learned = np.full(500, 3)
    learned[:5] = 1  # 99 % one fixed choice
    setting = _setting("discrete", 2)
    tell = explain(_frame(feats, learned, np.ones(500, dtype=np.int64)), setting)
    assert (tell.kinds[0].label, tell.kinds[0].share) == ("3 instead of 1", 0.99) and tell.rules == []
