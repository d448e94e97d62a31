"""Every controller changes stage on the same intergreen, and the report says which it was.

fieldrl's controller closes each change with ``all_red_s`` of all-red; the programs netconvert and
Webster's tool generate have none. The shipped scenarios on generated networks set ``all_red_s: 0``
so the comparison is on equal terms; the report states the intervals either way.
"""

from __future__ import annotations

import pytest

from fieldrl.domains.traffic.env import TrafficEnv
from fieldrl.domains.traffic.params import PeriodModel, TrafficParams
from fieldrl.domains.traffic.programs import program_phases
from fieldrl.domains.traffic.report import intergreen_note
from fieldrl.domains.traffic.signals import GREEN, StageController
from fieldrl.scenario import load_scenario

SHORT = [PeriodModel(name="peak", duration_s=240, vehicles_main=600, vehicles_side=300, pedestrians=600)]


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("FIELDRL_TRAFFIC_DIR", str(tmp_path_factory.getbasetemp() / "traffic-cache"))


def _all_red_phases(states: list[str]) -> list[str]:
    """Phases in which no link may go (no green, no yellow)."""
    return [s for s in states if not any(c in GREEN or c == "y" for c in s)]


@pytest.mark.parametrize("network", ["single", "grid"])
def test_generated_programs_have_no_all_red(network):
    env = TrafficEnv(TrafficParams(periods=SHORT, network=network))
    webster = program_phases(env._webster_file(), "webster")
    assert webster and all(not _all_red_phases([s for _, s in p]) for p in webster.values())
    native = program_phases(env.net_file, "0")
    assert native and all(not _all_red_phases([s for _, s in p]) for p in native.values())


@pytest.mark.parametrize("all_red_s", [0, 1, 2])
def test_fieldrl_controller_pays_exactly_all_red_s(all_red_s):
    env = TrafficEnv(TrafficParams(periods=SHORT, network="single", all_red_s=all_red_s))
    layout = env.layouts[0]
    ctl = StageController(layout, env.timing)
    plan = ctl._transition(0, 1)
    assert len(_all_red_phases(plan)) == all_red_s


@pytest.mark.parametrize("name", ["traffic/quick", "traffic/grid-pedestrians", "traffic/arterial-surge"])
def test_shipped_generated_scenarios_use_the_programs_intergreen(name):
    params = TrafficParams(**load_scenario(name).params)
    assert params.generated_programs and params.all_red_s == 0
    assert "no all-red either" in intergreen_note(params)


def test_report_says_when_intergreens_differ():
    unequal = intergreen_note(TrafficParams(periods=SHORT, network="single", all_red_s=1))
    assert "1 s of all-red" in unequal and "not on equal intergreens" in unequal
    resco = TrafficParams(resco="cologne1", all_red_s=0)
    assert not resco.generated_programs
    assert "SUMO's programs (fixed-time, Webster, actuated) run their own phases." in intergreen_note(resco)
