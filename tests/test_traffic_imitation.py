"""Warm starts in traffic: any standard controller, SUMO's programs included (their stages are read back)."""

from __future__ import annotations

import pytest
import yaml
from conftest import shipped_untuned

from fieldrl.scenario import load_scenario

SCENARIOS = "src/fieldrl/scenarios/traffic"


def _with_warm_start(tmp_path, heuristic: str) -> str:

    data = shipped_untuned("traffic/quick")
    data["policies"]["learned"][0]["imitate"] = {"heuristic": heuristic, "episodes": 2}
    path = tmp_path / "warm.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


@pytest.mark.parametrize("program", ["Webster", "fixed-time", "actuated", "max-pressure"])
def test_every_standard_controller_can_anchor_a_warm_start(tmp_path, program):
    scenario = load_scenario(_with_warm_start(tmp_path, program))
    assert scenario.policies.learned[0].imitate.heuristic == program


@pytest.fixture
def _cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("FIELDRL_TRAFFIC_DIR", str(tmp_path_factory.getbasetemp() / "traffic-cache"))


def test_a_sumo_program_demonstrates_the_stages_it_showed(_cache):
    """Webster's program ignores actions; its warm start learns, for every decision, the stage the
    junction showed next (read back from SUMO), and sees the green time as a policy in control would."""
    import numpy as np

    from fieldrl.domains.traffic import DOMAIN
    from fieldrl.domains.traffic.params import PeriodModel, TrafficParams
    from fieldrl.policies.imitation import collect

    period = PeriodModel(name="peak", duration_s=300, vehicles_main=600, vehicles_side=300, pedestrians=400)
    params = TrafficParams(periods=[period])
    spec = DOMAIN.heuristics["webster"]
    envs = DOMAIN.make_eval_envs(params, [1])
    try:
        demos = collect(envs, spec.build(spec.settings_model(), params, "Webster"), gamma=0.95)
    finally:
        envs.close()
    n_stages = envs.envs[0].n_stages
    decisions = params.duration_s // params.decision_s
    # one junction; every decision kept but the last ones if the day ends while the signal changes
    assert decisions - 2 <= len(demos) <= decisions
    shares = np.bincount(demos.actions, minlength=n_stages) / len(demos)
    assert shares[0] > 0.3 and shares[1] > 0.3  # the program's cycle alternates the two main greens
    stage = demos.obs[:, :n_stages].argmax(axis=1)
    showing = demos.obs[:, :n_stages].max(axis=1) == 1.0
    changing = demos.obs[:, n_stages] == 1.0
    # the action of each decision is the stage shown at the next one (when a green is shown)
    settled = showing[1:] & ~changing[1:]
    assert settled.sum() > len(demos) / 2
    assert (demos.actions[:-1][settled] == stage[1:][settled]).all()
    # the green time grows while a stage is held, as fieldrl's own controller counts it
    green = demos.obs[:, n_stages + 1]
    held = settled & (stage[1:] == stage[:-1]) & showing[:-1] & ~changing[:-1]
    assert held.any() and (green[1:][held] > green[:-1][held]).all()
