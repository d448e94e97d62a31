"""Broken plugins and failed episodes end in one line (issue 39).

* A third-party domain package that is broken (a syntax error, a missing module, an entry point
  that is not a Domain) or that registers a name another package registers too is one line in
  ``fieldrl list`` and never breaks the other domains; naming it in a scenario is one line, exit 2.
* A SUMO configuration whose additional file SUMO rejects is refused by ``validate --build`` (and
  so by ``run``) in one line naming the file, instead of failing every episode.
* A run whose every held-out episode failed still reports them and exits 3; ``fieldrl report``
  re-renders it.
* An episode whose policy answered NaN actions (NaN weights) is reported as that, not as a
  simulator error.
"""

from __future__ import annotations

import copy
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

import fieldrl.domains as registry
from fieldrl.cli import app
from fieldrl.scenario import parse_scenario

cli = CliRunner()
#: what a failed episode's reason says when the policy's actions were NaN or infinite
NON_FINITE_ACTIONS = "policy produced non-finite actions (NaN weights?)"

#: a domain that works: the memory domain under another name
TOY_SOURCE = '''
"""Toy domain: memory under another name."""
import copy
from fieldrl.domains.memory import DOMAIN as MEMORY

DOMAIN = copy.copy(MEMORY)
DOMAIN.name = "{name}"
'''


def _flat(text: str) -> str:
    return " ".join(text.split())


def _package(folder: Path, name: str, entry_points: dict[str, str], modules: dict[str, str]) -> Path:
    """Install distribution ``name`` into ``folder`` as pip would: its modules and a ``*.dist-info``
    with its ``fieldrl.domains`` entry points."""
    folder.mkdir(parents=True, exist_ok=True)
    for module, source in modules.items():
        (folder / f"{module}.py").write_text(textwrap.dedent(source))
    info = folder / f"{name.replace('-', '_')}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    lines = "".join(f"{domain} = {target}\n" for domain, target in entry_points.items())
    (info / "entry_points.txt").write_text(f"[fieldrl.domains]\n{lines}")
    return folder


@pytest.fixture
def on_path(monkeypatch) -> Iterator[Callable[[Path], None]]:
    """Put folders on ``sys.path`` and read the registry afresh; undone after the test, the
    folders' modules forgotten."""
    folders: list[str] = []

    def add(folder: Path) -> None:
        folders.append(str(folder))
        monkeypatch.syspath_prepend(str(folder))
        registry._entry_points.cache_clear()

    yield add
    for name, module in list(sys.modules.items()):
        if str(getattr(module, "__file__", None) or "").startswith(tuple(folders)):
            del sys.modules[name]
    registry._entry_points.cache_clear()


def _scenario_naming(domain: str) -> dict[str, Any]:
    return {
        "name": "plugin",
        "domain": domain,
        "policies": {"heuristics": [{"use": "constant"}]},
        "seeds": {"train": [0], "eval": [100]},
    }


def _validate_one_line(file: Path) -> str:
    result = cli.invoke(app, ["validate", str(file)])
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 2 and len(lines) == 1 and lines[0].startswith("error: "), result.output
    return lines[0]


# ----------------------------------------------------------------------------- broken plugins


def test_a_plugin_with_a_syntax_error_is_one_line_in_list_and_refused_where_it_is_used(on_path, tmp_path):
    """Once: a 145-line traceback from `fieldrl list`, for every user, whatever they asked."""
    broken = "DOMAIN = (\n"
    on_path(
        _package(tmp_path, "broken-plugin", {"broken": "broken_plugin:DOMAIN"}, {"broken_plugin": broken})
    )
    listed = cli.invoke(app, ["list"], env={"COLUMNS": "400"})
    assert listed.exit_code == 0, listed.output
    flat = _flat(listed.output)
    assert (
        "left out: domain 'broken': registered by package broken-plugin, but broken_plugin:DOMAIN cannot "
        f"be loaded: SyntaxError ('(' was never closed) at {tmp_path / 'broken_plugin.py'}:1" in flat
    )
    assert "│ chemo " in listed.output and "│ broken " not in listed.output  # the others still listed
    with pytest.raises(registry.BrokenDomainError, match=r"broken_plugin\.py:1$"):
        registry.get_domain("broken")
    file = tmp_path / "s.yaml"
    file.write_text(yaml.safe_dump(_scenario_naming("broken")))
    line = _validate_one_line(file)
    assert line.startswith(f"error: {file}: domain = 'broken': registered by package broken-plugin, but ")
    assert "SyntaxError" in line


def test_a_plugin_whose_module_is_missing_is_named_with_its_package(on_path, tmp_path):
    on_path(_package(tmp_path, "ghost-plugin", {"ghost": "ghost_module:DOMAIN"}, {}))
    listed = cli.invoke(app, ["list"], env={"COLUMNS": "400"})
    assert listed.exit_code == 0, listed.output
    assert (
        "left out: domain 'ghost': registered by package ghost-plugin, but ghost_module:DOMAIN cannot be "
        "loaded: ModuleNotFoundError: No module named 'ghost_module'" in _flat(listed.output)
    )
    file = tmp_path / "s.yaml"
    file.write_text(yaml.safe_dump(_scenario_naming("ghost")))
    assert "ModuleNotFoundError: No module named 'ghost_module'" in _validate_one_line(file)


def test_a_plugin_whose_import_fails_is_refused_on_use_naming_where(on_path, tmp_path):
    """It parses, so `fieldrl list` (which imports no domain) shows it; using it names the line."""
    source = '"""Needs a library that is not installed."""\nimport no_such_library_here\nDOMAIN = None\n'
    on_path(_package(tmp_path, "needy-plugin", {"needy": "needy_plugin:DOMAIN"}, {"needy_plugin": source}))
    assert cli.invoke(app, ["list"], env={"COLUMNS": "400"}).exit_code == 0
    file = tmp_path / "s.yaml"
    file.write_text(yaml.safe_dump(_scenario_naming("needy")))
    line = _validate_one_line(file)
    assert "package needy-plugin" in line
    assert f"No module named 'no_such_library_here' at {tmp_path / 'needy_plugin.py'}:2" in line
    listed = cli.invoke(app, ["list", "needy"])
    assert listed.exit_code == 2 and _flat(listed.output).startswith("error: domain 'needy': registered by")


def test_an_entry_point_that_is_not_a_domain_is_refused_in_one_line(on_path, tmp_path):
    """Once: a TypeError traceback."""
    source = '"""Not a domain."""\nDOMAIN = {"name": "fake"}\n'
    on_path(_package(tmp_path, "fake-plugin", {"fake": "fake_plugin:DOMAIN"}, {"fake_plugin": source}))
    with pytest.raises(registry.BrokenDomainError) as caught:
        registry.get_domain("fake")
    assert str(caught.value) == (
        "domain 'fake': registered by package fake-plugin, but fake_plugin:DOMAIN is a builtins.dict, "
        "not a fieldrl Domain"
    )
    file = tmp_path / "s.yaml"
    file.write_text(yaml.safe_dump(_scenario_naming("fake")))
    assert "fake_plugin:DOMAIN is a builtins.dict, not a fieldrl Domain" in _validate_one_line(file)


def test_two_packages_registering_one_name_are_refused_naming_both(on_path, tmp_path):
    """Once: which one won was silent and depended on the order of sys.path."""
    for package, module in (("toy-one", "toy_one"), ("toy-two", "toy_two")):
        folder = _package(
            tmp_path / package, package, {"toy": f"{module}:DOMAIN"}, {module: TOY_SOURCE.format(name="toy")}
        )
        on_path(folder)
    refusal = "domain 'toy': registered by 2 packages, toy-two and toy-one: uninstall one of them"
    assert refusal in _flat(cli.invoke(app, ["list"], env={"COLUMNS": "400"}).output)
    with pytest.raises(registry.BrokenDomainError, match="toy-two and toy-one"):
        registry.get_domain("toy")
    file = tmp_path / "s.yaml"
    file.write_text(yaml.safe_dump(_scenario_naming("toy")))
    assert "registered by 2 packages, toy-two and toy-one" in _validate_one_line(file)


def test_one_package_found_twice_on_the_path_is_not_a_clash(on_path, tmp_path):
    """An editable install and a leftover copy of the same distribution: it is imported once."""
    for copy_name in ("editable", "leftover"):
        folder = _package(
            tmp_path / copy_name,
            "toy-twice",
            {"twice": "toy_twice:DOMAIN"},
            {"toy_twice": TOY_SOURCE.format(name="twice")},
        )
        on_path(folder)
    assert "left out" not in cli.invoke(app, ["list"], env={"COLUMNS": "400"}).output
    assert registry.get_domain("twice").name == "twice"
    scenario = parse_scenario(yaml.safe_dump(_scenario_naming("twice")), "s.yaml", build=False)
    assert scenario.domain == "twice"


def test_the_command_line_lists_a_broken_plugin_and_refuses_its_scenario_in_one_line(tmp_path):
    """As a user sees it: the plugin installed on PYTHONPATH, fieldrl started as a command."""
    folder = _package(
        tmp_path / "site",
        "broken-plugin",
        {"broken": "broken_plugin:DOMAIN"},
        {"broken_plugin": "DOMAIN = (\n"},
    )
    file = tmp_path / "s.yaml"
    file.write_text(yaml.safe_dump(_scenario_naming("broken")))
    env = {**os.environ, "PYTHONPATH": str(folder), "COLUMNS": "300"}
    command = [sys.executable, "-c", "from fieldrl.cli import main; main()"]
    listed = subprocess.run([*command, "list"], capture_output=True, text=True, env=env, timeout=120)
    assert listed.returncode == 0 and "Traceback" not in listed.stderr, listed.stderr
    assert "left out: domain 'broken': registered by package broken-plugin" in listed.stdout
    assert "│ chemo " in listed.stdout
    checked = subprocess.run(
        [*command, "validate", str(file)], capture_output=True, text=True, env=env, timeout=120
    )
    assert checked.returncode == 2 and checked.stdout == "", checked.stdout
    lines = checked.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {file}: domain = 'broken': registered by package")


# ----------------------------------------------------------------------------- SUMO inputs


@pytest.fixture
def traffic_cache(tmp_path_factory, monkeypatch) -> None:
    monkeypatch.setenv("FIELDRL_TRAFFIC_DIR", str(tmp_path_factory.getbasetemp() / "traffic-cache"))


def _sumocfg(folder: Path, additional: str) -> Path:
    from fieldrl.domains.traffic.networks import NetworkOptions, build_network

    (folder / "town.net.xml").write_bytes(build_network(NetworkOptions(layout="single")).read_bytes())
    (folder / "stops.add.xml").write_text(additional)
    cfg = folder / "town.sumocfg"
    cfg.write_text(
        '<configuration><input><net-file value="town.net.xml"/><additional-files value="stops.add.xml"/>'
        "</input></configuration>"
    )
    return cfg


SHORT_PERIOD = {"name": "p", "duration_s": 120, "vehicles_main": 300, "vehicles_side": 100, "pedestrians": 50}


def test_an_additional_file_sumo_rejects_is_refused_by_validate_build_naming_it(traffic_cache, tmp_path):
    """Once: accepted, then every episode failed in SUMO and the report crashed (exit 1)."""
    from fieldrl.domains.traffic.params import TrafficParams

    stop = '<additional><busStop id="b" lane="{lane}" startPos="0" endPos="10"/></additional>'
    good = _sumocfg(tmp_path, stop.format(lane="left0A0_1"))
    assert TrafficParams(sumocfg=str(good), periods=[SHORT_PERIOD]).sumocfg == str(good)  # SUMO takes it
    cfg = _sumocfg(tmp_path, stop.format(lane="nowhere_0"))
    scenario = {
        "name": "bad-stop",
        "domain": "traffic",
        "params": {"sumocfg": "town.sumocfg", "periods": [SHORT_PERIOD]},
        "policies": {"heuristics": [{"use": "fixed-time"}]},
        "seeds": {"train": [0], "eval": [1000]},
    }
    file = tmp_path / "s.yaml"
    file.write_text(yaml.safe_dump(scenario))
    assert cli.invoke(app, ["validate", str(file)]).exit_code == 0  # without --build: no simulator
    result = cli.invoke(app, ["validate", "--build", str(file)])
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 2 and len(lines) == 1, result.output
    assert (
        f"sumocfg '{cfg}': SUMO refuses to start: {tmp_path / 'stops.add.xml'}: The lane nowhere_0 to use "
        "within the busStop 'b' is not known." in lines[0]
    )


# ----------------------------------------------------------------------------- failed episodes


def test_a_sumo_run_whose_every_episode_failed_reports_them_and_exits_3(traffic_cache, tmp_path, monkeypatch):
    """Once: IndexError in the traffic report (exit 1), and `fieldrl report` crashed the same way."""
    import libsumo
    from pypdf import PdfReader

    from fieldrl.domains.traffic.env import TrafficEnv

    def dead(self, actions):
        raise libsumo.TraCIException("Vehicle 'v7' is not known")

    monkeypatch.setattr(TrafficEnv, "step", dead)
    scenario = {
        "name": "all-failed",
        "domain": "traffic",
        "params": {"network": "single", "periods": [SHORT_PERIOD]},
        "policies": {"heuristics": [{"use": "fixed-time"}]},
        "seeds": {"train": [0], "eval": {"start": 1000, "count": 2}},
    }
    file, run = tmp_path / "s.yaml", tmp_path / "run"
    file.write_text(yaml.safe_dump(scenario))
    result = cli.invoke(app, ["run", str(file), "--out", str(run), "--quiet"])
    assert result.exit_code == 3, (result.output, result.exception)
    assert "2 held-out episode(s) ended in a simulator error (first: fixed-time, eval seed 1000: " in _flat(
        result.output
    )
    text = _flat(" ".join(page.extract_text() or "" for page in PdfReader(run / "report.pdf").pages))
    assert "No controller has results at this site: every held-out episode failed" in text
    assert (
        "fixed-time, train seed -1, eval seed 1001, episode 0: TraCIException: Vehicle 'v7' is not known"
        in text
    )
    again = cli.invoke(app, ["report", str(run)])
    assert again.exit_code == 0 and again.exception is None, again.output


def _nan_weights(monkeypatch) -> None:
    """Every learned model loads with NaN weights (as after a diverged training)."""
    import torch

    from fieldrl.policies import weights

    real = weights.read_weights

    def read_nan(path):
        return {
            k: torch.full_like(v, float("nan")) if v.is_floating_point() else v for k, v in real(path).items()
        }

    monkeypatch.setattr(weights, "read_weights", read_nan)


def test_nan_weights_are_the_policy_s_failure_not_a_simulator_error(scenario_data, tmp_path, monkeypatch):
    """Once: "ended in a simulator error (first: ValueError: Expected parameter loc ...)"."""
    from pypdf import PdfReader

    data = copy.deepcopy(scenario_data)
    data["policies"]["heuristics"] = data["policies"]["heuristics"][:1]
    data["seeds"]["eval"] = {"start": 100, "count": 2}
    file, run = tmp_path / "s.yaml", tmp_path / "run"
    file.write_text(yaml.safe_dump(data))
    assert cli.invoke(app, ["train", str(file), "--out", str(run), "--quiet"]).exit_code == 0
    _nan_weights(monkeypatch)
    result = cli.invoke(app, ["evaluate", str(run), "--quiet"])
    assert result.exit_code == 3, (result.output, result.exception)
    flat = _flat(result.output)
    assert (
        "failed: 2 held-out episode(s) ended because the policy produced non-finite actions (NaN weights?) "
        "(first: PPO, eval seed 100)" in flat
    )
    assert "simulator error" not in flat
    assert cli.invoke(app, ["report", str(run)]).exit_code == 0
    page_one = _flat(PdfReader(run / "report.pdf").pages[0].extract_text() or "")
    assert "they ended because the policy produced non-finite actions (NaN weights?)" in page_one
    assert "simulator error" not in page_one


class _Answers:
    """A policy that answers ``value`` for every action (or raises ``error``)."""

    def __init__(self, value: float = 0.5, error: Exception | None = None):
        self.name, self.value, self.error = "probe", value, error

    def reset(self, n_envs: int) -> None:
        pass

    def bind_envs(self, envs: Any) -> None:
        pass

    def act(self, obs: np.ndarray, episode_start: np.ndarray) -> np.ndarray:
        if self.error is not None:
            raise self.error
        return np.full((len(obs), 1), self.value, dtype=np.float32)


def _failures_of(policy: Any) -> list[str]:
    from fieldrl.domains import get_domain
    from fieldrl.evaluation.runner import run_episodes

    domain = get_domain("chemo")
    params = domain.params_model.model_validate({"preset": "s3", "max_t": 10})
    failures: list[tuple[int, str]] = []
    run_episodes(domain, params, policy, [100, 101], failures=failures)
    return [reason for _, reason in failures]


@pytest.mark.parametrize(
    "policy",
    [
        _Answers(float("nan")),  # a deterministic actor (TD3) with NaN weights: NaN doses
        _Answers(float("inf")),
        _Answers(error=ValueError("Expected parameter loc ... but found invalid values: tensor([[nan]])")),
    ],
    ids=["nan-action", "inf-action", "torch-distribution-of-nan"],
)
def test_non_finite_actions_are_recorded_as_the_policy_s(policy):
    """A NaN dose once gave a silent 'survival 100 %' with NaN KPIs, or a simulator error."""
    assert _failures_of(policy) == [NON_FINITE_ACTIONS, NON_FINITE_ACTIONS]


def test_a_simulator_error_is_still_one(monkeypatch):
    from fieldrl.domains.chemo import env as chemo_env
    from fieldrl.domains.chemo.env import ChemoEvalEnvs

    class Crashing(ChemoEvalEnvs):
        def step(self, actions):
            raise RuntimeError("solver diverged")

    monkeypatch.setattr(chemo_env, "ChemoEvalEnvs", Crashing)
    assert _failures_of(_Answers(0.5)) == ["RuntimeError: solver diverged"] * 2


def test_failures_of_both_kinds_are_counted_apart():
    from fieldrl.results import Failure, failures_ended

    where = {"variant": "default", "policy": "PPO", "train_seed": 0, "eval_seed": 1, "episode": 0}
    reasons = ["RuntimeError: solver diverged"] * 2 + [NON_FINITE_ACTIONS]
    failed = [Failure(**where, reason=reason) for reason in reasons]
    assert failures_ended(failed) == (
        "in a simulator error (2) or because the policy produced non-finite actions (NaN weights?) (1)"
    )
    assert failures_ended(failed[:1]) == "in a simulator error"
