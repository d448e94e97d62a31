"""Same scenario + same seeds -> identical results.parquet, for every domain.

Each domain's quick scenario runs twice at its demo budget (training included), cut to its
first variant, its first learned policy (one training seed, its quick steps) and two held-out
seeds. Metrics that are computation times measured on this machine
(``Domain.wall_clock_metrics``) are the only values allowed to differ; everything else must match
bit for bit. Controllers that stop planning at a wall-clock limit (the taxiway CBS baseline, an
anytime planner as deployed) are left out: a slow moment changes their plans, and without the
limit CBS can search for hours. Every other heuristic and every learned policy is checked.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import pandas as pd
import pytest
import yaml

from fieldrl import api
from fieldrl.domains import domain_names, get_domain
from fieldrl.scenario import builtin_scenarios, scenario_text


def _quick_scenario(domain: str) -> str:
    names = [name for name in builtin_scenarios() if name.split("/")[0] == domain]
    return next((name for name in names if name.endswith("/quick")), names[0])


#: domain -> demo train_steps where the demo budget's are sized for an entry this test cuts
SMALLER_DEMO_STEPS = {"traffic": 2048}


def _small_copy(name: str, tmp_path: Path) -> Path:
    domain = name.split("/")[0]
    data = yaml.safe_load(scenario_text(name)[1])
    if data.get("variants"):
        first = next(iter(data["variants"]))
        data["variants"] = {first: data["variants"][first]}
    quick = data.setdefault("budgets", {}).setdefault("demo", {})
    quick["eval_seeds"] = min(2, quick.get("eval_seeds") or 2)
    quick["train_seeds"] = 1
    # the demo budget's own train_steps: about one rollout, the least a learner can honestly train
    # (traffic's is sized for its DQN, cut here: its first learned entry, PPO, rolls out 256 steps)
    if domain in SMALLER_DEMO_STEPS:
        quick["train_steps"] = SMALLER_DEMO_STEPS[domain]
    data["policies"]["learned"] = data["policies"].get("learned", [])[:1]
    data.get("report", {}).pop("comparisons", None)  # they may name the learned policies cut here
    data["policies"]["heuristics"] = [
        entry
        for entry in data["policies"].get("heuristics", [])
        if "time_limit_s" not in entry.get("settings", {})
    ]
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(data), "utf-8")
    tuned = resources.files("fieldrl") / "scenarios" / domain / "tuned"
    if tuned.is_dir():  # the `tuned:` files the entries name, relative to the scenario
        (tmp_path / "tuned").mkdir()
        for file in tuned.iterdir():
            (tmp_path / "tuned" / file.name).write_bytes(file.read_bytes())
    return path


def _deterministic_part(results: pd.DataFrame, domain: str) -> pd.DataFrame:
    timed = get_domain(domain).wall_clock_metrics()
    return results[~results["metric"].isin(timed)].reset_index(drop=True)


@pytest.mark.parametrize("domain", domain_names())
def test_same_scenario_same_results(domain: str, tmp_path: Path) -> None:
    scenario = _small_copy(_quick_scenario(domain), tmp_path)
    first = api.train(scenario, out=tmp_path / "a", budget="demo", show_progress=False)
    second = api.train(scenario, out=tmp_path / "b", budget="demo", show_progress=False)
    a = api.evaluate(first, show_progress=False)
    b = api.evaluate(second, show_progress=False)
    assert len(a) > 0 and a["policy"].nunique() >= 2
    pd.testing.assert_frame_equal(_deterministic_part(a, domain), _deterministic_part(b, domain))
    on_disk = pd.read_parquet(first / "results.parquet")
    pd.testing.assert_frame_equal(on_disk, a)
