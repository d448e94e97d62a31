"""Side-by-side replays (``fieldrl replay``): two policies on the same held-out case, one frame per sampled
step, a storyboard in the report, and one line (exit 2) for a bad seed, policy or setting."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import imageio.v3 as iio
import pandas as pd
import pytest
import yaml
from conftest import one_line_exit_2, shipped_untuned
from pypdf import PdfReader
from typer.testing import CliRunner

from fieldrl import api
from fieldrl.cli import app
from fieldrl.domains import get_domain
from fieldrl.evaluation import replay
from fieldrl.evaluation.runner import episode_seed
from fieldrl.evaluation.store import RunFolder
from fieldrl.reports.replay import HEADING

# ----------------------------------------------------------------------------- each domain's frames

#: (domain, params, two heuristics with their settings, frames at most)
CASES = [
    ("chemo", {"preset": "s1", "max_t": 60}, [("tumour-feedback", {}), ("constant", {"dose": 0.3})], 20),
    ("memory", {"delay": 5}, [("constant", {"action": 1.0}), ("random", {"seed": 3})], replay.MAX_FRAMES),
    ("wealth", {}, [("glide-path", {}), ("greedy-goals", {"portfolio": 2})], replay.MAX_FRAMES),
]


@pytest.mark.parametrize(("name", "raw", "uses", "max_frames"), CASES, ids=[c[0] for c in CASES])
def test_each_domain_replay_draws_one_frame_per_sampled_step(name, raw, uses, max_frames, tmp_path):
    domain = get_domain(name)
    params = domain.params_model.model_validate(raw)
    histories, sides = [], []
    for use, settings in uses:
        spec = domain.heuristics[use]
        policy = spec.build(spec.settings_model.model_validate(settings), params, use)
        histories.append(replay.play_episode(domain, params, policy, episode_seed(7, 0), 7))
        sides.append(replay.Side(use, "heuristic", -1, ""))
    for history in histories:  # a snapshot after the reset and after every step, numbered
        assert [h["step"] for h in history] == list(range(len(history)))
        assert history[0]["action"] is None and history[-1]["action"] is not None
    drawn = replay.render(domain, sides, histories, "held-out seed 7", max_frames=max_frames)
    longest = max(len(h) for h in histories)
    assert len(drawn.steps) == min(longest, max_frames)
    assert drawn.steps[0] == 0 and drawn.steps[-1] == longest - 1
    assert len(drawn.frames) == len(drawn.steps) == len(drawn.divergences)
    gif = tmp_path / "replay.gif"
    gif.write_bytes(drawn.gif)
    assert iio.imread(gif, index=None).shape[0] == len(drawn.steps)
    assert 1 <= len(drawn.storyboard) <= replay.STORYBOARD_MAX and set(drawn.storyboard) <= set(drawn.steps)
    assert len(drawn.storyboard) >= min(replay.STORYBOARD_MIN, len(drawn.steps))
    assert set(drawn.stills) == set(drawn.storyboard)
    assert all(png.startswith(b"\x89PNG") for png in drawn.stills.values())
    assert drawn.mp4 is not None or "ffmpeg" in str(drawn.mp4_note)


def test_sampling_keeps_first_and_last_and_the_storyboard_is_spread_where_the_episodes_part():
    steps = replay.sample_steps(601)
    assert len(steps) == replay.MAX_FRAMES and steps[0] == 0 and steps[-1] == 600
    assert replay.sample_steps(50) == list(range(50))
    growing = [0.0, 0.0, 0.0, *range(1, 118)]  # a gap that opens at frame 3 and keeps growing
    board = replay.storyboard_positions(growing)
    assert 3 in board and 119 in board and len(board) == replay.STORYBOARD_MAX
    assert min(b - a for a, b in zip(board, board[1:], strict=False)) > 1  # spread, not neighbours
    assert len(replay.storyboard_positions([0.0] * 40)) == replay.STORYBOARD_MAX  # never parted: even


# ----------------------------------------------------------------------------- a run folder


def _scenario() -> dict[str, Any]:
    """The built-in chemo/quick, shrunk to seconds: 60-step episodes, PPO alone on a few hundred steps,
    no validation seeds and no stress section; its demo budget keeps 4 held-out patients."""
    data = shipped_untuned("chemo/quick")
    data["params"]["max_t"] = 60
    data["policies"]["learned"] = [
        {
            "algorithm": "ppo",
            "name": "PPO",
            "train_steps": 256,
            "n_envs": 4,
            "hyperparameters": {"n_steps": 64, "batch_size": 64, "n_epochs": 2},
        }
    ]
    data["seeds"].pop("validation")
    data["budgets"]["demo"] = {"eval_seeds": 4}
    data.pop("stress")
    return data


@pytest.fixture(scope="module")
def replayed_run(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("replayed")
    (base / "s.yaml").write_text(yaml.safe_dump(_scenario(), sort_keys=False))
    return api.run(base / "s.yaml", out=base / "run", budget="demo", show_progress=False).run_dir


@pytest.fixture
def run_copy(replayed_run: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(replayed_run, tmp_path / "run"))


def _pdf_text(path: Path) -> str:
    return " ".join(" ".join((page.extract_text() or "").split()) for page in PdfReader(path).pages)


def test_run_replays_the_best_standard_and_learned_policy_and_reports_the_storyboard(replayed_run):
    folder = RunFolder(replayed_run)
    (record,) = replay.read_replays(folder)
    summary = json.loads((replayed_run / "summary.json").read_text())["variants"]["default"]
    assert [s.policy for s in record.sides] == [summary["best_heuristic"], summary["best_learned"]]
    assert record.seed == 1000 and record.env_seed == episode_seed(1000, 0)
    recorded = folder.hashes()
    assert all(rel in recorded for rel in record.files()) and f"{record.folder}/replay.json" in recorded
    assert replay.STORYBOARD_MIN <= len(record.storyboard) <= replay.STORYBOARD_MAX
    text = _pdf_text(replayed_run / "report.pdf")
    assert HEADING in text and f"Held-out seed {record.seed}" in text
    assert f"Step {record.storyboard[0].step}: return so far" in text
    # the replay is the held-out episode evaluation played: the same return
    results = pd.read_parquet(replayed_run / "results.parquet")
    for side in record.sides:
        row = results[
            (results["policy"] == side.policy)
            & (results["eval_seed"] == record.seed)
            & (results["metric"] == "return")
        ]
        assert side.episode_return == pytest.approx(float(row["value"].iloc[0]), rel=1e-6, abs=1e-9)


def test_the_replay_command_writes_gif_and_storyboard_and_unpickles_nothing(run_copy, monkeypatch):
    import pickle

    import torch

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a replay unpickled something")

    for module, name in ((pickle, "load"), (pickle, "loads"), (torch, "load")):
        monkeypatch.setattr(module, name, refuse)
    args = ["replay", str(run_copy), "--seed", "1002", "--policies", "PPO,maximum dose", "--quiet"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    where = run_copy / "replay" / "default" / "seed-1002"
    flat = " ".join(result.output.split())
    assert f"GIF: {where / 'replay.gif'}" in flat and "Report:" in flat
    records = replay.read_replays(RunFolder(run_copy))
    assert [r.seed for r in records] == [1000, 1002]  # the run's own replay, then this one
    latest = records[-1]
    assert [s.policy for s in latest.sides] == ["PPO", "maximum dose"]
    assert all(
        rel in RunFolder(run_copy).hashes() for rel in [*latest.files(), f"{latest.folder}/replay.json"]
    )
    assert iio.imread(where / "replay.gif", index=None).shape[0] == len(latest.sampled_steps)
    assert len(list(where.glob("storyboard-step-*.png"))) == len(latest.storyboard)
    text = _pdf_text(run_copy / "report.pdf")
    assert "Held-out seed 1002: on the left the learned policy PPO; on the right the standard" in text


def test_a_new_evaluation_drops_the_replays_and_the_report_says_how_to_make_one(run_copy):
    api.evaluate(run_copy, show_progress=False)
    folder = RunFolder(run_copy)
    assert not any(rel.startswith("replay/") for rel in folder.hashes())
    assert not (run_copy / "replay").exists()
    text = _pdf_text(api.report(run_copy))
    assert "No replay was recorded for this run" in text and "fieldrl replay RUN_DIR" in text


@pytest.mark.parametrize(
    ("extra", "pieces"),
    [
        (["--seed", "7"], ["--seed = 7", "not a held-out seed", "1000, 1001, 1002, 1003"]),
        (["--policies", "PPO,SAC"], ["--policies = 'PPO,SAC'", "'SAC'", "allowed: no treatment"]),
        (["--policies", "PPO"], ["--policies = 'PPO'", "two different policies"]),
        (["--policies", "PPO,PPO"], ["--policies = 'PPO,PPO'", "two different policies"]),
        (["--variant", "s9"], ["--variant = 's9'", "settings of this run: default"]),
    ],
    ids=["seed", "unknown-policy", "one-policy", "same-policy", "variant"],
)
def test_a_bad_seed_policy_or_setting_is_one_line_and_writes_nothing(replayed_run, extra, pieces):
    manifest = (replayed_run / "manifest.json").read_bytes()
    files = sorted(p for p in replayed_run.rglob("*") if p.name != ".fieldrl.lock")
    one_line_exit_2(["replay", str(replayed_run), *extra, "--quiet"], *pieces)
    assert (replayed_run / "manifest.json").read_bytes() == manifest
    assert sorted(p for p in replayed_run.rglob("*") if p.name != ".fieldrl.lock") == files


def test_a_replay_folder_that_leads_outside_the_run_is_refused(run_copy, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    shutil.rmtree(run_copy / "replay")
    (run_copy / "replay").symlink_to(outside)
    one_line_exit_2(["replay", str(run_copy), "--quiet"], "outside the run folder")
    assert not any(outside.iterdir())


def test_episodes_with_a_clock_are_shown_at_the_same_time_not_the_same_step():
    """A policy deciding every 10 s beside one deciding every 5 s: each moment shows both at one time."""
    slow = [{"step": k, "clock": 10 * k, "return": 0.0} for k in range(4)]  # 0, 10, 20, 30 s
    fast = [{"step": k, "clock": 5 * k, "return": 0.0} for k in range(7)]  # 0, 5, ..., 30 s
    moments, times = replay.timeline([slow, fast])
    assert times == [0, 5, 10, 15, 20, 25, 30]
    assert moments == [(0, 0), (0, 1), (1, 2), (1, 3), (2, 4), (2, 5), (3, 6)]
    for (a, b), t in zip(moments, times, strict=True):
        assert slow[a]["clock"] <= t and fast[b]["clock"] == t  # the latest snapshot at or before t
    no_clock = [{"step": k, "return": 0.0} for k in range(3)]
    moments, times = replay.timeline([no_clock, fast])
    assert times is None and moments[-1] == (2, 6) and len(moments) == 7  # by step: the ended one holds
