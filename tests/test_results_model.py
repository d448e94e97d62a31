"""The typed results model (:mod:`fieldrl.results`): ``summary.json`` written and read back unchanged,
older files still read, the lookups every page uses, and no report, terminal or API module walking the
summary by string key again."""

from __future__ import annotations

import ast
import json
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fieldrl.domains import get_domain
from fieldrl.errors import FieldrlError
from fieldrl.evaluation.readback import read_summary
from fieldrl.evaluation.store import RunFolder
from fieldrl.evaluation.summary import summarize
from fieldrl.results import NO_RESULTS, Interval
from fieldrl.scenario import load_scenario

SRC = Path(__file__).resolve().parents[1] / "src" / "fieldrl"


@pytest.fixture(scope="module")
def study():
    """chemo/memory-ten-seeds at its demo budget (two settings, two training seeds, two requested
    comparisons with their stability), and a made-up results table for it: no training, no simulator."""
    scenario = load_scenario("chemo/memory-ten-seeds").with_budget("demo")
    domain = get_domain("chemo")
    rng = np.random.default_rng(0)
    rows = []
    for variant in scenario.variant_names:
        for name, kind in scenario.policies.by_kind:
            seeds = [-1] if kind == "heuristic" else list(scenario.seeds.train)
            for train_seed in seeds:
                for eval_seed in scenario.seeds.eval:
                    for kpi in domain.kpis:
                        value = float(rng.normal(100, 10))
                        rows.append((variant, name, kind, train_seed, eval_seed, 0, kpi.name, value))
    columns = ["variant", "policy", "kind", "train_seed", "eval_seed", "episode", "metric", "value"]
    results = pd.DataFrame(rows, columns=columns)
    failures = [
        {
            "variant": "s5",
            "policy": "TD3",
            "train_seed": 0,
            "eval_seed": 20000,
            "episode": 0,
            "reason": "boom",
        }
    ]
    record = {"algorithm": "td3", "num_timesteps": 4096, "gradient_updates": 4000}
    validation = {
        "heuristics": {"s1": {"constant 0.5": 12.5, "tumour feedback": float("nan")}},
        "learned": {"s1": {"TD3": {"0": record, "1": {**record, "gradient_updates": 0}}}},
    }
    summary = summarize(results, scenario, domain, "demo", failures=failures, validation=validation)
    return scenario, domain, summary


def _written(tmp_path: Path, data: dict) -> RunFolder:
    folder = RunFolder(tmp_path)
    folder.write_json("summary.json", data)
    return folder


def test_summarize_then_write_then_read_gives_the_same_summary(study, tmp_path):
    scenario, domain, summary = study
    data = summary.model_dump(exclude_unset=True)
    text = json.dumps(data, indent=2)
    read = read_summary(_written(tmp_path, json.loads(text)), scenario, domain)
    assert json.dumps(read.model_dump(exclude_unset=True), indent=2) == text  # the very file, key by key
    assert read.model_dump_json() == summary.model_dump_json()  # NaN-safe equality of every field
    # the shape fieldrl has always written: absent where there is no comparison, null where no best
    entry = data["variants"]["s1"]
    assert list(data) == [
        "scenario", "domain", "budget", "confidence", "bootstrap_samples", "primary_kpi", "selection_kpi",
        "kpis", "policies", "oracles", "variants", "failed_episodes", "validation",
    ]  # fmt: skip
    assert list(entry) == [
        "policies",
        "best_heuristic",
        "best_learned",
        "comparison",
        "probability_better",
        "pairs",
    ]
    assert list(entry["pairs"][0]) == ["policy", "baseline", "kpis", "stability"]
    assert list(entry["policies"]["TD3"]["return"]) == ["mean", "iqm", "n_train_seeds", "n_eval_seeds"]
    assert list(data["validation"]["learned"]["s1"]["TD3"]["0"]) == list(
        {"algorithm": 0, "num_timesteps": 0, "gradient_updates": 0}
    )  # a training record as its weights file holds it (unset fields left out)


def test_a_summary_written_before_the_optional_fields_reads(study, tmp_path):
    scenario, domain, summary = study
    data = summary.model_dump(exclude_unset=True)
    for key in ("selection_kpi", "oracles", "validation", "failed_episodes"):
        del data[key]
    for kpi in data["kpis"]:
        for key in ("wall_clock", "among", "binary", "ranked"):
            del kpi[key]
    for entry in data["variants"].values():
        for pair in entry["pairs"]:
            del pair["stability"]
        for stats in entry["policies"]["TD3"].values():
            del stats["n_train_seeds"], stats["n_eval_seeds"]
    read = read_summary(_written(tmp_path, data), scenario, domain)
    assert read.selection == read.primary and read.oracles == [] and read.failed_episodes == []
    assert read.training_records("s1", "TD3") == [] and read.heuristic_validation("s1") == {}
    assert all(p.stability is None for p in read.variant("s1").pairs)
    assert read.variant("s1").cases("TD3") == 0  # an older file's count of cases: none recorded
    for kpi in read.kpis:  # what the file does not say of a KPI, the domain does
        spec = domain.kpi(kpi.name)
        assert (kpi.binary, kpi.ranked) == (spec.binary, spec.ranked and not spec.wall_clock)
    assert "oracles" not in read.model_fields_set  # the report re-summarises such a run (pdf.py)


def test_an_interval_on_disk_may_hold_null_or_leave_its_range_out():
    blank = Interval.model_validate({"value": 1.5})
    assert blank.value == 1.5 and math.isnan(blank.low) and not blank.has_range
    nulls = Interval.model_validate({"value": None, "low": None, "high": None})
    assert all(math.isnan(x) for x in (nulls.value, nulls.low, nulls.high))
    ranged = Interval(value=1.0, low=0.5, high=1.5)
    assert ranged.has_range and ranged.overlaps(Interval(value=2.0, low=1.4, high=3.0))
    assert not ranged.overlaps(Interval(value=2.0, low=1.6, high=3.0))
    assert not ranged.blanked().has_range and ranged.blanked().value == 1.0
    with pytest.raises(ValueError):
        Interval.model_validate({"value": "1.5"})  # strict: a number is a number


def test_a_summary_of_another_shape_is_still_one_message(study, tmp_path):
    scenario, domain, summary = study
    data = summary.model_dump(exclude_unset=True)
    data["variants"]["s1"]["policies"]["TD3"]["return"]["mean"]["value"] = "high"
    with pytest.raises(FieldrlError) as caught:
        read_summary(_written(tmp_path, data), scenario, domain)
    assert "variants.s1.policies.TD3.return.mean.value" in str(caught.value)
    assert "\n" not in str(caught.value)


def test_the_lookups_every_page_uses(study):
    _, domain, summary = study
    assert summary.primary.name == "return" and summary.primary is summary.kpi("return")
    assert summary.selection.name == "return"
    with pytest.raises(KeyError, match="'nope' is not a KPI of this run"):
        summary.kpi("nope")
    s1 = summary.variant("s1")
    found = s1.stat("TD3", "return")
    assert isinstance(found, Interval) and found is s1.policies["TD3"]["return"].mean
    assert s1.stat("TD3", "return", "iqm") is s1.policies["TD3"]["return"].iqm
    assert summary.stat("s1", "TD3", "return") is found
    assert s1.stat("no such policy", "return") is None and math.isnan(s1.value("no such policy", "return"))
    assert s1.stat("TD3", "no such kpi") is None
    assert summary.variant("no such setting") is NO_RESULTS and NO_RESULTS.best_learned is None
    assert s1.cases("TD3", "constant 0.5") == 5 and s1.cases("TD3", "no such policy") == 0
    means = {p: s1.value(p, "return") for p in s1.evaluated}
    assert summary.best("s1", "return") == max(means, key=means.__getitem__)
    learned = [p.name for p in summary.policies if p.kind == "learned"]
    assert s1.best(summary.primary, among=learned) == s1.best_learned  # what summarize picked
    assert s1.pair("LSTM-TD3", "TD3") is s1.pairs[0] and s1.pair("TD3", "LSTM-TD3") is None
    assert s1.pairs[0].stability is not None and s1.pairs[0].stability.kpi == "return"
    assert [k.name for k in summary.measured_kpis("s1")] == [k.name for k in domain.kpis]
    assert summary.kind("TD3") == "learned" and summary.kind("nobody") is None
    assert [r.gradient_updates for r in summary.training_records("s1", "TD3")] == [4000, 0]
    assert summary.training_records("s5", "TD3") == []
    assert summary.heuristic_validation("s1")["constant 0.5"] == 12.5
    assert [f.policy for f in summary.failures_in("s5")] == ["TD3"] and summary.failures_in("s1") == []
    assert summary.failures_in("s5", "TD3") == summary.failures_in("s5")
    assert summary.failures_in("s5", "PPO") == []
    assert summary.failed_episodes[0].cause == "simulator"


def test_blanking_a_setting_keeps_its_means_and_blanks_its_intervals(study):
    _, _, summary = study
    blanked = summary.blanked(["s5"])
    s5, before = blanked.variant("s5"), summary.variant("s5")
    assert s5.stat("TD3", "return").value == before.stat("TD3", "return").value
    assert not s5.stat("TD3", "return").has_range and not s5.stat("TD3", "return", "iqm").has_range
    assert not s5.probability_better.has_range
    assert not any(p.difference.has_range for p in s5.comparison.values())
    assert not any(p.difference.has_range for pair in s5.pairs for p in pair.kpis.values())
    assert blanked.variant("s1") is summary.variant("s1")  # the other setting untouched
    assert summary.variant("s5").stat("TD3", "return").has_range  # and the original too


def test_a_summary_is_not_changed_in_place(study):
    _, _, summary = study
    with pytest.raises(ValueError):
        summary.primary_kpi = "survival"  # frozen: a page computes a value, it never patches the summary


def test_a_summary_is_not_a_mapping_any_more(study):
    _, _, summary = study
    with pytest.raises(TypeError):
        summary["variants"]  # noqa: B018  (the compatibility shim of issue 43 is gone)
    assert not hasattr(summary, "get")


# ----------------------------------------------------------------------------- no string keys

#: the modules that read the summary: the report (assembler, kit, the domains' pages), the terminal, the API
READERS = sorted(
    [
        *(SRC / "reports").glob("*.py"),
        *(SRC / "reportkit").glob("*.py"),
        *(SRC / "domains").glob("*/report.py"),
        SRC / "terminal.py",
        SRC / "api.py",
    ]
)
#: the functions of ``export.py`` that read the run's summaries (``summary.json``, ``stress/summary.json``);
#: the rest of it walks the model card it writes (``model-card.json``, its own keys) and is left out
EXPORT_READERS = ("read_summary", "read_stress_summary")
#: ``evaluation/stress.py`` builds and holds the stress summary: checked whole
STRESS = SRC / "evaluation" / "stress.py"


def _summary_readers_in_export() -> dict[str, list[tuple[int, str]]]:
    """Function name -> its numbered lines, for each function of ``export.py`` that reads a summary."""
    path = SRC / "export.py"
    text = path.read_text()
    lines = text.splitlines()
    return {
        node.name: [(n, lines[n - 1]) for n in range(node.lineno, node.end_lineno + 1)]
        for node in ast.walk(ast.parse(text))
        if isinstance(node, ast.FunctionDef)
        and any(name in (ast.get_source_segment(text, node) or "") for name in EXPORT_READERS)
    }


#: keys only ``summary.json`` has (a table column such as "value" or "train_seed" is left out: the
#: pages read results and traces frames by column)
_KEYS = (
    "variants|policies|kpis|primary_kpi|selection_kpi|mean|iqm|low|high|difference|relative_percent|"
    "comparison|probability_better|best_heuristic|best_learned|pairs|stability|per_seed|sd|worst|"
    "sd_difference|worst_difference|n_eval_seeds|n_train_seeds|failed_episodes|validation|oracles|held_out|"
    "higher_is_better|unit|label|confidence|bootstrap_samples|selected|gradient_updates|num_timesteps|"
    "fine_tune|too_few_cases"
)
STRING_KEYS = re.compile(rf"""\[\s*["']({_KEYS})["']\s*\]|\.get\(\s*["']({_KEYS}|value)["']""")


def test_no_report_terminal_or_api_module_walks_the_summary_by_string_key():
    assert len(READERS) > 10
    found = [
        f"{path.relative_to(SRC)}:{n}: {line.strip()}"
        for path in READERS
        for n, line in enumerate(path.read_text().splitlines(), start=1)
        if STRING_KEYS.search(line)
    ]
    assert found == [], "read the summary through fieldrl.results (attributes and lookups):\n" + "\n".join(
        found
    )


def test_neither_export_nor_the_stress_summary_walks_a_summary_by_string_key():
    readers = _summary_readers_in_export()
    assert {"_failed_held_out", "_held_out", "_operating_range"} <= set(readers)
    numbered = [("export.py", n, line) for lines in readers.values() for n, line in lines]
    stress = STRESS.read_text().splitlines()
    numbered += [(str(STRESS.relative_to(SRC)), n, line) for n, line in enumerate(stress, start=1)]
    found = [f"{path}:{n}: {line.strip()}" for path, n, line in numbered if STRING_KEYS.search(line)]
    assert found == [], "read the summary through fieldrl.results (attributes and lookups):\n" + "\n".join(
        found
    )


def test_the_string_key_check_catches_the_old_lookups():
    old = [
        'mine = entry.get("policies", {}).get(label)',
        '"policy": point.policies.get(label, {}).get(kpi, {}).get("mean"),',
        'counts = [p[kpi]["n_eval_seeds"] for p in self.policies.values() if kpi in p]',
        'for kpi in summary["kpis"]:',
        'entry = summary["variants"][variant]',
        "value = (((held_out.get(policy) or {}).get(scored) or {}).get('mean') or {}).get('value')",
        'records = ((summary.get("validation") or {}).get("learned") or {})',
        'diff = comparison["difference"]',
    ]
    assert all(STRING_KEYS.search(line) for line in old)
    fine = [
        'rows["value"].mean()',
        'frame[frame["train_seed"] == seed]',
        'styles["Heading2"]',
        'counts["few"]',
    ]
    assert not any(STRING_KEYS.search(line) for line in fine)


def test_one_interval_type():
    defined = [
        path.relative_to(SRC)
        for path in SRC.rglob("*.py")
        if re.search(r"^class _?Interval\b", path.read_text(), re.MULTILINE)
    ]
    assert defined == [Path("results.py")]
