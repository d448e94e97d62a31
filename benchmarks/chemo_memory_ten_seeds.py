"""Issue 44: the memory claim at ten seeds, read from an evaluated `chemo/memory-ten-seeds` run folder
(one run, or the `fieldrl merge` of its parts).

Usage: python benchmarks/chemo_memory_ten_seeds.py RUN_DIR

Writes benchmarks/results/chemo_memory_ten_seeds.json: per setting (s1, s5) and pair (LSTM-TD3 vs TD3,
RecurrentPPO vs PPO):
- the paired difference recurrent − feed-forward on every KPI (return and the clinical measures:
  final tumour burden, normal-cell nadir, survival, drug given), with its 95 % CI over training seeds
  and held-out patients (the run's own summary: `summary.json`, pairs);
- the stability the claim speaks of: each side's spread across its ten training seeds (standard
  deviation of the seeds' means and the worst seed, with bootstrap CIs) and the difference of the two;
- each side against tumour feedback (the best rule), paired on the same patients, on every KPI.
Everything is computed with fieldrl's own statistics (`fieldrl.evaluation.stats`), as the report is.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from fieldrl.api import open_run, summary_of
from fieldrl.domains import get_domain
from fieldrl.evaluation.stats import Bootstrap, describe, paired_difference, spread_difference, value_matrix

OUT = Path(__file__).parent / "results" / "chemo_memory_ten_seeds.json"
RULE = "tumour feedback"


def main(run_dir: str) -> None:
    folder, scenario, meta = open_run(run_dir)
    domain = get_domain(scenario.domain)
    summary = summary_of(run_dir)
    results = folder.read_parquet("results.parquet")
    eval_seeds = list(scenario.seeds.eval)
    options = scenario.report
    out: dict = {
        "run": str(Path(run_dir).resolve()),
        "budget": meta["budget"],
        "merged_from": meta.get("merged_from"),
        "training_seeds": list(scenario.seeds.train),
        "held_out_patients": len(eval_seeds),
        "confidence": options.confidence,
        "bootstrap_samples": options.bootstrap_samples,
        "settings": {},
    }
    for variant, entry in summary.variants.items():
        boot = Bootstrap(len(eval_seeds), options.bootstrap_samples, seed=0)
        rows = results[results["variant"] == variant]

        def matrix(policy: str, kpi: str, rows=rows):
            picked = rows[(rows["policy"] == policy) & (rows["metric"] == kpi)]
            return value_matrix(picked, eval_seeds)

        setting: dict = {"policies": {}, "pairs": []}
        for policy in entry.policies:
            setting["policies"][policy] = {
                k.name: describe(matrix(policy, k.name), boot, options.confidence)["mean"]
                for k in domain.kpis
            }
        for pair in entry.pairs:
            against_rule = {
                side: {
                    k.name: paired_difference(
                        matrix(name, k.name), matrix(RULE, k.name), boot, options.confidence
                    )["difference"]
                    for k in domain.kpis
                }
                for side, name in (("policy", pair.policy), ("baseline", pair.baseline))
            }
            setting["pairs"].append(
                {
                    "recurrent": pair.policy,
                    "feed_forward": pair.baseline,
                    "difference": {k: v.difference.as_dict() for k, v in pair.kpis.items()},
                    # computed here from the results (as summarize does), so a summary written before
                    # fieldrl kept the spread is read the same way
                    "stability": spread_difference(
                        matrix(pair.policy, "return"),
                        matrix(pair.baseline, "return"),
                        boot,
                        options.confidence,
                        higher_is_better=True,
                    ),
                    "recurrent_minus_rule": against_rule["policy"],
                    "feed_forward_minus_rule": against_rule["baseline"],
                }
            )
        out["settings"][variant] = setting
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(out, indent=2) + "\n")
    for variant, setting in out["settings"].items():
        for pair in setting["pairs"]:
            d, st = pair["difference"]["return"], pair["stability"]
            line = f"{variant}: {pair['recurrent']} - {pair['feed_forward']}: "
            line += f"{d['value']:+.1f} [{d['low']:+.1f}, {d['high']:+.1f}]"
            if st:
                sd = st["sd_difference"]
                line += (
                    f"; SD {st['policy']['sd']['value']:.1f} vs {st['baseline']['sd']['value']:.1f}"
                    f" (diff [{sd['low']:+.1f}, {sd['high']:+.1f}]);"
                    f" worst {st['policy']['worst']['value']:.1f} vs {st['baseline']['worst']['value']:.1f}"
                )
            print(line)
    print(f"written: {OUT}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python benchmarks/chemo_memory_ten_seeds.py RUN_DIR")
    main(sys.argv[1])
