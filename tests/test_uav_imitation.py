"""UAV warm starts: the allocation policy behaviour-cloned from the pipeline's fixed-admission rule.

The fixed rule is the practitioner's anchor in uav/dense-city (issue 20); the learned allocation
starts from it, for one shared network and for one network per UAV (independent PPO), and the plan
rules (nearest server, greedy, ...) are refused as warm starts: their actions are placeholders.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from conftest import shipped_untuned

from fieldrl.domains.uav import DOMAIN
from fieldrl.domains.uav.heuristics import FixedSettings
from fieldrl.policies.imitation import clone, collect
from fieldrl.policies.independent import IndependentPPO
from fieldrl.scenario import ScenarioError, load_scenario
from fieldrl.simulators.uav.params import UavParams

pytestmark = pytest.mark.needs("uav")

SMALL = {"n_uavs": 2, "n_vehicles": 8, "episode_slots": 6, "load": 2.0}
QUICK = Path(__file__).parents[1] / "src/fieldrl/scenarios/uav/quick.yaml"


def _fixed(params: UavParams, admit: int = 3):
    spec = DOMAIN.heuristics["pipeline-fixed"]
    return spec.build(FixedSettings(admit=admit), params, "pipeline fixed-3")


@pytest.mark.parametrize("agent_ids", [False, True], ids=["shared", "per-UAV networks"])
def test_allocation_cloned_from_the_fixed_rule_reproduces_it_for_every_uav(agent_ids):
    params = UavParams(**SMALL, agent_ids=agent_ids)
    rule = _fixed(params)
    demos = collect(DOMAIN.make_eval_envs(params, list(range(6))), rule, 0.9)
    assert len(demos) == 6 * params.n_uavs * params.episode_slots
    assert (demos.actions == rule.action).all()
    venv = DOMAIN.make_train_vec_env(params, n_envs=1, seed=0)
    model = IndependentPPO("MlpPolicy", venv, seed=0, device="cpu", n_steps=16, batch_size=32)
    assert model.policy.n_agents == (params.n_uavs if agent_ids else 0)

    unseen = DOMAIN.make_eval_envs(params, [100, 101, 102]).reset()  # (episodes, UAVs, obs)
    flat = unseen.reshape(-1, unseen.shape[-1])

    def agreement() -> float:
        actions, _ = model.predict(flat, deterministic=True)
        return float((actions == rule.action).mean())

    before = agreement()
    stats = clone(model, venv, demos, epochs=30, learning_rate=3e-3, seed=0)
    assert before < 0.9 and stats["accuracy"] == 1.0 and agreement() == 1.0, (before, stats)


def _scenario_with_warm_start(tmp_path: Path, heuristic: str) -> Path:
    text = shipped_untuned("uav/quick")
    entry = text["policies"]["learned"][0]
    entry["imitate"] = {"heuristic": heuristic, "episodes": 4}
    path = tmp_path / "warm.yaml"
    path.write_text(yaml.safe_dump(text))
    return path


def test_a_plan_rule_is_refused_as_a_warm_start_and_the_fixed_rule_accepted(tmp_path):
    heuristics = yaml.safe_load(QUICK.read_text())["policies"]["heuristics"]
    labels = {h.get("name", h["use"]): h["use"] for h in heuristics}
    plan_rule = next(label for label, use in labels.items() if use == "nearest")
    fixed_rule = next(label for label, use in labels.items() if use == "pipeline-fixed")
    with pytest.raises(ScenarioError, match=r"imitate\.heuristic.*" + plan_rule) as err:
        load_scenario(_scenario_with_warm_start(tmp_path, plan_rule))
    assert fixed_rule in str(err.value)  # the message lists what can be imitated
    scenario = load_scenario(_scenario_with_warm_start(tmp_path, fixed_rule))
    assert scenario.policies.learned[0].imitate.heuristic == fixed_rule
