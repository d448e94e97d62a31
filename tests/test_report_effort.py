"""The report states the effort each learned policy really got: steps and updates read from the saved
models (not the scenario's stated budget), the checkpoint kept, the tuning study, and a page-1 warning
for a held-out model that never made a gradient update."""

from __future__ import annotations

import copy

import pytest
from pypdf import PdfReader

import fieldrl
from fieldrl.policies.learned import MODEL_FILE
from fieldrl.policies.weights import read_record
from fieldrl.reports.pdf import untrained_warnings
from fieldrl.scenario import load_scenario


def _page_texts(path) -> list[str]:
    return [" ".join((page.extract_text() or "").split()) for page in PdfReader(path).pages]


@pytest.fixture(scope="module")
def validated_run(tmp_path_factory):
    from conftest import TINY_SCENARIO

    data = copy.deepcopy(TINY_SCENARIO)
    data["seeds"]["validation"] = {"start": 50, "count": 3}
    data["policies"]["learned"][0]["train_steps"] = 300  # not a multiple of the 256-step rollout
    data["policies"]["learned"][0]["validate_every"] = 256
    folder = tmp_path_factory.mktemp("effort")
    (folder / "s.yaml").write_text(__import__("yaml").safe_dump(data))
    return fieldrl.run(folder / "s.yaml", out=folder / "run", show_progress=False)


def test_page_one_states_steps_and_updates_read_from_the_model(validated_run):
    record = read_record(validated_run.run_dir / "models/default/PPO/seed-0" / MODEL_FILE)
    assert record["num_timesteps"] == 512  # SB3 finishes its second 256-step rollout: not the 300 asked
    first = _page_texts(validated_run.report)[0]
    assert "Training effort" in first
    assert f"{record['num_timesteps']:,} env steps, {record['gradient_updates']:,} gradient updates" in first
    assert "best of its validation checkpoints" in first
    assert "as written in the scenario (not tuned)" in first


def test_validation_curves_and_selection_are_in_the_report(validated_run):
    text = " ".join(_page_texts(validated_run.report))
    assert "Validation curves" in text and "time to quality" in text
    assert "Tuning and model selection" in text and "Validation seeds: 3 seeds, 50-52" in text
    levels = validated_run.summary["validation"]["heuristics"]["default"]
    assert set(levels) == {"no treatment", "constant 0.5"}


def test_a_model_that_never_updated_is_flagged(scenario_data, write_scenario):
    scenario = load_scenario(write_scenario(scenario_data))
    idle = {"num_timesteps": 256, "gradient_updates": 8, "selected": {"timesteps": 0, "gradient_updates": 0}}
    trained = {
        "num_timesteps": 256,
        "gradient_updates": 8,
        "selected": {"timesteps": 256, "gradient_updates": 8},
    }
    summary = {"validation": {"learned": {"default": {"PPO": {"0": idle, "1": trained}}}}}
    (line,) = untrained_warnings(summary, scenario)
    assert line.startswith("PPO: 1 of 2 trained model(s)") and "untrained network" in line
    summary["validation"]["learned"]["default"]["PPO"]["0"] = trained
    assert untrained_warnings(summary, scenario) == []


def test_hyperparameters_tuned_on_another_scenario_are_disclosed_as_transferred():
    from fieldrl.reports.pdf import _tuning_text, tuned_elsewhere

    scenario = load_scenario("taxiway/quick")
    (entry,) = scenario.policies.learned
    assert entry.tuning is not None and entry.tuning.study.startswith(scenario.name + "/")
    assert tuned_elsewhere(entry, scenario.name) is None
    assert "transferred" not in _tuning_text(entry, scenario.name)
    assert tuned_elsewhere(entry, "taxiway-densities") == f"on scenario {scenario.name}"
    text = _tuning_text(entry, "taxiway-densities")
    assert f"on scenario {scenario.name}, transferred here (not tuned for this entry here)" in text
    # the same study shared with a sibling entry (a warm-started copy, say) is disclosed too
    sibling = entry.model_copy(update={"name": "PPO (warm start)"})
    assert tuned_elsewhere(sibling, scenario.name) == f"for policy {entry.label}"
    both = tuned_elsewhere(sibling, "taxiway-densities")
    assert both == f"on scenario {scenario.name} for policy {entry.label}"
