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
from fieldrl.reports.pdf import flattered_by_selection, untrained_warnings
from fieldrl.results import Summary
from fieldrl.scenario import load_scenario


def _summary(**fields) -> Summary:
    """A summary with ``fields`` and the least of the rest: one KPI (return), no policies or settings."""
    kpi = {"name": "return", "label": "Return", "unit": "", "higher_is_better": True}
    base = {"confidence": 0.95, "bootstrap_samples": 100, "primary_kpi": "return", "kpis": [kpi]}
    base.update({"policies": [], "variants": {}})
    return Summary.model_validate({**base, **fields})


def _record(timesteps: int, updates: int, value: float = 0.0) -> dict:
    selected = {"timesteps": timesteps, "gradient_updates": updates, "value": value, "kpi": "return"}
    return {"algorithm": "ppo", "num_timesteps": 256, "gradient_updates": 8, "selected": selected}


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
    levels = validated_run.summary.heuristic_validation("default")
    assert set(levels) == {"no treatment", "constant 0.5"}


def test_a_model_that_never_updated_is_flagged(scenario_data, write_scenario):
    scenario = load_scenario(write_scenario(scenario_data))
    idle, trained = _record(0, 0), _record(256, 8)

    def validated(*records: dict) -> Summary:
        learned = {"default": {"PPO": {str(i): r for i, r in enumerate(records)}}}
        return _summary(validation={"heuristics": {}, "learned": learned})

    (line,) = untrained_warnings(validated(idle, trained), scenario)
    assert line.startswith("PPO: 1 of 2 trained model(s)") and "untrained network" in line
    assert untrained_warnings(validated(trained, trained), scenario) == []


def test_a_lead_on_validation_that_the_held_out_test_reverses_is_called_out(scenario_data, write_scenario):
    scenario_data["seeds"]["validation"] = {"start": 50, "count": 3}
    scenario = load_scenario(write_scenario(scenario_data))

    def summary(kept: list[float], learned_test: float, higher_is_better: bool = True) -> Summary:
        records = {str(i): _record(256, 8, v) for i, v in enumerate(kept)}
        means = {"PPO": learned_test, "constant 0.5": 200.0, "no treatment": 20.0}
        kpi = {"name": "return", "label": "Return", "unit": "", "higher_is_better": higher_is_better}
        stat = {"mean": {"value": 0.0}, "iqm": {"value": 0.0}}
        return _summary(
            kpis=[kpi],
            validation={
                "heuristics": {"default": {"no treatment": 25.0, "constant 0.5": 210.0}},
                "learned": {"default": {"PPO": records}},
            },
            variants={
                "default": {
                    "policies": {p: {"return": {**stat, "mean": {"value": v}}} for p, v in means.items()}
                }
            },
        )

    # ahead on validation (mean of the kept checkpoints 230 > 210), behind on the held-out cases
    (line,) = flattered_by_selection(summary([220.0, 240.0], 180.0), scenario, "default")
    assert line.startswith("PPO was ahead of constant 0.5 on the 3 validation cases that chose its kept")
    assert "(230 against 210) but is behind it on the held-out cases (180 against 200)" in line
    assert flattered_by_selection(summary([220.0, 240.0], 205.0), scenario, "default") == []  # confirmed
    assert flattered_by_selection(summary([190.0], 180.0), scenario, "default") == []  # never ahead
    kpi_lower = summary([10.0], 30.0, higher_is_better=False)  # rule 25 on validation, 20 held out
    (line,) = flattered_by_selection(kpi_lower, scenario, "default")
    assert "ahead of no treatment" in line and "(10 against 25)" in line and "(30 against 20)" in line


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


def test_a_study_scored_on_one_setting_says_so_where_its_values_serve_several():
    from fieldrl.reports.pdf import _tuning_text

    scenario = load_scenario("chemo/memory")
    entry = next(e for e in scenario.policies.learned if e.label == "SAC")
    assert entry.tuning is not None and entry.tuning.study == "chemo-memory/s3/SAC"
    text = _tuning_text(entry, scenario.name, scenario.variant_names)
    assert "(on setting s3, used in every setting)" in text
    assert "on setting" not in _tuning_text(entry, scenario.name, ["s3"])  # a run of that setting alone
    # a run without s3 (chemo/memory's s1, s2, s4 as one run) tested values tuned elsewhere
    other = _tuning_text(entry, scenario.name, ["s1", "s2", "s4"])
    assert "(on setting s3, which this run did not test; used in every setting here)" in other


def test_a_study_with_the_fine_tuning_aids_in_its_space_says_so_traffic_warm_start():
    from fieldrl.reports.pdf import _tuning_text

    scenario = load_scenario("traffic/quick")
    entries = {entry.name: entry for entry in scenario.policies.learned}
    warm_start = _tuning_text(entries["PPO (Webster warm start)"], scenario.name)
    assert warm_start.startswith("tuned: 8 trials of study traffic-quick/default/PPO (Webster warm start)")
    assert "the fine-tuning aids in its search space" in warm_start
    assert "transferred" not in warm_start  # its own study now, no longer PPO's
    assert "fine-tuning aids" not in _tuning_text(entries["PPO"], scenario.name)  # no warm start
