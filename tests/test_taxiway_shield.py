"""The taxiway runtime shield: no conflicts whatever the policy inside proposes, every override counted."""

from __future__ import annotations

import numpy as np
import pytest
import yaml
from test_taxiway_planning import run

from fieldrl.domains.taxiway.heuristics import Prioritized, ShortestPath
from fieldrl.domains.taxiway.params import TaxiwayParams
from fieldrl.domains.taxiway.shield import ShieldedPolicy
from fieldrl.errors import ScenarioError
from fieldrl.policies.base import Policy
from fieldrl.scenario import Shield, load_scenario


class _HoldEveryone(Policy):
    name = "hold"

    def reset(self, n_envs: int) -> None:
        pass

    def act(self, obs, episode_start):
        return np.zeros(np.asarray(obs).shape[:2], dtype=np.int64)


def test_shield_makes_uncontrolled_taxiing_conflict_free_and_counts_what_it_replaced():
    params = TaxiwayParams(layout="large", density="medium", max_slots=40)
    seeds = [31, 32]
    free = [e.episode_info() for e in run(ShortestPath("sp"), params, seeds)]
    assert sum(i["conflicts"] for i in free) > 0
    assert all(np.isnan(i["shield_overrides_per_100"]) for i in free)  # not shielded: no count at all
    shielded = run(ShieldedPolicy("sh", ShortestPath("sp"), Prioritized("pp"), patience=6), params, seeds)
    for env in shielded:
        info = env.episode_info()
        assert info["conflicts"] == 0, env.sim.conflict_counts
        assert info["completed_pct"] == 100.0
        assert env.shield_overrides > 0 and info["shield_overrides_per_100"] > 0
        assert 0 < info["shield_override_pct"] < 100
        assert env.shield_decisions >= env.shield_overrides + env.shield_unstuck


def test_shield_moves_aircraft_a_policy_keeps_holding_and_counts_it_as_unstuck():
    params = TaxiwayParams(layout="small", density="low", max_slots=8)
    held = run(_HoldEveryone(), params, [5])[0].episode_info()
    assert held["completed_pct"] == 0.0
    env = run(ShieldedPolicy("sh", _HoldEveryone(), Prioritized("pp"), patience=6), params, [5])[0]
    info = env.episode_info()
    assert info["conflicts"] == 0 and info["completed_pct"] == 100.0
    assert env.shield_unstuck > 0 and info["shield_unstuck_per_100"] > 0


def test_a_shielded_policy_that_already_follows_the_plans_is_never_overridden():
    params = TaxiwayParams(layout="small", density="medium", max_slots=16)
    env = run(ShieldedPolicy("sh", Prioritized("inner"), Prioritized("pp"), patience=6), params, [7])[0]
    info = env.episode_info()
    assert info["conflicts"] == 0 and env.shield_decisions > 0
    assert env.shield_overrides == 0 and env.shield_unstuck == 0 and info["shield_override_pct"] == 0.0


def _scenario(tmp_path, domain: str, learned: dict, heuristics: list[dict]) -> str:
    base = load_scenario(f"{domain}/quick").model_dump(mode="json", exclude_none=True)
    base["policies"] = {"heuristics": heuristics, "learned": [learned]}
    for entry in base["policies"]["learned"]:
        entry.pop("tuning", None)
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(base))
    return str(path)


@pytest.mark.parametrize(
    ("domain", "heuristics", "shield", "message"),
    [
        (
            "taxiway",
            [{"use": "cbs"}, {"use": "fcfs"}],
            "cbs",
            "a shield must be a heuristic of kind prioritized",
        ),
        ("taxiway", [{"use": "prioritized"}], "FCFS", "heuristics in this scenario: prioritized"),
        ("chemo", [{"use": "tumour-feedback"}], "tumour-feedback", "the chemo domain has no runtime shield"),
    ],
)
def test_a_shield_must_name_a_heuristic_the_domain_can_shield_with(
    tmp_path, domain, heuristics, shield, message
):
    learned = {"algorithm": "ppo", "train_steps": 1000, "shield": {"heuristic": shield}}
    with pytest.raises(ScenarioError, match=message) as info:
        load_scenario(_scenario(tmp_path, domain, learned, heuristics))
    assert "shield.heuristic" in str(info.value)


def test_validation_scores_a_shielded_entry_without_its_shield():
    from fieldrl.domains import get_domain
    from fieldrl.evaluation.runner import evaluation_wrapper

    scenario = load_scenario("taxiway/quick")
    shield = Shield(heuristic="prioritized planning")
    entry = scenario.policies.learned[0].model_copy(update={"shield": shield})
    domain = get_domain("taxiway")
    params = domain.params_model.model_validate(scenario.variant_params(scenario.variant_names[0]))
    assert evaluation_wrapper(scenario, domain, params, entry, shielded=False) is None
    wrap = evaluation_wrapper(scenario, domain, params, entry)
    assert wrap is not None and isinstance(wrap(_HoldEveryone()), ShieldedPolicy)


def test_taxiway_checkpoints_are_selected_on_the_return_where_a_frozen_policy_scores_low():
    from fieldrl.domains import get_domain
    from fieldrl.evaluation import runner

    scenario = load_scenario("taxiway/quick")
    domain = get_domain("taxiway")
    params = domain.params_model.model_validate(scenario.variant_params(scenario.variant_names[0]))
    assert runner.primary_kpi(scenario, domain).name == "conflicts_per_100"
    assert runner.selection_kpi(scenario, domain).name == "return"
    frozen = runner.validation_score(scenario, domain, params, _HoldEveryone())
    planner = runner.validation_score(scenario, domain, params, Prioritized("pp"))
    assert frozen < planner  # holding everyone has no conflicts, but it is charged its waiting
