"""An evaluated run's results: ``summary.json`` as one typed model, and the lookups every reader repeats.

:func:`fieldrl.evaluation.summary.summarize` builds a :class:`Summary`, the run folder holds its
``model_dump(exclude_unset=True)`` (the keys and nesting fieldrl has always written, so older and newer
versions read each other's files), and :func:`fieldrl.evaluation.readback.read_summary` validates the
file back into one. The report's pages, the terminal and the API then ask it
(``summary.primary``, ``summary.variant(v).stat(policy, kpi)``, ``summary.training_records(v, policy)``)
instead of walking the file by string key. Fields that earlier versions did not write are optional,
so their runs still read.

Pydantic and the standard library (and the training record of :mod:`fieldrl.policies.record`):
``fieldrl report``, ``fieldrl compare`` and ``fieldrl list`` import this without torch, SB3, Gymnasium
or a simulator.
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, NonNegativeInt, field_validator

from fieldrl.policies.record import TrainingRecord

__all__ = [
    "NON_FINITE_ACTIONS",
    "Described",
    "Failure",
    "Interval",
    "Kpi",
    "Pair",
    "Paired",
    "PolicyRef",
    "Spread",
    "Stability",
    "Summary",
    "TrainingRecord",
    "Validation",
    "VariantResult",
    "failure_cause",
    "failures_ended",
]

NAN = float("nan")


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


# ----------------------------------------------------------------------------- numbers


class Interval(_Record):
    """An estimate and its confidence interval: a mean or IQM, a paired difference, a win rate.

    ``low`` and ``high`` are NaN where there is no interval (too few held-out cases, or no resample
    with a value); a file may hold them as null or leave them out, and a NaN estimate as null.
    """

    value: float
    low: float = NAN
    high: float = NAN

    @field_validator("value", "low", "high", mode="before")
    @classmethod
    def _null_is_nan(cls, number: Any) -> Any:
        return NAN if number is None else number

    @property
    def has_range(self) -> bool:
        """Whether there is an interval (not blanked for too few held-out cases)."""
        return math.isfinite(self.low)

    def overlaps(self, other: Interval) -> bool:
        """Whether the two intervals share a point."""
        return self.high >= other.low and self.low <= other.high

    def blanked(self) -> Interval:
        """The estimate alone: its interval set to NaN."""
        return Interval(value=self.value, low=NAN, high=NAN)

    def as_dict(self) -> dict[str, float]:
        """``{"value", "low", "high"}``: the mapping ``summary.json`` holds."""
        return {"value": self.value, "low": self.low, "high": self.high}


class Described(_Record):
    """One policy's KPI over the held-out cases: mean and interquartile mean, and how many seeds."""

    mean: Interval
    iqm: Interval
    n_train_seeds: NonNegativeInt = 0
    n_eval_seeds: NonNegativeInt = 0

    def stat(self, name: str) -> Interval:
        """``mean`` or ``iqm``."""
        if name not in ("mean", "iqm"):
            raise ValueError(f"stat = {name!r}: allowed: mean, iqm")
        return self.mean if name == "mean" else self.iqm

    def blanked(self) -> Described:
        return self.model_copy(update={"mean": self.mean.blanked(), "iqm": self.iqm.blanked()})


class Paired(_Record):
    """A paired difference: policy minus baseline on the same held-out cases, absolute and in %."""

    difference: Interval
    relative_percent: Interval

    def blanked(self) -> Paired:
        return Paired(difference=self.difference.blanked(), relative_percent=self.relative_percent.blanked())


class Spread(_Record):
    """How a learned policy's result depends on its training seed: each seed's mean, their SD, the worst."""

    per_seed: list[float]
    sd: Interval
    worst: Interval


class Stability(_Record):
    """Two learned policies' spreads across training seeds (on ``kpi``), and policy minus baseline."""

    kpi: str
    policy: Spread
    baseline: Spread
    sd_difference: Interval
    worst_difference: Interval


class Pair(_Record):
    """A comparison the scenario's report asked for (``report.comparisons``) in one setting."""

    policy: str
    baseline: str
    kpis: dict[str, Paired]
    stability: Stability | None = None  # written from issue 44 on, where both sides have 2+ seeds


# ----------------------------------------------------------------------------- one setting


class VariantResult(_Record):
    """One setting's results: every evaluated policy's KPIs, the best of each kind and their comparison."""

    #: policy -> KPI -> its mean and IQM (a policy whose every episode failed is absent)
    policies: dict[str, dict[str, Described]]
    best_heuristic: str | None = None
    best_learned: str | None = None
    #: best learned minus best standard policy, per KPI (absent without both)
    comparison: dict[str, Paired] | None = None
    #: how often the best learned policy beat the best standard one on a held-out case (primary KPI)
    probability_better: Interval | None = None
    pairs: list[Pair] = []

    @property
    def evaluated(self) -> list[str]:
        """The policies with results here, in the summary's order."""
        return list(self.policies)

    def described(self, policy: str, kpi: str) -> Described | None:
        """``policy``'s ``kpi`` here; None where the run has no such number."""
        return self.policies.get(policy, {}).get(kpi)

    def stat(self, policy: str, kpi: str, stat: str = "mean") -> Interval | None:
        """``policy``'s ``stat`` (mean or iqm) of ``kpi`` with its interval; None where there is none."""
        found = self.described(policy, kpi)
        return None if found is None else found.stat(stat)

    def value(self, policy: str, kpi: str, stat: str = "mean") -> float:
        """The estimate of :meth:`stat` alone; NaN where the run has no such number."""
        found = self.stat(policy, kpi, stat)
        return NAN if found is None else found.value

    def cases(self, *policies: str) -> int:
        """Held-out cases (evaluation seeds) behind the policies' numbers: the fewest of any of them
        (0 for a policy without results, or none named)."""
        counts = [
            next(iter(self.policies[p].values())).n_eval_seeds if self.policies.get(p) else 0
            for p in policies
        ]
        return min(counts, default=0)

    def all_cases(self) -> int:
        """:meth:`cases` of every evaluated policy (0 where none has results)."""
        return self.cases(*self.policies)

    def scale(self, kpi: str) -> float:
        """The largest absolute mean of ``kpi`` over the policies here (NaN means left out; 0 if none)."""
        values = (v[kpi].mean.value for v in self.policies.values())
        return max((abs(x) for x in values if math.isfinite(x)), default=0.0)

    def best(self, kpi: Kpi, stat: str = "mean", among: list[str] | None = None) -> str | None:
        """The policy (of ``among``, default every one here) with the best finite ``stat`` of ``kpi``;
        the first of equals; None where none has a value."""
        sign = 1 if kpi.higher_is_better else -1
        names = self.evaluated if among is None else [n for n in among if n in self.policies]
        scored = {n: sign * self.value(n, kpi.name, stat) for n in names}
        scored = {n: v for n, v in scored.items() if math.isfinite(v)}
        return max(scored, key=scored.__getitem__) if scored else None

    def compared(self, kpi: str) -> Paired | None:
        """Best learned minus best standard policy on ``kpi``; None without that comparison."""
        return (self.comparison or {}).get(kpi)

    def pair(self, policy: str, baseline: str) -> Pair | None:
        """The requested comparison of ``policy`` with ``baseline``; None if the run made none."""
        return next((p for p in self.pairs if p.policy == policy and p.baseline == baseline), None)

    def blanked(self) -> VariantResult:
        """This setting with every interval and win rate blanked (the means stay, and the stability)."""
        update: dict[str, Any] = {
            "policies": {p: {k: d.blanked() for k, d in kpis.items()} for p, kpis in self.policies.items()},
            "pairs": [
                pair.model_copy(update={"kpis": {k: d.blanked() for k, d in pair.kpis.items()}})
                for pair in self.pairs
            ],
        }
        if self.comparison is not None:
            update["comparison"] = {k: d.blanked() for k, d in self.comparison.items()}
        if self.probability_better is not None:
            update["probability_better"] = self.probability_better.blanked()
        return self.model_copy(update=update)


#: what a setting the run does not have reads as: no policy, nothing best, nothing compared
NO_RESULTS = VariantResult(policies={})


# ----------------------------------------------------------------------------- the run


class Kpi(_Record):
    """A KPI as the summary records it (the domain's :class:`~fieldrl.domains.base.KpiSpec`, written out)."""

    name: str
    label: str
    unit: str
    higher_is_better: bool
    wall_clock: bool = False
    #: a mean over a population that another KPI counts (delay over the trains that arrived)
    among: str | None = None
    #: a yes/no outcome per episode (no IQM)
    binary: bool = False
    ranked: bool = True

    @property
    def is_ranked(self) -> bool:
        """Whether "best", "better" and "worse" apply (not a computation time, not a trade-off)."""
        return self.ranked and not self.wall_clock


class PolicyRef(_Record):
    name: str
    kind: str = Field(pattern="^(heuristic|learned)$")


class Failure(_Record):
    """A held-out episode that failed twice (the simulator raised, or the policy's actions were NaN)."""

    variant: str
    policy: str
    train_seed: int
    eval_seed: int
    episode: NonNegativeInt
    reason: str

    @property
    def cause(self) -> str:
        return failure_cause(self.reason)


class Validation(_Record):
    """What checkpoint selection saw: the heuristics' score on the validation seeds (setting -> policy ->
    value), and each trained model's record (setting -> policy -> training seed -> record)."""

    heuristics: dict[str, dict[str, float | None]]
    learned: dict[str, dict[str, dict[str, TrainingRecord]]]


class Summary(_Record):
    """``summary.json``. Fields earlier versions did not write are optional, so their runs still read.

    Written with ``model_dump(exclude_unset=True)``: a summary read from a file dumps back to that file's
    keys, and one built by :func:`~fieldrl.evaluation.summary.summarize` to the keys it has always written.
    """

    scenario: str | None = None
    domain: str | None = None
    budget: str | None = None
    confidence: float = Field(gt=0, lt=1)
    bootstrap_samples: NonNegativeInt
    primary_kpi: str
    #: the KPI that chose checkpoints on the validation seeds (absent: the primary KPI)
    selection_kpi: str | None = None
    kpis: list[Kpi]
    policies: list[PolicyRef]
    #: the heuristics that are exact optimisers: a reference, never "the best standard policy"
    oracles: list[str] = []
    variants: dict[str, VariantResult]
    failed_episodes: list[Failure] = []
    validation: Validation | None = None

    # -- KPIs ----------------------------------------------------------------------------
    def kpi(self, name: str) -> Kpi:
        """The KPI record ``name`` (KeyError naming it where the run has none)."""
        found = next((k for k in self.kpis if k.name == name), None)
        if found is None:
            raise KeyError(f"{name!r} is not a KPI of this run ({', '.join(k.name for k in self.kpis)})")
        return found

    @property
    def primary(self) -> Kpi:
        """The primary KPI: the one that picks the best policy of each kind."""
        return self.kpi(self.primary_kpi)

    @property
    def selection(self) -> Kpi:
        """The KPI that chose checkpoints on the validation seeds."""
        return self.kpi(self.selection_kpi or self.primary_kpi)

    def measured_kpis(self, variant: str, stat: str = "mean") -> list[Kpi]:
        """The KPIs with a value for at least one policy in ``variant``.

        A KPI that is NaN for every policy (one that does not apply in this setting, e.g. a share of an
        optimum that does not exist) has nothing to chart and no best policy.
        """
        policies = self.variant(variant).policies.values()
        return [k for k in self.kpis if any(math.isfinite(p[k.name].stat(stat).value) for p in policies)]

    # -- policies ------------------------------------------------------------------------
    @property
    def policy_names(self) -> list[str]:
        """Every policy of the run, heuristics then learned."""
        return [p.name for p in self.policies]

    def kind(self, policy: str) -> str | None:
        """``"heuristic"`` or ``"learned"`` (None for a name the run does not have)."""
        return next((p.kind for p in self.policies if p.name == policy), None)

    def is_oracle(self, policy: str) -> bool:
        return policy in self.oracles

    # -- settings ------------------------------------------------------------------------
    def variant(self, name: str) -> VariantResult:
        """Setting ``name``'s results (:data:`NO_RESULTS` where the run has none)."""
        return self.variants.get(name, NO_RESULTS)

    def stat(self, variant: str, policy: str, kpi: str, stat: str = "mean") -> Interval | None:
        """Shorthand for ``variant(variant).stat(policy, kpi, stat)``."""
        return self.variant(variant).stat(policy, kpi, stat)

    def cases(self, variant: str, *policies: str) -> int:
        """Shorthand for ``variant(variant).cases(*policies)``."""
        return self.variant(variant).cases(*policies)

    def best(self, variant: str, kpi: str, stat: str = "mean") -> str | None:
        """The policy with the best finite ``stat`` of ``kpi`` in ``variant`` (optima included)."""
        return self.variant(variant).best(self.kpi(kpi), stat)

    def blanked(self, settings: list[str]) -> Summary:
        """A copy with every interval and win rate of ``settings`` blanked (:meth:`VariantResult.blanked`)."""
        variants = {n: v.blanked() if n in settings else v for n, v in self.variants.items()}
        return self.model_copy(update={"variants": variants})

    # -- training and validation -----------------------------------------------------------
    def training_records(self, variant: str, policy: str) -> list[TrainingRecord]:
        """What each training seed's weights file says about its training (see ``policies.weights``)."""
        if self.validation is None:
            return []
        return list(self.validation.learned.get(variant, {}).get(policy, {}).values())

    def heuristic_validation(self, variant: str) -> dict[str, float | None]:
        """Each heuristic's score on the validation seeds of ``variant`` (empty where none was scored)."""
        return {} if self.validation is None else dict(self.validation.heuristics.get(variant, {}))

    # -- failures ------------------------------------------------------------------------
    def failures_in(self, variant: str, policy: str | None = None) -> list[Failure]:
        """The failed held-out episodes of setting ``variant`` (of ``policy`` alone, where given)."""
        return [
            f for f in self.failed_episodes if f.variant == variant and (policy is None or f.policy == policy)
        ]


# ----------------------------------------------------------------------------- failed episodes

#: the reason recorded for a held-out episode whose policy answered NaN or infinite actions
#: (a learned model whose weights are NaN: a diverged training, a NaN weights file)
NON_FINITE_ACTIONS = "policy produced non-finite actions (NaN weights?)"
#: what ended the episodes of each cause, in words that follow "N held-out episode(s) ended"
_ENDED = {
    "simulator": "in a simulator error",
    "non-finite": "because the policy produced non-finite actions (NaN weights?)",
}


def failure_cause(reason: str) -> str:
    """What ended a failed episode, from its recorded reason: ``"non-finite"`` (the policy's
    actions) or ``"simulator"`` (what the simulator, env or domain raised; also every reason of a
    run evaluated before the two were told apart)."""
    return "non-finite" if reason.startswith(NON_FINITE_ACTIONS) else "simulator"


def failures_ended(failed: list[Failure]) -> str:
    """How ``failed`` episodes ended, in words after "N held-out episode(s) ended":
    ``in a simulator error``, or with counts where causes differ (``in a simulator error (2) or
    because the policy produced non-finite actions (NaN weights?) (1)``)."""
    counts: dict[str, int] = {}
    for f in failed:
        cause = failure_cause(f.reason)
        counts[cause] = counts.get(cause, 0) + 1
    if not counts:  # no failure recorded (a run whose KPIs are all NaN): nothing to blame
        return "without a result"
    if len(counts) == 1:
        return _ENDED[next(iter(counts))]
    return " or ".join(f"{_ENDED[cause]} ({n})" for cause, n in counts.items())
