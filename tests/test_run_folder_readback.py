"""Files read back from a run folder have the shape fieldrl writes, or the command ends in one message.

The manifest's hash is no proof: whoever edits a run folder can rewrite the hash too. Each case
below edits one file *and* its manifest entry, as such a person would, and checks that `report`,
`compare` or `evaluate` stop with one line naming the file (exit 2, no traceback) instead of
failing deep inside a page, or, worse, drawing a report from a file fieldrl never wrote.
"""

from __future__ import annotations

import copy
import hashlib
import io
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

import fieldrl
from fieldrl.cli import app

cli = CliRunner()
MODEL = "models/default/PPO/seed-0/"


@pytest.fixture(scope="module")
def learned_run(tmp_path_factory) -> Path:
    """A tiny evaluated and reported run with one PPO model, validated during training (seconds)."""
    from conftest import TINY_SCENARIO

    data = copy.deepcopy(TINY_SCENARIO)
    data["seeds"]["eval"] = {"start": 100, "count": 3}
    data["seeds"]["validation"] = {"start": 500, "count": 2}
    data["policies"]["learned"][0]["validate_every"] = 128
    data["policies"]["learned"][0]["normalize_obs"] = True
    base = tmp_path_factory.mktemp("readback")
    (base / "s.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    return fieldrl.run(base / "s.yaml", out=base / "run", show_progress=False).run_dir


@pytest.fixture
def run_copy(learned_run: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(learned_run, tmp_path / "run"))


def _replace(run: Path, rel: str, edit: Callable[[bytes], bytes]) -> None:
    """Edit ``rel`` and rewrite its manifest entry to match, as someone editing the folder would."""
    data = edit((run / rel).read_bytes())
    (run / rel).write_bytes(data)
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["files"][rel] = {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
    (run / "manifest.json").write_text(json.dumps(manifest))


def _json(edit: Callable[[Any], Any]) -> Callable[[bytes], bytes]:
    return lambda raw: json.dumps(edit(json.loads(raw))).encode()


def _parquet(edit: Callable[[pd.DataFrame], pd.DataFrame]) -> Callable[[bytes], bytes]:
    return lambda raw: edit(pd.read_parquet(io.BytesIO(raw))).to_parquet(index=False)


def _one_line_exit_2(args: list[str], *pieces: str) -> None:
    result = cli.invoke(app, args)
    message = " ".join(result.output.split())
    assert result.exit_code == 2, result.output
    assert message.startswith("error:") and "Traceback" not in message, message
    for piece in pieces:
        assert piece in message, message


def _variant(summary: dict[str, Any]) -> dict[str, Any]:
    return summary["variants"]["default"]


def _set(path: list[Any], value: Any) -> Callable[[Any], Any]:
    def edit(data: Any) -> Any:
        target = data
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
        return data

    return edit


SUMMARY_EDITS = {
    "not a mapping": (lambda s: [], "Input should be a valid dictionary"),
    "variants a list": (_set(["variants"], []), "variants = []"),
    "a mean as text": (
        _set(["variants", "default", "policies", "PPO", "return", "mean", "value"], "high"),
        "variants.default.policies.PPO.return.mean.value = 'high'",
    ),
    "a count as text": (
        _set(["variants", "default", "policies", "PPO", "return", "n_eval_seeds"], "3"),
        "n_eval_seeds = '3'",
    ),
    "a policy the run never had": (
        lambda s: _set(["variants", "default", "policies", "evil"], _variant(s)["policies"]["PPO"])(s),
        "'evil' is not a policy of this run",
    ),
    "an unknown best policy": (_set(["variants", "default", "best_heuristic"], "nobody"), "'nobody'"),
    "a best policy without results": (
        lambda s: (_variant(s)["policies"].pop(_variant(s)["best_learned"]), s)[1],
        "'PPO' has no results in this setting",
    ),
    "a KPI removed": (lambda s: {**s, "kpis": s["kpis"][1:]}, "not chemo's KPIs"),
    "an unknown primary KPI": (_set(["primary_kpi"], "profit"), "primary_kpi = 'profit'"),
    "a setting removed": (_set(["variants"], {}), "this run's settings are ['default']"),
    "an unknown field": (_set(["verdict"], "learned wins"), "verdict: unknown field"),
    "a training record edited": (
        _set(["validation", "learned", "default", "PPO", "0", "gradient_updates"], -5),
        "gradient_updates = -5",
    ),
}


@pytest.mark.parametrize("case", list(SUMMARY_EDITS))
@pytest.mark.parametrize("command", ["report", "compare"])
def test_a_summary_of_another_shape_is_one_message(run_copy, case, command):
    edit, piece = SUMMARY_EDITS[case]
    _replace(run_copy, "summary.json", _json(edit))
    _one_line_exit_2([command, str(run_copy)], "summary.json", piece, "was the file edited?")


def test_a_summary_without_a_policy_in_a_setting_still_reports(run_copy):
    """A policy with no held-out value in a setting (all its episodes failed) is simply absent."""

    def drop_one(summary: dict[str, Any]) -> dict[str, Any]:
        entry = _variant(summary)
        other = next(p for p in ("no treatment", "constant 0.5") if p != entry["best_heuristic"])
        entry["policies"].pop(other)
        return summary

    _replace(run_copy, "summary.json", _json(drop_one))
    result = cli.invoke(app, ["report", str(run_copy)])
    assert result.exit_code == 0, result.output


def test_a_summary_written_before_the_optional_fields_existed_still_reports(run_copy):
    """Runs evaluated by earlier versions lack fields the pages read with a fallback; they still report."""

    def older(summary: dict[str, Any]) -> dict[str, Any]:
        for key in ("scenario", "domain", "budget", "selection_kpi", "oracles"):
            summary.pop(key)
        summary.pop("validation"), summary.pop("failed_episodes")
        for kpi in summary["kpis"]:
            for key in ("wall_clock", "among", "binary", "ranked"):
                kpi.pop(key)
        _variant(summary).pop("pairs")
        return summary

    _replace(run_copy, "summary.json", _json(older))
    result = cli.invoke(app, ["report", str(run_copy)])
    assert result.exit_code == 0, result.output
    assert cli.invoke(app, ["compare", str(run_copy)]).exit_code == 0


@pytest.mark.parametrize(
    ("rel", "edit", "piece"),
    [
        ("results.parquet", _parquet(lambda f: pd.DataFrame({"a": [1]})), "columns ['a']"),
        ("results.parquet", _parquet(lambda f: f.assign(value="x")), "column 'value' is object, not float"),
        ("results.parquet", _parquet(lambda f: f.assign(policy="evil")), "policy = 'evil': not in this run"),
        ("results.parquet", _parquet(lambda f: f.assign(metric=1.0)), "column 'metric' is not text"),
        ("traces.parquet", _parquet(lambda f: f.drop(columns=["variant"])), "column 'variant' is missing"),
        ("traces.parquet", _parquet(lambda f: f.assign(train_seed="x")), "column 'train_seed' is object"),
        ("traces.parquet", _parquet(lambda f: f.drop(columns=["tumour"])), "chemo pages could not be drawn"),
        ("run.json", _json(_set(["budget"], 5)), "budget = 5"),
        ("run.json", _json(_set(["budget"], "huge")), "budget = 'huge': allowed: demo, medium, full"),
        ("versions.json", _json(lambda v: [1, 2]), "not the package -> version mapping"),
        (MODEL + "learning_curve.csv", lambda raw: b"a,b\n1,2\n", "columns ['a', 'b']"),
        (MODEL + "validation_curve.csv", lambda raw: raw.replace(b"\n0,", b"\nzero,", 1), "not numbers"),
    ],
    ids=lambda x: x if isinstance(x, str) else "",
)
def test_a_run_file_of_another_shape_is_one_message_from_report(run_copy, rel, edit, piece):
    _replace(run_copy, rel, edit)
    _one_line_exit_2(["report", str(run_copy)], rel.rsplit("/", 1)[-1], piece)
    assert not (run_copy / "report.pdf.tmp").exists()


@pytest.mark.parametrize(
    ("norm", "piece"),
    [
        ([1, 2], "not the observation statistics fieldrl writes"),
        ({"mean": [0.0], "var": [1.0], "clip_obs": 10.0, "epsilon": 1e-8}, "mean = [0.0]"),
        ({"mean": [0.0] * 3, "var": [-1.0] * 3, "clip_obs": 10.0, "epsilon": 1e-8}, "var = [-1.0, -1.0"),
        ({"mean": [0.0] * 3, "var": [1.0] * 3, "clip_obs": "x", "epsilon": 1e-8}, "clip_obs = 'x'"),
    ],
)
def test_observation_statistics_of_another_shape_are_refused_before_any_episode(run_copy, norm, piece):
    """Before: a list here played every held-out episode into a TypeError, reported as simulator errors."""
    _replace(run_copy, MODEL + "obs_normalization.json", lambda raw: json.dumps(norm).encode())
    for name in ("results.parquet", "summary.json", "traces.parquet", "report.pdf"):
        (run_copy / name).unlink()
    _one_line_exit_2(["evaluate", str(run_copy), "--quiet"], "obs_normalization.json", piece)
    assert not (run_copy / "results.parquet").exists()
