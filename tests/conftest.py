"""Shared fixtures: a small valid chemo scenario that tests mutate."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

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
