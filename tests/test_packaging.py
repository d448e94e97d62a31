"""Packaging: domains come from the ``fieldrl.domains`` entry-point group, and a domain whose extra
is not installed is refused in one line that names the extra to install."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

import fieldrl.domains as registry
from fieldrl.cli import app
from fieldrl.errors import ScenarioError
from fieldrl.scenario import parse_scenario

runner = CliRunner()


@pytest.fixture
def fresh_registry():
    registry._entry_points.cache_clear()
    yield registry
    registry._entry_points.cache_clear()


def test_every_builtin_domain_is_an_entry_point_with_the_extra_it_needs(fresh_registry):
    names = fresh_registry.domain_names()
    assert {"chemo", "memory", "wealth", "taxiway", "rail", "traffic", "uav"} <= set(names)
    extras = {name: fresh_registry.entry_point(name).extras for name in names}
    assert extras["rail"] == ["rail"] and extras["traffic"] == ["traffic"] and extras["uav"] == ["uav"]
    assert extras["chemo"] == [] and extras["taxiway"] == []  # in the core install


@pytest.fixture
def without_flatland(fresh_registry, monkeypatch):
    real = fresh_registry._installed
    monkeypatch.setattr(fresh_registry, "_installed", lambda dist: dist != "flatland-rl" and real(dist))
    return fresh_registry


def test_a_domain_without_its_extra_names_the_install_line(without_flatland):
    assert without_flatland.missing_requirements("rail") == ["flatland-rl"]
    assert without_flatland.missing_requirements("chemo") == []
    with pytest.raises(without_flatland.MissingExtraError, match=r"pip install 'fieldrl\[rail\]'"):
        without_flatland.get_domain("rail")


def test_run_of_a_domain_without_its_extra_is_one_line_exit_2_and_writes_nothing(without_flatland, tmp_path):
    out = tmp_path / "run"
    result = runner.invoke(app, ["run", "rail/quick", "--budget", "demo", "--out", str(out)])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert lines == [
        "error: rail/quick: domain = 'rail': needs packages that are not installed (flatland-rl): "
        "pip install 'fieldrl[rail]'"
    ]
    assert not out.exists()
    listed = runner.invoke(app, ["list"])
    domains = listed.output[listed.output.index("Domains:") :]
    rail_row = domains[domains.index("│ rail ") :].split("│ taxiway")[0]
    assert listed.exit_code == 0 and "not installed" in rail_row and "'fieldrl[rail]')" in rail_row


def test_a_third_party_domain_registers_through_the_entry_point_group(fresh_registry, tmp_path, monkeypatch):
    """A package of its own (here a module and a dist-info folder on sys.path) adds a domain."""
    (tmp_path / "toy_domain.py").write_text(
        textwrap.dedent(
            """
            import copy
            from fieldrl.domains.memory import DOMAIN as MEMORY

            DOMAIN = copy.copy(MEMORY)
            DOMAIN.name = "toy"
            """
        )
    )
    dist = tmp_path / "toy_domain-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-domain\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[fieldrl.domains]\ntoy = toy_domain:DOMAIN\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "toy_domain", raising=False)
    assert "toy" in fresh_registry.domain_names()
    assert fresh_registry.get_domain("toy").name == "toy"
    builtin = Path(registry.__file__).parent.parent / "scenarios" / "memory" / "cue.yaml"
    cue = yaml.safe_load(builtin.read_text())
    cue["domain"] = "toy"
    for entry in cue["policies"]["learned"]:
        entry.pop("tuned", None)
    scenario = parse_scenario(yaml.safe_dump(cue), "toy.yaml", build=False)
    assert scenario.domain == "toy"


def test_an_unknown_domain_lists_the_registered_ones(fresh_registry, scenario_data):
    scenario_data["domain"] = "toy"
    with pytest.raises(ScenarioError, match="unknown domain; allowed: chemo, memory"):
        parse_scenario(yaml.safe_dump(scenario_data), "x.yaml", build=False)
