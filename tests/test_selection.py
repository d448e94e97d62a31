"""Validation-gated selection: validation seeds apart from the rest; the best checkpoint is the one kept."""

from __future__ import annotations

import io

import pandas as pd
import pytest
import torch

import fieldrl
from fieldrl.domains import get_domain
from fieldrl.errors import ScenarioError
from fieldrl.evaluation.runner import demonstration_seeds
from fieldrl.policies.learned import MODEL_FILE, VALIDATION_FILE, train_model
from fieldrl.policies.selection import Validation
from fieldrl.policies.weights import read_record, read_weights
from fieldrl.scenario import LearnedEntry, load_scenario


def test_validation_seeds_must_be_apart_from_train_and_held_out(scenario_data, write_scenario):
    scenario_data["seeds"]["validation"] = [50, 101]
    with pytest.raises(ScenarioError) as info:
        load_scenario(write_scenario(scenario_data))
    assert "seeds" in str(info.value) and "eval and validation seeds must be disjoint" in str(info.value)
    scenario_data["seeds"]["validation"] = [0, 50]
    with pytest.raises(ScenarioError, match="train and validation seeds must be disjoint"):
        load_scenario(write_scenario(scenario_data))


def test_budget_caps_validation_seeds_and_demonstrations_skip_them(scenario_data, write_scenario):
    scenario_data["seeds"]["validation"] = {"start": 1, "count": 5}
    scenario_data["budgets"]["demo"]["validation_seeds"] = 2
    scenario = load_scenario(write_scenario(scenario_data))
    assert scenario.with_budget("demo").seeds.validation == [1, 2]
    assert demonstration_seeds(scenario, 0, 4) == [0, 6, 7, 8]


def test_the_weights_kept_are_those_of_the_best_validation_score(tmp_path):
    domain = get_domain("chemo")
    params = domain.params_model(preset="s1", max_t=40)
    entry = LearnedEntry(
        algorithm="ppo",
        train_steps=512,
        n_envs=2,
        validate_every=128,
        hyperparameters={"n_steps": 64, "batch_size": 64, "n_epochs": 2},
    )
    scores = iter([1.0, 5.0, 3.0, 2.0, 4.0, 0.0])  # the second evaluation (128 steps) is the best
    seen: list[dict[str, torch.Tensor]] = []

    def score(model, norm):
        seen.append({k: v.clone() for k, v in model.policy.state_dict().items()})
        return next(scores)

    validation = Validation(every=128, score=score, higher_is_better=True, kpi="return")
    artifacts = train_model(
        lambda n, s: domain.make_train_vec_env(params, n, s),
        entry.training_spec(),
        0,
        tmp_path,
        validation=validation,
    )
    curve = pd.read_csv(io.BytesIO(artifacts[VALIDATION_FILE]))
    assert curve["timesteps"].tolist() == [0, 128, 256, 384, 512]
    assert curve["best"].tolist() == [0, 1, 0, 0, 0]
    assert (curve["cpu_seconds"].diff().dropna() >= 0).all()
    (tmp_path / MODEL_FILE).write_bytes(artifacts[MODEL_FILE])
    record = read_record(tmp_path / MODEL_FILE)
    assert record["selected"]["timesteps"] == 128 and record["selected"]["value"] == 5.0
    assert record["num_timesteps"] == 512  # what was trained, beside what was kept
    kept = read_weights(tmp_path / MODEL_FILE)
    for key, value in seen[1].items():
        assert torch.equal(kept[key], value), key
    assert any(not torch.equal(kept[k], v) for k, v in seen[-1].items())


def test_a_run_with_validation_seeds_holds_out_its_best_checkpoint(scenario_data, write_scenario, tmp_path):
    scenario_data["seeds"]["validation"] = {"start": 50, "count": 3}
    scenario_data["policies"]["learned"][0]["validate_every"] = 128
    run_dir = fieldrl.train(write_scenario(scenario_data), out=tmp_path / "r", show_progress=False)
    model_dir = run_dir / "models/default/PPO/seed-0"
    curve = pd.read_csv(model_dir / VALIDATION_FILE)
    best = curve.loc[curve["value"].idxmax()]
    record = read_record(model_dir / MODEL_FILE)
    assert record["selected"]["timesteps"] == best["timesteps"]
    assert record["selected"]["value"] == pytest.approx(best["value"])
    assert record["selected"]["kpi"] == "return"
    model = fieldrl.api.load_model(run_dir, "PPO")  # rebuilt from the scenario, weights from the file
    kept = read_weights(model_dir / MODEL_FILE)
    assert all(torch.equal(model.policy.state_dict()[k], v) for k, v in kept.items())


def test_selection_continues_across_an_interruption_from_the_checkpoint(tmp_path):
    domain = get_domain("chemo")
    params = domain.params_model(preset="s1", max_t=40)
    entry = LearnedEntry(
        algorithm="ppo",
        train_steps=768,
        n_envs=2,
        validate_every=128,
        checkpoint_every=128,
        hyperparameters={"n_steps": 64, "batch_size": 64, "n_epochs": 1},
    )
    calls = []

    def score(model, norm):
        calls.append(model.num_timesteps)
        if len(calls) == 5:  # killed during the fifth evaluation (at 512 steps)
            raise KeyboardInterrupt
        return {0: 1.0, 128: 9.0}.get(model.num_timesteps, 2.0)

    def train():
        validation = Validation(every=128, score=score, higher_is_better=True, kpi="return")
        return train_model(
            lambda n, s: domain.make_train_vec_env(params, n, s),
            entry.training_spec(),
            0,
            tmp_path / "out",
            checkpoint_dir=tmp_path / "ckpt",
            validation=validation,
        )

    with pytest.raises(KeyboardInterrupt):
        train()
    artifacts = train()
    curve = pd.read_csv(io.BytesIO(artifacts[VALIDATION_FILE]))
    assert curve["timesteps"].is_unique and curve["timesteps"].iloc[0] == 0
    assert curve["timesteps"].iloc[-1] == 768
    assert curve.loc[curve["best"] == 1, "timesteps"].tolist() == [128]  # the best from before the kill
    assert (curve["cpu_seconds"].diff().dropna() >= 0).all()
    (tmp_path / MODEL_FILE).write_bytes(artifacts[MODEL_FILE])
    assert read_record(tmp_path / MODEL_FILE)["selected"]["timesteps"] == 128
