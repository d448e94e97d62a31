"""Shared fixtures: a small valid chemo scenario that tests mutate.

On an install without some extras (``pip install -e ".[train]"`` has no ``rail``, ``traffic``, ``uav`` or
``ray``), the tests that need them are skipped, each with the install line as its reason: a test
module named for the domain (``test_rail_env.py``) is not collected, and a test whose id names it
(``test_fast_validate.py::...[rail/quick]``, ``test_ray_backend_...``, ``..._sumo_...``) or that is
marked ``@pytest.mark.needs("uav")`` is skipped.
"""

from __future__ import annotations

import copy
import importlib.util
import os
import re
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
import yaml

from fieldrl.domains import domain_names, missing_extra

# one thread per test process, as fieldrl's own jobs use (runner.run_train_job): pytest runs one worker
# per core, and tests that call SB3 or torch directly would otherwise each start a thread per core
os.environ.setdefault("OMP_NUM_THREADS", "1")

#: name -> why it cannot run here, for every domain and backend whose extra is not installed
MISSING: dict[str, str] = {
    name: problem.advice for name in domain_names() if (problem := missing_extra(name)) is not None
}
if importlib.util.find_spec("ray") is None:
    MISSING["ray"] = "needs Ray: pip install 'fieldrl[ray]'"

#: words in a test's id that name what it needs besides the domain's own name
_ALIASES = {"traffic": ("sumo",)}
_NAMED = {
    name: re.compile(rf"(?<![a-z])({'|'.join((name, *_ALIASES.get(name, ())))})(?![a-z])") for name in MISSING
}


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "needs(name): skipped where that domain's or backend's extra is missing"
    )


collect_ignore_glob = [f"test_{name}_*.py" for name in MISSING]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        named = [name for name, pattern in _NAMED.items() if pattern.search(item.nodeid.lower())]
        named += [name for marker in item.iter_markers("needs") for name in marker.args if name in MISSING]
        if named:
            item.add_marker(pytest.mark.skip(reason=f"{named[0]} {MISSING[named[0]]}"))


TINY_SCENARIO: dict[str, Any] = {
    "name": "tiny",
    "domain": "chemo",
    "description": "test scenario",
    "params": {"preset": "s3", "max_t": 60},
    "policies": {
        "heuristics": [
            {"use": "none", "name": "no treatment"},
            {"use": "constant", "name": "constant 0.5", "settings": {"dose": 0.5}},
        ],
        "learned": [
            {
                "algorithm": "ppo",
                "name": "PPO",
                "train_steps": 256,
                "n_envs": 4,
                "hyperparameters": {"n_steps": 64, "batch_size": 64, "n_epochs": 2},
            }
        ],
    },
    "seeds": {"train": [0], "eval": {"start": 100, "count": 6}},
    "budgets": {"demo": {"train_steps": 256, "eval_seeds": 3}},
}


@pytest.fixture(autouse=True, scope="session")
def _sb3_logs_in_pytest_tmp(tmp_path_factory: pytest.TempPathFactory):
    """Tests that call SB3's ``learn()`` without a logger of their own make SB3 create a folder
    (``/tmp/SB3-<time>``) each time; ``SB3_LOGDIR`` puts them all in pytest's own temporary folder."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SB3_LOGDIR", str(tmp_path_factory.mktemp("sb3-logs")))
        yield


@pytest.fixture
def scenario_data() -> dict[str, Any]:
    return copy.deepcopy(TINY_SCENARIO)


@pytest.fixture
def write_scenario(tmp_path: Path):
    def write(data: dict[str, Any] | str, name: str = "scenario.yaml") -> Path:
        path = tmp_path / name
        path.write_text(data if isinstance(data, str) else yaml.safe_dump(data, sort_keys=False))
        return path

    return write


def shipped_untuned(ref: str) -> dict[str, Any]:
    """A built-in scenario's YAML data with each learned entry's tuned file written into the entry
    (hyperparameters, n_envs, params) and ``tuned`` dropped: the same configuration, as data that
    stands alone (a tuned file is found relative to its scenario file, which such data has none of)."""
    from fieldrl.scenario import scenario_text

    data = yaml.safe_load(scenario_text(ref)[1])
    folder = resources.files("fieldrl") / "scenarios" / ref.split("/")[0]
    for entry in data["policies"]["learned"]:
        rel = entry.pop("tuned", None)
        if rel is None:
            continue
        tuned = yaml.safe_load((folder / rel).read_text("utf-8"))
        entry["hyperparameters"] = {**entry.get("hyperparameters", {}), **tuned.get("hyperparameters", {})}
        entry["params"] = {**entry.get("params", {}), **tuned.get("params", {})}
        if tuned.get("n_envs") is not None:
            entry["n_envs"] = tuned["n_envs"]
    return data


def one_line_exit_2(args: list[str], *pieces: str) -> str:
    """Run the CLI in this process: it must end in one ``error:`` line holding ``pieces``, exit 2."""
    from typer.testing import CliRunner

    from fieldrl.cli import app

    result = CliRunner().invoke(app, args)
    message = result.output.strip()
    assert result.exit_code == 2, message
    assert message.startswith("error:") and "\n" not in message and "Traceback" not in message, message
    for piece in pieces:
        assert piece in message, message
    return message
