"""Report layout: no table header word broken across lines, headings kept with what follows, page 1 an
executive summary on one page, and no page left nearly empty."""

from __future__ import annotations

import copy
from types import SimpleNamespace
from typing import Any

import pytest
import yaml
from pypdf import PdfReader
from reportlab.lib.pagesizes import A4
from reportlab.lib.units import cm
from reportlab.platypus import Paragraph, SimpleDocTemplate, Table

from fieldrl.domains import domain_names, get_domain
from fieldrl.reportkit.layout import PAGE_WIDTH, column_groups, header_overflows, stylesheet, words
from fieldrl.reports import front, pdf
from fieldrl.results import Summary


def _stat(value: float, n: int = 20) -> dict[str, Any]:
    s = {"value": value, "low": value - 1234.5, "high": value + 1234.5}
    return {"mean": s, "iqm": s, "n_train_seeds": 1, "n_eval_seeds": n}


def domain_summary(name: str, variants: tuple[str, ...] = ("default",)) -> Summary:
    """A summary with every KPI of domain ``name``, its heuristics and two learned policies."""
    domain = get_domain(name)
    kpis = [
        {
            "name": k.name,
            "label": k.label,
            "unit": k.unit,
            "higher_is_better": k.higher_is_better,
            "wall_clock": k.wall_clock,
            "binary": k.binary,
            "ranked": k.ranked and not k.wall_clock,
        }
        for k in domain.kpis
    ]
    policies = [*domain.heuristics, "PPO (shared)", "MaskablePPO + imitation"]
    kinds = {p: "learned" if "PPO" in p else "heuristic" for p in policies}
    entry = {
        "policies": {p: {k["name"]: _stat(-1234.5 + i) for k in kpis} for i, p in enumerate(policies)},
        "best_heuristic": policies[0],
        "best_learned": policies[-1],
        "comparison": {
            k["name"]: {"difference": _stat(1.0)["mean"], "relative_percent": _stat(5.0)["mean"]}
            for k in kpis
        },
        "probability_better": {"value": 0.5, "low": 0.2, "high": 0.8},
        "pairs": [],
    }
    return Summary.model_validate(
        {
            "scenario": name,
            "confidence": 0.95,
            "bootstrap_samples": 100,
            "primary_kpi": kpis[0]["name"],
            "kpis": kpis,
            "policies": [{"name": p, "kind": kinds[p]} for p in policies],
            "oracles": [],
            "variants": {v: entry for v in variants},
        }
    )


@pytest.mark.parametrize("name", domain_names())
def test_kpi_tables_never_break_a_header_word(name: str) -> None:
    s = domain_summary(name)
    ctx = SimpleNamespace(summary=s, styles=stylesheet())
    for stat in ("mean", "iqm"):
        tables = pdf.kpi_tables(ctx, "default", stat)
        for table in tables:
            assert header_overflows(table) == [], name
            assert sum(table._colWidths) <= PAGE_WIDTH + 0.01
        shown = [c.text for t in tables for c in t._cellvalues[0][1:]]
        assert len(shown) == len(s.kpis)  # every KPI once, across the split tables


def test_the_old_fixed_columns_would_break_traffic_headers() -> None:
    """The check itself works: nine traffic KPIs in one page-wide table break words like 'pedestrian'."""
    s = domain_summary("traffic")
    ctx = SimpleNamespace(summary=s, styles=stylesheet())
    rows = pdf._kpi_cells(ctx, "default", "mean", s.kpis)
    first = pdf.POLICY_COLUMN
    equal = [first] + [(PAGE_WIDTH - first) / len(s.kpis)] * len(s.kpis)  # the old layout
    cell = ctx.styles["Cell"]
    squeezed = Table([[Paragraph(c, cell) for c in row] for row in rows], colWidths=equal)
    assert {"pedestrian", "Throughput"} <= set(header_overflows(squeezed))
    assert len(pdf.kpi_tables(ctx, "default")) == 2


@pytest.mark.parametrize("name", ["traffic", "uav"])
def test_page_one_tables_never_break_a_header_word(name: str) -> None:
    s = domain_summary(name)
    ctx = SimpleNamespace(summary=s, styles=stylesheet())
    headlines = front.headline_kpis(s, "default", tuple(get_domain(name).headline_kpis))
    assert header_overflows(front.headline_table(ctx, "default", headlines, PAGE_WIDTH)) == []
    several = SimpleNamespace(
        summary=domain_summary(name, ("level-0", "level-1-monolithic")),
        styles=ctx.styles,
        domain=get_domain(name),
    )
    assert header_overflows(front.settings_table(several, PAGE_WIDTH)) == []


def test_column_groups_fit_and_balance() -> None:
    assert column_groups([50.0] * 7, available=200) == [[0, 1, 2, 3], [4, 5, 6]]
    assert column_groups([50.0] * 3, available=200) == [[0, 1, 2]]
    assert words("<b>Task</b> success<br/><i>higher&amp;better</i>") == ["Task", "success", "higher&better"]


def _page_of(path: Any, text: str) -> int:
    for i, page in enumerate(PdfReader(path).pages):
        if text in (page.extract_text() or ""):
            return i
    raise AssertionError(text)


def test_a_heading_is_never_left_alone_at_the_foot_of_a_page(tmp_path) -> None:
    styles = stylesheet()
    body = "FIRST LINE UNDER IT " + "and more words under the heading " * 30
    for filler in range(28, 42):  # the heading crosses the foot of page 1 (alone there at 39 before)
        story: list[Any] = [Paragraph(f"filler line {i}", styles["BodyText"]) for i in range(filler)]
        story += [Paragraph("THE HEADING", styles["Heading3"]), Paragraph(body, styles["BodyText"])]
        path = tmp_path / f"h{filler}.pdf"
        SimpleDocTemplate(str(path), pagesize=A4, topMargin=1.6 * cm, bottomMargin=1.6 * cm).build(story)
        assert _page_of(path, "THE HEADING") == _page_of(path, "FIRST LINE UNDER IT"), filler


@pytest.fixture(scope="module")
def tiny_report(tmp_path_factory) -> Any:
    """A cheap end-to-end report: the tiny chemo scenario with 6 held-out cases."""
    from conftest import TINY_SCENARIO

    import fieldrl

    folder = tmp_path_factory.mktemp("layout")
    data = copy.deepcopy(TINY_SCENARIO)
    (folder / "s.yaml").write_text(yaml.safe_dump(data))
    return fieldrl.run(folder / "s.yaml", out=folder / "run", show_progress=False).report


def _pages(path: Any) -> list[str]:
    return [page.extract_text() or "" for page in PdfReader(path).pages]


def test_page_one_is_the_executive_summary_on_one_page(tiny_report) -> None:
    pages = _pages(tiny_report)
    first = " ".join(pages[0].split())
    assert "the best standard policy" in first and "Best of all policies" in first
    assert "Training effort" in first and "How to read this" in first
    assert "DTR-Bench reward:" in first  # the jargon page 1 uses, explained on page 1
    assert "About this run" not in pages[0] and "About this run" in pages[1]


def test_no_header_word_is_split_across_lines_in_the_pdf(tiny_report) -> None:
    raw = "\n".join(_pages(tiny_report))
    for k in get_domain("chemo").kpis:
        for word in k.label.replace("(", " ").replace(")", " ").split():
            for cut in range(2, len(word) - 1):
                assert f"{word[:cut]}\n{word[cut:]}" not in raw, word


def test_no_page_is_left_nearly_empty(tiny_report) -> None:
    reader = PdfReader(tiny_report)
    for number, page in enumerate(reader.pages[:-1], start=1):
        text = " ".join((page.extract_text() or "").split())
        assert len(text) > 200 or len(page.images) > 0, (number, text)


def test_the_treatment_figure_draws_one_course_per_learned_policy():
    import pandas as pd

    from fieldrl.domains.chemo.report import course

    days = [0.0, 0.25, 0.5]
    frame = pd.DataFrame(
        {
            "day": days * 2 + days,
            "policy": ["PPO"] * 6 + ["tumour feedback"] * 3,
            "train_seed": [0] * 3 + [1] * 3 + [-1] * 3,
            "tumour": [1.0, 0.9, 0.8, 1.0, 0.5, 0.2, 1.0, 0.95, 0.9],
        }
    )
    ppo = course(frame, "PPO")
    assert list(ppo["day"]) == days and set(ppo["train_seed"]) == {0}
    assert list(course(frame, "tumour feedback")["day"]) == days
