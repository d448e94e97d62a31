"""Every controller changes stage on the same intergreen, and the report says which it was.

fieldrl's controller closes each change with ``all_red_s`` of all-red after the yellow; the SUMO
programs fieldrl builds for generated networks (netgenerate's fixed-time, Webster's, the actuated
copy) carry the same all-red, so no side of a comparison pays a clearance the other does not.
"""

from __future__ import annotations

import pytest

from fieldrl.domains.traffic.env import TrafficEnv
from fieldrl.domains.traffic.networks import NETCONVERT_YELLOW_CLEARANCE
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


def _all_red_after_each_yellow(phases: list[tuple[float, str]]) -> list[float]:
    """Per yellow phase, the seconds of all-red that follow it (0 if a green follows)."""
    out = []
    for k, (_, state) in enumerate(phases):
        if "y" in state:
            duration, after = phases[(k + 1) % len(phases)]
            out.append(duration if after in _all_red_phases([after]) else 0.0)
    return out


@pytest.mark.parametrize("all_red_s", [0, 1, 2])
@pytest.mark.parametrize("network", ["single", "grid"])
def test_sumo_programs_fieldrl_builds_carry_the_scenarios_all_red(network, all_red_s):
    env = TrafficEnv(TrafficParams(periods=SHORT, network=network, all_red_s=all_red_s))
    files = {"0": env.net_file, "webster": env._webster_file(), "actuated": env._additional_files()[0]}
    for program_id, path in files.items():
        programs = program_phases(path, program_id)
        assert sorted(programs) == sorted(env.possible_agents), program_id
        for phases in programs.values():
            after = _all_red_after_each_yellow(phases)
            assert after and all(s == all_red_s for s in after), (program_id, phases)
            yellows = [d for d, s in phases if "y" in s]
            assert yellows and all(d == NETCONVERT_YELLOW_CLEARANCE[0] for d in yellows), (program_id, phases)
    assert [lay.n_stages for lay in env.layouts] == [3] * len(env.layouts)  # all-reds are not stages


@pytest.mark.parametrize("all_red_s", [0, 1, 2])
def test_fieldrl_controller_pays_exactly_all_red_s(all_red_s):
    env = TrafficEnv(TrafficParams(periods=SHORT, network="single", all_red_s=all_red_s))
    layout = env.layouts[0]
    ctl = StageController(layout, env.timing)
    plan = ctl._transition(0, 1)
    assert len(_all_red_phases(plan)) == all_red_s


@pytest.mark.parametrize("all_red_s", [0, 1])
def test_report_states_the_shared_intergreen(all_red_s):
    note = intergreen_note(TrafficParams(periods=SHORT, network="single", all_red_s=all_red_s))
    assert f"{all_red_s} s of all-red," in note and "the same intergreen" in note
    longer_yellow = intergreen_note(TrafficParams(periods=SHORT, network="single", yellow_s=4))
    assert "the same intergreen" not in longer_yellow
    assert "netconvert's defaults (3 s and 5 s)" in longer_yellow
    resco = TrafficParams(resco="cologne1", all_red_s=0)
    assert not resco.generated_programs
    assert "network's own programs define" in intergreen_note(resco)


@pytest.mark.parametrize("name", ["traffic/quick", "traffic/grid-pedestrians", "traffic/arterial-surge"])
def test_shipped_generated_scenarios_share_one_intergreen(name):
    params = TrafficParams(**load_scenario(name).params)
    assert params.generated_programs and "the same intergreen" in intergreen_note(params)
