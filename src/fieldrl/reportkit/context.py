"""What a domain's report section is given: the run's numbers behind accessors, and the means to add
pages.

The PDF assembler (:mod:`fieldrl.reports.pdf`) builds one :class:`ReportContext` per report and
hands it to ``Domain.report_section``. A section reads the run through the accessors --
``ctx.stat(variant, policy, kpi)`` is an :class:`~fieldrl.results.Interval` or None,
``ctx.policies()``, ``ctx.variants()``, ``ctx.best_heuristic(variant)``, ``ctx.params(variant)`` --
or through ``ctx.summary`` (a :class:`~fieldrl.results.Summary`), and adds its figures with
:meth:`ReportContext.figure` and its text with :meth:`ReportContext.para`. ``results`` (the tidy
results table) and ``traces`` (the domain's own per-step traces) are there for figures the summary
cannot draw.

This module sits below the domains: it imports no domain, scenario or evaluation module. The
scenario, domain and run folder it holds are described by the small protocols below (what the kit
itself calls); the assembler passes fieldrl's own objects, and reads more of them than a domain
section needs to.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol
from xml.sax.saxutils import escape

import pandas as pd
from reportlab.lib.styles import StyleSheet1
from reportlab.platypus import Image, Paragraph

from fieldrl.names import slug
from fieldrl.reportkit.layout import PAGE_WIDTH, image
from fieldrl.reportkit.numbers import MIN_CASES
from fieldrl.results import Interval, Paired, Summary, VariantResult


class ScenarioView(Protocol):
    """The parts of a scenario (:class:`fieldrl.scenario.Scenario`) the report kit reads."""

    @property
    def variant_names(self) -> list[str]: ...

    def variant_params(self, variant: str) -> dict[str, Any]: ...

    @property
    def policies(self) -> Any: ...  # .heuristics (label, use) and .learned (label, algorithm) entries


class DomainView(Protocol):
    """The parts of a domain (:class:`fieldrl.domains.base.Domain`) the report kit reads."""

    @property
    def params_model(self) -> Any: ...  # a pydantic model class

    def kpi(self, name: str) -> Any: ...


class FigureFolder(Protocol):
    """Where figures are saved (a run folder: :class:`fieldrl.evaluation.store.RunFolder`)."""

    def write_bytes(self, rel: str, data: bytes, record: bool = True) -> Any: ...


@dataclass(frozen=True)
class PolicyInfo:
    """One policy entry of the scenario: its label, kind and what it runs."""

    label: str
    #: "heuristic" or "learned"
    kind: str
    #: the heuristic's registered name (the scenario's ``use``) or the learning algorithm
    method: str


@dataclass
class ReportContext:
    """What a domain's ``report_section`` may use to add its own pages.

    :param folder: the run folder; figures are written under ``figures/``
    :param scenario: the scenario as it ran (its budget applied)
    :param domain: the run's domain
    :param summary: ``summary.json`` as the report reads it (intervals blanked below
        :data:`~fieldrl.reportkit.numbers.MIN_CASES` held-out cases: :func:`for_report`)
    :param results: the tidy results table (one row per policy, seed, episode and metric)
    :param traces: the domain's traces of held-out episodes (empty where it keeps none)
    :param styles: the paragraph styles (:func:`fieldrl.reportkit.layout.stylesheet`)
    :param colors: policy name -> colour of the spine's charts
    :param figure_files: the figures written so far (relative paths), recorded in the manifest
    """

    folder: FigureFolder
    scenario: ScenarioView
    domain: DomainView
    summary: Summary
    results: pd.DataFrame
    traces: pd.DataFrame
    styles: StyleSheet1
    colors: dict[str, str]
    figure_files: list[str] = field(default_factory=list)

    # -- adding pages --------------------------------------------------------------------
    def figure(
        self, name: str, png: bytes, width: float = PAGE_WIDTH, max_height: float | None = None
    ) -> Image:
        """Save ``png`` under figures/ and return it as a flowable scaled to ``width`` (narrower where
        it would be taller than ``max_height``)."""
        rel = f"figures/{slug(name)}.png"
        self.folder.write_bytes(rel, png, record=False)
        self.figure_files.append(rel)
        return image(png, width, max_height)

    def para(self, text: str, style: str = "BodyText") -> Paragraph:
        """Plain ``text`` (escaped, not markup) as a paragraph in ``style``."""
        return Paragraph(escape(text), self.styles[style])

    # -- the scenario --------------------------------------------------------------------
    def variants(self) -> list[str]:
        """The scenario's settings (variants), in its order (``["default"]`` without variants)."""
        return list(self.scenario.variant_names)

    def variant_params(self, variant: str) -> dict[str, Any]:
        """The parameters of ``variant`` as written (the scenario's params with its overrides)."""
        return self.scenario.variant_params(variant)

    def params(self, variant: str) -> Any:
        """The parameters of ``variant`` as the domain's params model (defaults filled in)."""
        return self.domain.params_model.model_validate(self.variant_params(variant))

    def kpi(self, name: str) -> Any:
        """The domain's KPI spec ``name`` (label, unit, direction)."""
        return self.domain.kpi(name)

    def heuristics(self) -> list[PolicyInfo]:
        """The scenario's heuristic entries, in its order."""
        return [PolicyInfo(e.label, "heuristic", e.use) for e in self.scenario.policies.heuristics]

    def learned(self) -> list[PolicyInfo]:
        """The scenario's learned entries, in its order."""
        return [PolicyInfo(e.label, "learned", e.algorithm) for e in self.scenario.policies.learned]

    def learned_setting(self, name: str) -> str:
        """The labels of the learned entries whose own ``params`` turn setting ``name`` on, joined
        for a sentence ("" if none)."""
        return ", ".join(
            e.label for e in self.scenario.policies.learned if (getattr(e, "params", None) or {}).get(name)
        )

    def heuristic_label(self, *uses: str) -> str | None:
        """The label of the first heuristic entry that runs one of the heuristics ``uses``; None if none."""
        return next((h.label for h in self.heuristics() if h.method in uses), None)

    # -- the results (summary.json) -------------------------------------------------------
    def policies(self) -> list[str]:
        """Every policy of the run, heuristics then learned (the order of tables and charts)."""
        return self.summary.policy_names

    def kind(self, policy: str) -> str | None:
        """``"heuristic"`` or ``"learned"`` (None for a name the run does not have)."""
        return self.summary.kind(policy)

    def has_results(self, variant: str) -> bool:
        """Whether the summary holds ``variant``."""
        return variant in self.summary.variants

    def evaluated(self, variant: str) -> list[str]:
        """The policies with results in ``variant`` (a policy whose every episode failed has none)."""
        return self.summary.variant(variant).evaluated

    def best_heuristic(self, variant: str) -> str | None:
        """The standard policy with the best primary KPI in ``variant`` (never an exact optimiser)."""
        return self.summary.variant(variant).best_heuristic

    def best_learned(self, variant: str) -> str | None:
        """The learned policy with the best primary KPI in ``variant``."""
        return self.summary.variant(variant).best_learned

    def stat(self, variant: str, policy: str, kpi: str, stat: str = "mean") -> Interval | None:
        """``policy``'s ``stat`` (mean or iqm) of ``kpi`` in ``variant`` with its confidence interval;
        None where the run has no such number."""
        return self.summary.stat(variant, policy, kpi, stat)

    def value(self, variant: str, policy: str, kpi: str) -> float:
        """The mean of :meth:`stat` alone; NaN where the run has no such number."""
        return self.summary.variant(variant).value(policy, kpi)

    def comparison(self, variant: str, kpi: str) -> Paired | None:
        """Best learned minus best standard policy on ``kpi``, paired on the same held-out cases."""
        return self.summary.variant(variant).compared(kpi)

    def pair(self, variant: str, policy: str, baseline: str, kpi: str) -> Paired | None:
        """``policy`` minus ``baseline`` on ``kpi``, for a comparison the scenario's report asked for."""
        found = self.summary.variant(variant).pair(policy, baseline)
        return None if found is None else found.kpis.get(kpi)

    def cases(self, variant: str, *policies: str) -> int:
        """Held-out cases behind the policies' numbers in ``variant``: the fewest of any of them."""
        return self.summary.cases(variant, *policies)

    def too_few_cases(self, variant: str) -> bool:
        """Whether ``variant`` has fewer than :data:`~fieldrl.reportkit.numbers.MIN_CASES` held-out cases:
        its intervals are blanked, and nothing should be called clearly better or worse."""
        return too_few_cases(self.summary.variant(variant))


def too_few_cases(entry: VariantResult) -> bool:
    """Whether setting ``entry`` has results from fewer than :data:`~fieldrl.reportkit.numbers.MIN_CASES`
    held-out cases (a setting without results has none to blank)."""
    return bool(entry.policies) and entry.all_cases() < MIN_CASES


def for_report(summary: Summary) -> Summary:
    """``summary`` as the report states it: every interval and win rate of a setting with fewer than
    :data:`~fieldrl.reportkit.numbers.MIN_CASES` held-out cases blanked (the means stay).

    Report text built from it, the domains' own pages included, then prints no interval it cannot
    support: a bootstrap over two cases says nothing.
    """
    return summary.blanked([name for name, entry in summary.variants.items() if too_few_cases(entry)])
