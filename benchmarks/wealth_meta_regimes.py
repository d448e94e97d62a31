"""Wealth meta-RL across capital-market regimes (issue 40; the seed paper's robustness claim).

The seed result: MetaRL reaches 97.8 % of the DP optimum on held-out problems and is "remarkably
robust to capital market regime changes, even when training uses only one capital market regime".
This plays `wealth/meta`'s meta-PPO, trained on the default market only, on the run's 60 held-out
problems (20 market paths each) in its own market and in shifted ones (the domain's stress axes:
every frontier mean shifted by -3, -1.5, +2 percentage points; every volatility scaled by 0.5 and 2),
each scored as a share of the DP optimum of *that* regime (``pct_of_dp``: the episode's goal utility
over the optimum's expected utility for the same problem in the same market), next to two standard
rules. It is the same evaluation ``fieldrl stress`` runs (``runner.run_eval_job`` with the stress
axis), called per policy so that it also works on a run folder whose other learned entry has not
finished training. Nothing is trained; the weights load as tensors, checked against the manifest.

Run: ``python benchmarks/wealth_meta_regimes.py RUN_DIR``. Writes
``benchmarks/results/wealth_meta_regimes.json``.
"""

from __future__ import annotations

import datetime as dt
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from _common import machine_info, write_result

from fieldrl.api import open_run
from fieldrl.evaluation import runner

RESULT = Path(__file__).parent / "results" / "wealth_meta_regimes.json"
POLICIES = (
    ("meta-PPO", 0),
    ("greedy balanced", runner.HEURISTIC_TRAIN_SEED),
    ("glide path", runner.HEURISTIC_TRAIN_SEED),
)
REGIMES = ((None, None), ("mean_shift", -3.0), ("mean_shift", -1.5), ("mean_shift", 2.0))
REGIMES += (("vol_scale", 0.5), ("vol_scale", 2.0))
PAPER = 97.8
BOOTSTRAP = 2000


class _Quiet:
    def put(self, item: Any) -> None:
        pass


def _ci(values: np.ndarray, cases: np.ndarray, rng: np.random.Generator) -> tuple[float, float]:
    """95 % bootstrap interval of the mean, resampling held-out problems (their episodes together)."""
    ids = np.unique(cases)
    by_case = [values[cases == c] for c in ids]
    means = []
    for _ in range(BOOTSTRAP):
        pick = rng.integers(0, len(ids), len(ids))
        means.append(np.mean(np.concatenate([by_case[i] for i in pick])))
    low, high = np.percentile(means, [2.5, 97.5])
    return float(low), float(high)


def main(run_dir: str) -> None:
    folder, scenario, _ = open_run(run_dir)
    data = scenario.model_dump(mode="json")
    hashes = folder.hashes()
    rng = np.random.default_rng(0)
    rows = []
    for axis, point in REGIMES:
        for policy, seed in POLICIES:
            job = runner.EvalJob("default", policy, seed, axis, point)
            started = time.perf_counter()
            results, _, failures, _ = runner.run_eval_job(
                data, str(folder.path), job, hashes, False, _Quiet()
            )
            pct = results[results["metric"] == "pct_of_dp"]
            values, cases = pct["value"].to_numpy(float), pct["eval_seed"].to_numpy()
            low, high = _ci(values, cases, rng)
            where = "default market" if axis is None else f"{axis} {point:g}"
            rows.append(
                {
                    "regime": where,
                    "axis": axis,
                    "point": point,
                    "policy": policy,
                    "pct_of_dp": float(np.mean(values)),
                    "ci95": [low, high],
                    "episodes": int(len(values)),
                    "problems": int(len(np.unique(cases))),
                    "failed_episodes": len(failures),
                    "seconds": round(time.perf_counter() - started, 1),
                }
            )
            print(
                f"{where:18} {policy:16} {np.mean(values):6.2f} % of DP [{low:.2f}, {high:.2f}]", flush=True
            )
    learned = [r for r in rows if r["policy"] == "meta-PPO"]
    result = {
        "benchmark": "wealth/meta: meta-PPO trained on the default market, tested in other market regimes",
        "date": dt.date.today().isoformat(),
        "machine": machine_info(),
        "run": str(folder.path),
        "paper_pct_of_dp": PAPER,
        "rows": rows,
        "headline": [
            {
                "label": f"meta-PPO % of DP optimum ({r['regime']})",
                "value": round(r["pct_of_dp"], 2),
                "unit": "%",
            }
            for r in learned
        ],
    }
    print(f"wrote {write_result(RESULT, result)}")


if __name__ == "__main__":
    main(sys.argv[1])
