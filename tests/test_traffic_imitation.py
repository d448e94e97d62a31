"""Warm starts in traffic: only a controller that decides can be imitated (SUMO's programs ignore actions)."""

from __future__ import annotations

import pytest
import yaml

from fieldrl.errors import ScenarioError
from fieldrl.scenario import load_scenario

SCENARIOS = "src/fieldrl/scenarios/traffic"


def _with_warm_start(tmp_path, heuristic: str) -> str:
    from pathlib import Path

    data = yaml.safe_load((Path(SCENARIOS) / "quick.yaml").read_text())
    for entry in data["policies"]["learned"]:
        entry.pop("tuned", None)
    data["policies"]["learned"][0]["imitate"] = {"heuristic": heuristic, "episodes": 2}
    path = tmp_path / "warm.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


@pytest.mark.parametrize("program", ["Webster", "fixed-time", "actuated"])
def test_a_sumo_program_cannot_be_imitated_and_the_error_names_what_can(tmp_path, program):
    with pytest.raises(ScenarioError) as info:
        load_scenario(_with_warm_start(tmp_path, program))
    text = str(info.value)
    assert "policies.learned[0].imitate.heuristic" in text and repr(program) in text
    assert "no decisions to copy" in text and "max-pressure, longest queue, ped-actuated" in text


def test_a_controller_that_decides_can_be_imitated(tmp_path):
    scenario = load_scenario(_with_warm_start(tmp_path, "max-pressure"))
    assert scenario.policies.learned[0].imitate.heuristic == "max-pressure"
