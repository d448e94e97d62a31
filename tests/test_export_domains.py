"""Export across the domains (issue 42): every learned entry of every built-in scenario exports at the demo
budget, or is refused in one line for what the network alone is not; and in every domain with an exportable
learned entry, held-out episodes replayed through the bundle alone give the KPIs the run's evaluation
recorded.

Exporting every built-in entry with trained weights would mean training them all; the graph does not depend
on the weights, so each entry is exported as training starts it (:func:`fieldrl.export.check_entry`: the
model the scenario builds, traced and checked against the torch policy on the first decisions of a training
episode). The replays use tiny runs (a few dozen training steps, one or two held-out seeds): what they check
is that the bundle plays the evaluation's episodes as the evaluated policy did, not how good it is.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from fieldrl import api, export
from fieldrl.bundle_replay import RTOL
from fieldrl.domains import get_domain
from fieldrl.errors import FieldrlError
from fieldrl.export import replay_bundle
from fieldrl.scenario import builtin_scenarios, load_scenario

#: decisions of the training episode each built-in entry is checked on (export checks up to 500; the
#: graph is the same, and 64 keep the whole sweep near 15 CPU-s)
ENTRY_DECISIONS = 64


# ----------------------------------------------------------------------------- every built-in entry


@pytest.mark.parametrize("ref", builtin_scenarios())
def test_every_learned_entry_of_a_builtin_scenario_exports_at_demo_budget_or_is_refused_in_one_line(ref):
    scenario = load_scenario(ref, build=False).with_budget("demo")
    checked = 0
    for entry in scenario.policies.learned:
        refused = export.refusal(entry, scenario.domain)
        for setting in scenario.variants_of(entry):
            where = f"{ref}: {entry.label} [{setting}]"
            if refused is not None:
                # only what the network alone is not is refused: a runtime shield or a residual correction
                assert entry.shield is not None or entry.residual is not None, (where, refused)
                assert "\n" not in refused and ("shield" in refused or "residual" in refused), where
                with pytest.raises(FieldrlError) as raised:
                    export.check_entry(scenario, entry.label, setting, ENTRY_DECISIONS)
                assert str(raised.value) == refused, where
                continue
            domain = get_domain(scenario.domain)
            params = domain.params_model.model_validate(scenario.policy_params(setting, entry.label))
            safeguard = domain.environment_safeguard(params)
            if (
                safeguard is not None
            ):  # the environment's own safeguard (the UAV rectifier) is not in a bundle
                with pytest.raises(FieldrlError) as raised:
                    export.check_entry(scenario, entry.label, setting, ENTRY_DECISIONS)
                assert safeguard in str(raised.value) and "\n" not in str(raised.value), where
                assert str(raised.value) == export.safeguard_refusal(entry, domain, params, setting), where
                continue
            check = export.check_entry(scenario, entry.label, setting, ENTRY_DECISIONS)
            assert 1 <= check["decisions"] <= ENTRY_DECISIONS, (where, check)
            if "differing_actions" in check:
                assert check["differing_actions"] == 0, (where, check)
            else:
                assert check["max_abs_difference"] <= export.TOLERANCE, (where, check)
            checked += 1
    assert checked or all(export.refusal(e, scenario.domain) for e in scenario.policies.learned), ref


# ----------------------------------------------------------------------------- held-out replays per domain

#: the smallest PPO rollout: training is here only to give the weights something other than their start
TINY_PPO = {"n_steps": 32, "batch_size": 32, "n_epochs": 1}


def _ppo(algorithm: str, name: str, agents: int = 1, **extra: Any) -> dict[str, Any]:
    """A PPO-family entry that trains one rollout of ``agents`` rows per step."""
    return {
        "algorithm": algorithm,
        "name": name,
        "train_steps": 32 * agents,
        "n_envs": 1,
        "hyperparameters": dict(TINY_PPO),
        **extra,
    }


#: per domain with an exportable built-in entry (chemo: tests/test_export.py and test_export_recurrent.py),
#: a tiny scenario with the shipped entry's algorithm in the shipped scenario's world (shortened where an
#: episode is long), one cheap standard policy, and the label of the learned policy replayed
TINY_RUNS: dict[str, tuple[dict[str, Any], str]] = {
    # discrete, multi-agent (7 trains), masked, with the reservation shield in the mask, normalised
    "rail": (
        {
            "params": {"level": 0, "mode": "semi", "shield": True},
            "policies": {
                "heuristics": [{"use": "greedy-shortest-route"}],
                "learned": [_ppo("maskable-ppo", "PPO (shared)", agents=7, normalize_obs=True)],
            },
            "seeds": {"train": [0], "eval": {"start": 1000, "count": 1}},
        },
        "PPO (shared)",
    ),
    # discrete, masked, SUMO (libsumo); a 3-minute peak instead of traffic/quick's hour
    "traffic": (
        {
            "params": {
                "network": "single",
                "periods": [
                    {
                        "name": "peak",
                        "duration_s": 180,
                        "vehicles_main": 500,
                        "vehicles_side": 250,
                        "pedestrians": 300,
                    }
                ],
            },
            "policies": {
                "heuristics": [{"use": "fixed-time"}],
                "learned": [_ppo("maskable-ppo", "PPO")],
            },
            "seeds": {"train": [0], "eval": {"start": 1000, "count": 1}},
        },
        "PPO",
    ),
    # discrete, a row per UAV agent, the pipeline (SOCP, LP) after the network; 10 slots. Without the
    # rectifier: a policy evaluated behind it is refused (the bundle does not hold it)
    "uav": (
        {
            "params": {"n_uavs": 2, "n_vehicles": 10, "load": 2.0, "episode_slots": 10, "rectifier": "none"},
            "policies": {
                "heuristics": [{"use": "all-local"}],
                "learned": [_ppo("independent-ppo", "PPO", agents=2)],
            },
            "seeds": {"train": [0], "eval": {"start": 1000, "count": 1}},
        },
        "PPO",
    ),
    # multi-discrete (goal taken, portfolio); two episodes per held-out seed: later episode seeds replay too
    "wealth": (
        {
            "params": {
                "T": 10,
                "W0": 100,
                "goals": [{"time": 10, "levels": [[200, 1]]}],
                "max_levels": 1,
                "max_obs_goals": 1,
            },
            "policies": {
                "heuristics": [
                    {"use": "fixed-portfolio", "name": "balanced", "settings": {"portfolio": "balanced"}}
                ],
                "learned": [_ppo("ppo", "PPO")],
            },
            "seeds": {"train": [0], "eval": [10, 11]},
            "episodes_per_seed": 2,
        },
        "PPO",
    ),
    # continuous (TD3)
    "memory": (
        {
            "params": {"delay": 5, "noise": 0.0},
            "policies": {
                "heuristics": [{"use": "constant", "name": "constant +1", "settings": {"action": 1.0}}],
                "learned": [
                    {
                        "algorithm": "td3",
                        "name": "TD3",
                        "train_steps": 64,
                        "n_envs": 1,
                        "hyperparameters": {
                            "learning_starts": 32,
                            "batch_size": 16,
                            "policy_kwargs": {"net_arch": [32]},
                        },
                    }
                ],
            },
            "seeds": {"train": [0], "eval": {"start": 1000, "count": 2}},
        },
        "TD3",
    ),
}


def test_every_domain_with_an_exportable_builtin_entry_has_a_replay_here_or_in_the_chemo_tests():
    scenarios = [load_scenario(ref, build=False) for ref in builtin_scenarios()]
    exportable = {
        s.domain for s in scenarios if any(export.refusal(e, s.domain) is None for e in s.policies.learned)
    }
    assert exportable == set(TINY_RUNS) | {"chemo"}


@pytest.mark.parametrize("domain", list(TINY_RUNS))
def test_held_out_episodes_replayed_through_the_bundle_give_the_runs_kpis(domain, tmp_path: Path):
    data, label = copy.deepcopy(TINY_RUNS[domain])
    data = {"name": f"tiny-{domain}", "domain": domain, "description": "test scenario", **data}
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    run_dir = api.train(tmp_path / "s.yaml", out=tmp_path / "run", show_progress=False)
    api.evaluate(run_dir, show_progress=False)

    # at export (the default: the first held-out episode), recorded in the card
    result = export.export_policy(run_dir, label, out=tmp_path / "bundle")
    replayed = result.card["held_out_replay"]
    assert replayed["equal"] and replayed["episodes"] == 1 and not replayed["mismatches"], replayed
    assert replayed["sentence"] in (result.folder / "model-card.md").read_text()

    # every held-out episode, from the bundle folder alone (the run found through its card)
    check = replay_bundle(result.folder, episodes=None)
    plan = [
        (s, e) for s in api.open_run(run_dir)[1].seeds.eval for e in range(data.get("episodes_per_seed", 1))
    ]
    assert check.cases == plan and check.failed_in_run == 0
    assert check.metrics and check.ok, check.mismatches
    for name in check.metrics:
        for run, bundle in zip(check.run[name], check.bundle[name], strict=True):
            if check.continuous:  # float rounding of the actions, carried on by the simulator
                assert abs(bundle - run) <= max(1e-8, RTOL * abs(run)), (name, run, bundle)
            else:  # the same actions: the same episode
                assert bundle == run or (bundle != bundle and run != run), (name, run, bundle)
    assert check.continuous == (domain == "memory")
