"""A study run in parts (``fieldrl run --part I/K``) and joined (``fieldrl merge``) is the study run at
once: the same results table, the same pairing of training seeds and held-out seeds, the same summary."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pandas as pd
import pytest
import yaml
from pypdf import PdfReader
from typer.testing import CliRunner

from fieldrl import api
from fieldrl.cli import app
from fieldrl.scenario import part_of

cli = CliRunner()


def _study(base: dict) -> dict:
    """Three training seeds of two policies in two settings, compared as a pair: small, but every
    table the memory study fills."""
    data = copy.deepcopy(base)
    data.pop("budgets", None)
    data["variants"] = {"s1": {"preset": "s1"}, "s5": {"preset": "s5"}}
    data["seeds"] = {"train": [0, 1, 2], "eval": {"start": 100, "count": 5}}
    ppo = data["policies"]["learned"][0]
    data["policies"]["learned"] = [
        ppo,
        {
            **ppo,
            "name": "PPO wide",
            "hyperparameters": {**ppo["hyperparameters"], "policy_kwargs": {"net_arch": [32]}},
        },
    ]
    data["report"] = {"comparisons": [{"policy": "PPO wide", "baseline": "PPO"}], "bootstrap_samples": 200}
    return data


@pytest.fixture(scope="module")
def study_file(tmp_path_factory) -> Path:
    from conftest import TINY_SCENARIO

    path = tmp_path_factory.mktemp("study") / "study.yaml"
    path.write_text(yaml.safe_dump(_study(TINY_SCENARIO), sort_keys=False))
    return path


@pytest.fixture(scope="module")
def at_once(study_file, tmp_path_factory) -> api.RunResult:
    return api.run(study_file, tmp_path_factory.mktemp("once") / "run", show_progress=False)


@pytest.fixture(scope="module")
def parts(study_file, tmp_path_factory) -> list[Path]:
    root = tmp_path_factory.mktemp("parts")
    folders = []
    for index in (1, 2):
        out = root / f"part-{index}"
        result = cli.invoke(
            app, ["run", str(study_file), "--out", str(out), "--part", f"{index}/2", "--quiet"]
        )
        assert result.exit_code == 0, result.output
        folders.append(out)
    return folders


@pytest.fixture(scope="module")
def merged(parts, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("merged") / "run"
    result = cli.invoke(app, ["merge", str(parts[0]), str(parts[1]), "--out", str(out), "--quiet"])
    assert result.exit_code == 0, result.output
    return out


def test_parts_are_consecutive_blocks_that_cover_the_seeds_once():
    seeds = list(range(10))
    assert part_of(seeds, 1, 2) == [0, 1, 2, 3, 4] and part_of(seeds, 2, 2) == [5, 6, 7, 8, 9]
    assert [part_of(seeds, i, 3) for i in (1, 2, 3)] == [[0, 1, 2, 3], [4, 5, 6], [7, 8, 9]]


def test_each_part_trains_only_its_seeds_on_the_same_held_out_patients(parts, at_once):
    trained = [
        sorted(pd.read_parquet(p / "results.parquet").query("policy == 'PPO'").train_seed.unique())
        for p in parts
    ]
    assert trained == [[0, 1], [2]]
    for p in parts:
        assert sorted(pd.read_parquet(p / "results.parquet").eval_seed.unique()) == list(range(100, 105))
    assert json.loads((parts[1] / "run.json").read_text())["part"] == {
        "index": 2,
        "of": 2,
        "train_seeds": [0, 1, 2],
    }


def test_the_merged_parts_equal_the_study_run_at_once(merged, at_once):
    joined = pd.read_parquet(merged / "results.parquet")
    pd.testing.assert_frame_equal(joined, at_once.results)
    once = json.loads((at_once.run_dir / "summary.json").read_text())
    both = json.loads((merged / "summary.json").read_text())
    assert both == once  # every mean, interval, pair, paired difference and training record
    assert sorted(both["validation"]["learned"]["s5"]["PPO wide"]) == ["0", "1", "2"]
    stability = both["variants"]["s1"]["pairs"][0]["stability"]
    assert len(stability["policy"]["per_seed"]) == 3 and stability["kpi"] == "return"
    page_one = PdfReader(merged / "report.pdf").pages[0].extract_text().replace("\n", " ")
    for setting in ("s1", "s5"):  # the scenario's question answered on page 1, once per setting
        assert f"{setting}: PPO wide " in page_one and "across training seeds" in page_one
    assert "merged_from" in json.loads((merged / "run.json").read_text())


def test_merge_refuses_what_is_not_every_part_of_one_study_and_leaves_nothing(parts, at_once, tmp_path):
    cases = [
        ([parts[0]], "two or more"),
        ([parts[0], parts[0]], "given twice"),
        ([parts[0], at_once.run_dir], "not a part of a study"),
    ]
    for folders, words in cases:
        out = tmp_path / "merged"
        result = cli.invoke(app, ["merge", *map(str, folders), "--out", str(out)])
        assert result.exit_code == 2 and words in result.output, result.output
        assert "Traceback" not in result.output and not out.exists()


@pytest.mark.parametrize("bad", ["3/2", "0/2", "1/4", "half", "1/"])
def test_a_bad_part_is_one_line_naming_it(study_file, tmp_path, bad):
    out = tmp_path / "run"
    result = cli.invoke(app, ["run", str(study_file), "--out", str(out), "--part", bad])
    assert result.exit_code == 2, result.output
    assert "--part" in result.output and repr(bad) in result.output.replace("\n", "")
    assert not out.exists()
