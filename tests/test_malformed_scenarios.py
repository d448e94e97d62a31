"""Property-based: whatever junk a scenario file holds, for every domain, fieldrl ends with one
clear message and exit status 2 — never a traceback, never a run folder."""

from __future__ import annotations

import copy
import math
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from fieldrl.cli import app
from fieldrl.scenario import builtin_scenarios, load_scenario

cli = CliRunner()


def _one_scenario_per_domain() -> list[str]:
    chosen: dict[str, str] = {}
    for name in builtin_scenarios():
        domain = name.split("/")[0]
        if domain not in chosen or name.endswith("/quick"):
            chosen[domain] = name
    return sorted(chosen.values())


def _paths(node: Any, prefix: tuple = ()) -> list[tuple]:
    """Every key path in a nested dict/list (inner nodes included)."""
    found = [prefix] if prefix else []
    if isinstance(node, dict):
        for key, value in node.items():
            found += _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            found += _paths(value, (*prefix, i))
    return found


JUNK = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**12), 10**12),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.lists(st.integers(-5, 5), max_size=3),
    st.dictionaries(st.text(min_size=1, max_size=6), st.integers(), max_size=2),
)


def _parent(data: Any, path: tuple) -> Any:
    node = data
    for part in path[:-1]:
        node = node[part]
    return node


@st.composite
def malformed(draw: st.DrawFn, base: dict) -> tuple[dict, str]:
    data = copy.deepcopy(base)
    path = draw(st.sampled_from(_paths(data)))
    parent, last = _parent(data, path), path[-1]
    how = draw(st.sampled_from(["replace", "delete", "add"]))
    if how == "delete" and isinstance(parent, dict):
        del parent[last]
    elif how == "add" and isinstance(parent, dict):
        parent[draw(st.text(min_size=1, max_size=8))] = draw(JUNK)
    else:
        parent[last] = draw(JUNK)
    return data, str(path[0])


@pytest.mark.parametrize("name", _one_scenario_per_domain())
@settings(
    max_examples=20,
    deadline=None,
    derandomize=True,  # the same examples on every CI run: a failure here is reproducible
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_malformed_scenario_ends_in_one_clear_message(name: str, data: st.DataObject, tmp_path: Path):
    base = load_scenario(name).model_dump(mode="json", exclude_none=True)
    scenario, top = data.draw(malformed(base))
    file = tmp_path / "bad.yaml"
    file.write_text(yaml.safe_dump(scenario, sort_keys=False, allow_unicode=True))
    checked = cli.invoke(app, ["validate", "--build", str(file)])
    assume(checked.exit_code != 0)  # a mutation that is still valid is not this test's business
    out_dir = tmp_path / "run"
    for result in (checked, cli.invoke(app, ["run", str(file), "--out", str(out_dir), "--quiet"])):
        message = result.output.strip()
        assert result.exit_code == 2, message
        assert "Traceback" not in message and message.startswith("error:"), message
        assert len(message.splitlines()) <= 4, message
    assert not out_dir.exists()


def test_nan_and_infinity_are_named_not_crashed(tmp_path: Path):
    base = load_scenario("chemo/quick").model_dump(mode="json", exclude_none=True)
    base["policies"]["learned"][0]["hyperparameters"]["learning_rate"] = math.nan
    file = tmp_path / "nan.yaml"
    file.write_text(yaml.safe_dump(base, sort_keys=False))
    result = cli.invoke(app, ["validate", str(file)])
    flat = " ".join(result.output.split())
    assert result.exit_code == 2 and "policies.learned[0].hyperparameters.learning_rate = nan" in flat
    assert "finite" in flat


def _with_hyperparameter(name: str, learned: int, key: str, value: Any, tmp_path: Path) -> Path:
    base = load_scenario(name).model_dump(mode="json", exclude_none=True)
    base["policies"]["learned"][learned]["hyperparameters"][key] = value
    file = tmp_path / "big.yaml"
    file.write_text(yaml.safe_dump(base, sort_keys=False))
    return file


@pytest.mark.parametrize(
    ("name", "learned", "key", "value", "named"),
    [
        ("taxiway/quick", 0, "n_steps", 10**7, "hyperparameters.n_steps = 10000000"),
        ("traffic/quick", 3, "buffer_size", 10**9, "hyperparameters.buffer_size = 1000000000"),  # DQN
        ("chemo/quick", 0, "policy_kwargs", {"net_arch": [10**9, 64]}, "policies.learned[0]"),
    ],
)
def test_buffers_and_networks_too_big_for_memory_are_refused_before_anything_allocates(
    name: str, learned: int, key: str, value: Any, named: str, tmp_path: Path
):
    """Such typos once passed validation; training then allocated until the OS killed it."""
    file = _with_hyperparameter(name, learned, key, value, tmp_path)
    result = cli.invoke(app, ["validate", "--build", str(file)])
    flat = " ".join(result.output.split())
    assert result.exit_code == 2 and named in flat, flat
    assert "memory" in flat or "free" in flat, flat
    assert "Traceback" not in flat
