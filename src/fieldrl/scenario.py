"""Scenario files: one YAML file says everything about a run.

Loading is two-pass: pydantic checks the structure, then the named domain checks
what only it knows (its parameters, heuristics and their settings). Every problem
becomes one :class:`~fieldrl.errors.ScenarioError` naming the file, the field
path, the bad value and what is allowed.
"""

from __future__ import annotations

import inspect
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StringConstraints,
    ValidationError,
    field_validator,
    model_validator,
)

from fieldrl.errors import MISSING, ScenarioError, short_repr
from fieldrl.limits import (
    MAX_BOOTSTRAP_DRAWS,
    MAX_EVAL_EPISODES,
    MAX_EVAL_SEEDS,
    MAX_POLICIES,
    MAX_SCENARIO_BYTES,
    MAX_TRAIN_JOBS,
    MAX_TRAIN_SEEDS,
    MAX_VARIANTS,
    check_finite,
    load_yaml,
)
from fieldrl.names import check_name, slug_clash
from fieldrl.policies.spec import FineTuneSchedule, TrainingSpec, WarmStart
from fieldrl.reportkit.numbers import fmt

BUDGET_NAMES = ("demo", "medium", "full")
#: earlier names of budgets, still understood (on the command line and as a scenario's budgets key)
BUDGET_ALIASES = {"quick": "demo"}


def budget_name(budget: str) -> str:
    """``budget`` under its current name (``quick`` was ``demo``'s name, and clashed with the
    ``*/quick`` scenarios: ``chemo/quick --budget quick``)."""
    return BUDGET_ALIASES.get(budget, budget)


def _expand_seeds(value: Any) -> Any:
    """Accept ``[1, 2, 3]`` or ``{start: 1000, count: 100}``."""
    if isinstance(value, dict):
        unknown = set(value) - {"start", "count"}
        if unknown:
            raise ValueError(f"unknown key(s) {sorted(unknown)}; use a list of ints or {{start, count}}")
        start, count = value.get("start", 0), value.get("count")
        if not isinstance(start, int) or not isinstance(count, int) or count < 1 or start < 0:
            raise ValueError("a seed range needs integers start >= 0 and count >= 1")
        if count > MAX_EVAL_SEEDS or start + count > 2**32:
            raise ValueError(f"a seed range has count <= {MAX_EVAL_SEEDS:,} and start + count <= 2**32")
        return list(range(start, start + count))
    return value


def _each_once(seeds: list[int]) -> list[int]:
    """A seed listed twice would count one case twice (its episodes are identical)."""
    if len(set(seeds)) < len(seeds):
        from collections import Counter

        twice = sorted(s for s, n in Counter(seeds).items() if n > 1)[:5]
        raise ValueError(f"seed(s) {twice} listed more than once; list each seed once")
    return seeds


SeedList = Annotated[
    list[Annotated[int, Field(ge=0, lt=2**32)]], BeforeValidator(_expand_seeds), AfterValidator(_each_once)
]
#: a policy, variant or scenario name: it becomes a path component in the run folder
SafeName = Annotated[str, AfterValidator(check_name)]
#: a policy's label (the length checked as a string's, before the name rule)
Label = Annotated[str, StringConstraints(max_length=40), AfterValidator(check_name)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class HeuristicEntry(Strict):
    """A baseline controller from the domain's catalogue."""

    use: str = Field(description="heuristic name in the domain (see `fieldrl list`)")
    name: Label | None = Field(None, description="label in reports")
    settings: dict[str, Any] = Field(default_factory=dict)

    @property
    def label(self) -> str:
        return self.name or self.use


class Imitation(Strict):
    """Warm start: behaviour-clone one of the scenario's heuristics before RL training."""

    heuristic: str = Field(description="label of a heuristic in policies.heuristics to imitate")
    episodes: int = Field(
        20, ge=1, le=10_000, description="demonstration episodes, on training seeds (never held-out ones)"
    )
    epochs: int = Field(10, ge=1, le=1000, description="passes over the demonstrations")
    max_decisions: int = Field(
        100_000, ge=100, le=10**7, description="decisions kept for cloning at most (a uniform sample beyond)"
    )
    learning_rate: float = Field(1e-3, gt=0, le=1, description="Adam learning rate of the cloning")


class Residual(Strict):
    """Residual mode: the learned action is a bounded correction added to a heuristic's action."""

    heuristic: str = Field(description="label of a heuristic in policies.heuristics to correct")
    scale: float = Field(
        0.2, gt=0, le=1, description="largest correction, as a fraction of half the action range"
    )


class Pull(Strict):
    """Kickstarting: after each update the actor steps toward the frozen clone's action, less and less."""

    weight: float = Field(
        1.0, gt=0, le=10, description="the pull's step size at first, as a multiple of the learning rate"
    )
    fade: float = Field(
        0.5, gt=0, le=1, description="share of train_steps over which the pull fades linearly to nothing"
    )


class JumpStart(Strict):
    """JSRL: the clone drives each training episode's first decisions, fewer as the learner catches up."""

    horizon: int = Field(
        ge=1, le=10**6, description="decisions of every training episode the clone drives at first"
    )
    stages: int = Field(
        4,
        ge=1,
        le=100,
        description="equal steps by which the horizon falls to 0, one each time the learner's validation "
        "score reaches the clone's",
    )


class FineTune(Strict):
    """How RL fine-tunes a warm start without losing what it copied (see ``fieldrl.policies.fine_tune``)."""

    critic_warmup: float = Field(
        0.0,
        ge=0,
        le=0.5,
        description="share of train_steps in which only the value function learns, on the warm start's "
        "own rollouts (the actor does not move)",
    )
    actor_ramp: float = Field(
        0.0,
        ge=0,
        le=1,
        description="share of train_steps over which the actor's learning rate then rises linearly "
        "from 0 to its full value",
    )
    pull: Pull | None = Field(None, description="a pull toward the clone's action that fades (needs imitate)")
    jump_start: JumpStart | None = Field(
        None, description="the clone drives the first decisions of each training episode (needs imitate)"
    )

    def steps(self, train_steps: int) -> tuple[int, int, int]:
        """``(warm-up, ramp, fade)`` in env steps for a training of ``train_steps``."""
        fade = self.pull.fade if self.pull is not None else 0.0
        return tuple(int(round(share * train_steps)) for share in (self.critic_warmup, self.actor_ramp, fade))

    def schedule(self, train_steps: int) -> FineTuneSchedule:
        """The section in env steps, as training runs it, for a training of ``train_steps``."""
        warmup, ramp, fade = self.steps(train_steps)
        weight = self.pull.weight if self.pull is not None else 0.0
        jump = self.jump_start
        horizon, stages = (jump.horizon, jump.stages) if jump is not None else (0, 1)
        return FineTuneSchedule(warmup, ramp, float(weight), fade, horizon, stages)


class Shield(Strict):
    """Runtime shield: a planner of the scenario vets every learned action at evaluation, replacing
    (and counting) those that would lead to a conflict; training is unchanged."""

    heuristic: str = Field(description="label of a heuristic in policies.heuristics that can shield")
    patience: int = Field(
        6,
        ge=1,
        le=10_000,
        description="decision steps a learned hold may last while the shield would move before the "
        "shield's move is taken (counted as an override too)",
    )


class TuningRecord(Strict):
    """Where a learned entry's tuned hyperparameters came from (an Optuna study of ``fieldrl tune``)."""

    study: str = Field(description="study name")
    trials: int = Field(ge=0, description="finished trials (complete or pruned)")
    best_trial: int | None = None
    best_value: float | None = Field(None, description="best objective value on the validation seeds")
    handset_value: float | None = Field(
        None, description="the scenario's hand-set configuration's value (a study's first trial)"
    )
    best_is_handset: bool = Field(False, description="no trial beat the hand-set configuration")
    objective: str = Field("", description="what was optimised, in words")
    search_space: dict[str, str] = Field(default_factory=dict, description="parameter -> its range")
    train_steps: int | None = Field(None, description="training steps of each trial")
    file: str | None = Field(None, description="the tuned-hyperparameters file it was read from")
    replaced: list[str] = Field(
        default_factory=list, description="settings the scenario wrote that the tuned file replaced"
    )
    written: dict[str, Any] = Field(
        default_factory=dict,
        description="what the scenario wrote for each replaced setting: still checked, since a typo "
        "there is a value the user meant (``params.<name>`` for the entry's own params)",
    )


class LearnedEntry(Strict):
    """A policy trained with a Stable-Baselines3 / sb3-contrib algorithm."""

    algorithm: str
    name: Label | None = None
    policy: str = "MlpPolicy"
    hyperparameters: dict[str, Any] = Field(default_factory=dict)
    params: dict[str, Any] = Field(
        default_factory=dict,
        description="domain parameters this policy trains and runs with, over the scenario's and the "
        "variant's: only the controller's own design the domain allows (`policy_params`: traffic's "
        "decision interval and reward), never the world the policies are compared in",
    )
    variants: list[Annotated[SafeName, Field(max_length=80)]] | None = Field(
        None,
        min_length=1,
        max_length=MAX_VARIANTS,
        description="the settings (variants) this policy is trained and tested in; default: all (a warm "
        "start from a heuristic, say, only where that heuristic exists)",
    )
    train_steps: int = Field(ge=1, le=10**9, description="training budget in env steps")
    n_envs: int = Field(8, ge=1, le=4096)
    normalize_obs: StrictBool = True
    normalize_reward: StrictBool = False
    checkpoint_every: int | None = Field(
        None,
        ge=1,
        le=10**9,
        description="env steps between resumable checkpoints; at each, the training envs start new "
        "episodes (mid-episode simulator state cannot be saved). Default none: an interrupted "
        "training restarts from its beginning, which gives the same result",
    )
    validate_every: int | None = Field(
        None,
        ge=1,
        le=10**9,
        description="env steps between evaluations on the validation seeds (default: a tenth of train_steps)",
    )
    imitate: Imitation | None = Field(
        None, description="behaviour-clone a heuristic before RL training (warm start)"
    )
    residual: Residual | None = Field(
        None, description="learn a bounded correction to a heuristic's action (continuous actions only)"
    )
    fine_tune: FineTune | None = Field(
        None,
        description="keep what the warm start knows while RL explores: critic warm-up, actor ramp, a "
        "fading pull toward the clone (needs imitate or residual)",
    )
    shield: Shield | None = Field(
        None, description="evaluate through the domain's runtime shield (taxiway: a prioritized planner)"
    )
    tuned: str | None = Field(
        None,
        min_length=1,
        max_length=300,
        description="YAML file of tuned hyperparameters written by `fieldrl tune` (path relative to the "
        "scenario file); its values override `hyperparameters` and `n_envs`",
    )
    tuning: TuningRecord | None = Field(
        None, description="filled in from the `tuned` file when the scenario is loaded (provenance)"
    )

    @property
    def label(self) -> str:
        return self.name or self.algorithm.upper()

    def replaced_settings(self) -> list[str]:
        """``key = written -> in effect`` for each setting the scenario wrote that its tuned file replaced."""
        if self.tuning is None:
            return []
        in_effect = {**self.hyperparameters, "n_envs": self.n_envs}
        in_effect |= {f"params.{k}": v for k, v in self.params.items()}
        return [
            f"{key} = {self.tuning.written[key]!r} -> {in_effect.get(key)!r}"
            if key in self.tuning.written
            else key
            for key in self.tuning.replaced
        ]

    def runs_in(self, variant: str) -> bool:
        return self.variants is None or variant in self.variants

    @property
    def checkpoint_interval(self) -> int:
        return self.checkpoint_every or max(1, self.train_steps // 10)

    @property
    def validation_interval(self) -> int:
        return self.validate_every or max(1, self.train_steps // 10)

    def training_spec(self) -> TrainingSpec:
        """What :mod:`fieldrl.policies.learned` trains, saves and loads: this entry with its defaults
        filled in and ``fine_tune``'s shares of ``train_steps`` in env steps. (The residual's heuristic,
        the warm start's demonstrations and the validation seeds are the caller's: they need the
        scenario and the domain.)"""
        imitate = self.imitate
        return TrainingSpec(
            algorithm=self.algorithm,
            label=self.label,
            policy=self.policy,
            hyperparameters=dict(self.hyperparameters),
            train_steps=self.train_steps,
            n_envs=self.n_envs,
            normalize_obs=self.normalize_obs,
            normalize_reward=self.normalize_reward,
            checkpoint_interval=self.checkpoint_interval,
            imitate=None
            if imitate is None
            else WarmStart(imitate.epochs, imitate.max_decisions, imitate.learning_rate),
            fine_tune=None if self.fine_tune is None else self.fine_tune.schedule(self.train_steps),
        )


class Policies(Strict):
    heuristics: list[HeuristicEntry] = Field(default_factory=list, max_length=MAX_POLICIES)
    learned: list[LearnedEntry] = Field(default_factory=list, max_length=MAX_POLICIES)

    @property
    def by_kind(self) -> list[tuple[str, str]]:
        """``(label, "heuristic" | "learned")`` for every policy, heuristics first, as results list them."""
        heuristics = [(e.label, "heuristic") for e in self.heuristics]
        return heuristics + [(e.label, "learned") for e in self.learned]

    @model_validator(mode="after")
    def _unique_labels(self) -> Policies:
        labels = [p.label for p in [*self.heuristics, *self.learned]]
        if not labels:
            raise ValueError("no policies to compare; give at least one heuristic or learned policy")
        dupes = sorted({x for x in labels if labels.count(x) > 1})
        if dupes:
            raise ValueError(f"policy names must be unique; {dupes} appear more than once (set `name`)")
        clash = slug_clash(labels)
        if clash:
            raise ValueError(f"policy names {list(clash)} would share one folder in the run; rename one")
        return self


class Seeds(Strict):
    """Three disjoint seed sets: training, validation (model selection and tuning), held-out evaluation."""

    train: SeedList = Field(min_length=1, max_length=MAX_TRAIN_SEEDS)
    eval: SeedList = Field(min_length=1, max_length=MAX_EVAL_SEEDS)
    validation: SeedList | None = Field(
        None,
        min_length=1,
        max_length=MAX_EVAL_SEEDS,
        description="seeds for choosing among checkpoints and for tuning; never the held-out ones",
    )

    @model_validator(mode="after")
    def _disjoint(self) -> Seeds:
        pairs = [("train", self.train), ("eval", self.eval), ("validation", self.validation or [])]
        for i, (name_a, a) in enumerate(pairs):
            for name_b, b in pairs[i + 1 :]:
                overlap = sorted(set(a) & set(b))
                if overlap:
                    raise ValueError(
                        f"{name_a} and {name_b} seeds must be disjoint; both contain {overlap[:5]}"
                        + (" ..." if len(overlap) > 5 else "")
                    )
        return self


class Budget(Strict):
    """Caps applied on top of the scenario: `None` leaves the scenario's value."""

    train_steps: int | None = Field(None, ge=1, description="overrides every learned policy's")
    train_steps_fraction: float | None = Field(
        None, gt=0, le=1, description="scales every learned policy's train_steps (keeps their ratios)"
    )
    train_seeds: int | None = Field(None, ge=1, description="use only the first N train seeds")
    eval_seeds: int | None = Field(None, ge=1, description="use only the first N eval seeds")
    validation_seeds: int | None = Field(None, ge=1, description="use only the first N validation seeds")
    validations: int | None = Field(
        None,
        ge=1,
        le=1000,
        description="evaluations on the validation seeds per training (sets validate_every)",
    )
    episodes_per_seed: int | None = Field(None, ge=1)
    variants: list[str] | None = Field(None, min_length=1)
    imitation_episodes: int | None = Field(
        None, ge=1, description="caps the demonstration episodes of every imitation warm start"
    )

    @model_validator(mode="after")
    def _one_step_rule(self) -> Budget:
        if self.train_steps is not None and self.train_steps_fraction is not None:
            raise ValueError("give train_steps or train_steps_fraction, not both")
        return self


class Comparison(Strict):
    """A named pair to compare on every variant, e.g. a recurrent policy against its feed-forward twin."""

    policy: str
    baseline: str

    @model_validator(mode="after")
    def _two_policies(self) -> Comparison:
        if self.policy == self.baseline:
            raise ValueError(f"compares {self.policy!r} with itself; a paired comparison needs two policies")
        return self


class ReportOptions(Strict):
    title: str | None = None
    primary_kpi: str | None = Field(None, description="KPI that decides 'best'; domain default")
    selection_kpi: str | None = Field(
        None,
        description="KPI that selects checkpoints and tuning trials on the validation seeds (default: "
        "primary_kpi); for a primary KPI a policy can game, e.g. no conflicts by never moving",
    )
    bootstrap_samples: int = Field(2000, ge=100, le=100_000)
    confidence: float = Field(0.95, gt=0.5, lt=1.0)
    comparisons: list[Comparison] = Field(
        default_factory=list,
        max_length=MAX_POLICIES,
        description="extra paired comparisons (policy minus baseline) per variant",
    )


#: most points on one stress axis, and most axes a run is stressed on
MAX_STRESS_POINTS = 12
MAX_STRESS_AXES = 4


class StressAxisEntry(Strict):
    """One condition of the world to stress a run's policies on (a domain's ``stress_axes``)."""

    axis: str = Field(min_length=1, max_length=80, description="the axis, by name (`fieldrl list DOMAIN`)")
    points: list[float] | None = Field(
        None,
        min_length=2,
        max_length=MAX_STRESS_POINTS,
        description="the values to test at, in increasing order (default: the domain's)",
    )

    @field_validator("points")
    @classmethod
    def _increasing(cls, points: list[float] | None) -> list[float] | None:
        if points is not None and any(b <= a for a, b in zip(points, points[1:], strict=False)):
            raise ValueError("points must increase, each value once")
        return points


class StressSpec(Strict):
    """Re-evaluate the trained policies, after the held-out evaluation, while one condition of the
    world moves away from what training saw (``fieldrl stress``): nothing is retrained."""

    axes: list[StressAxisEntry] = Field(min_length=1, max_length=MAX_STRESS_AXES)
    variants: list[Annotated[SafeName, Field(max_length=80)]] | None = Field(
        None,
        min_length=1,
        max_length=MAX_VARIANTS,
        description="the settings stressed (default: the first)",
    )

    @model_validator(mode="after")
    def _each_axis_once(self) -> StressSpec:
        names = [a.axis for a in self.axes]
        if len(set(names)) < len(names):
            raise ValueError(f"axes name {sorted(n for n in set(names) if names.count(n) > 1)[0]!r} twice")
        return self


class Scenario(Strict):
    name: SafeName = Field(min_length=1, max_length=80)
    domain: str
    description: str = ""
    params: dict[str, Any] = Field(default_factory=dict)
    variants: dict[Annotated[SafeName, Field(max_length=80)], dict[str, Any]] = Field(
        default_factory=dict,
        max_length=MAX_VARIANTS,
        description="named parameter overrides, evaluated separately",
    )
    policies: Policies
    seeds: Seeds
    episodes_per_seed: int = Field(1, ge=1, le=10_000)
    budgets: dict[Literal["demo", "medium", "full"], Budget] = Field(default_factory=dict)
    report: ReportOptions = Field(default_factory=ReportOptions)
    stress: StressSpec | None = Field(
        None, description="stress axes `fieldrl run` tests the trained policies on after evaluation"
    )

    @field_validator("budgets", mode="before")
    @classmethod
    def _renamed_budgets(cls, budgets: Any) -> Any:
        """A scenario written with a budget's old name (``quick:``) keeps working."""
        if not isinstance(budgets, dict):
            return budgets
        renamed = {budget_name(k) if isinstance(k, str) else k: v for k, v in budgets.items()}
        if len(renamed) < len(budgets):
            old = [k for k in budgets if k in BUDGET_ALIASES]
            raise ValueError(f"give either {old[0]!r} or {BUDGET_ALIASES[old[0]]!r} (its new name), not both")
        return renamed

    @field_validator("variants")
    @classmethod
    def _variant_folders(cls, variants: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        clash = slug_clash(variants)
        if clash:
            raise ValueError(f"variant names {list(clash)} would share one folder in the run; rename one")
        return variants

    @property
    def variant_names(self) -> list[str]:
        return list(self.variants) or ["default"]

    def variant_params(self, variant: str) -> dict[str, Any]:
        return {**self.params, **self.variants.get(variant, {})}

    def variants_of(self, entry: LearnedEntry) -> list[str]:
        """The settings ``entry`` is trained and tested in, in the scenario's order."""
        return [v for v in self.variant_names if entry.runs_in(v)]

    @property
    def stressed_variants(self) -> list[str]:
        """The settings the ``stress`` section stresses (its ``variants``, else the first setting)."""
        chosen = self.stress.variants if self.stress is not None else None
        return [v for v in self.variant_names if v in chosen] if chosen else self.variant_names[:1]

    def policy_params(self, variant: str, policy: str | None = None) -> dict[str, Any]:
        """The params ``policy`` runs with in ``variant``: the variant's, with a learned entry's own
        ``params`` over them (a heuristic, or no policy, runs with the variant's)."""
        own = next((e.params for e in self.policies.learned if e.label == policy), {})
        return {**self.variant_params(variant), **own}

    def with_budget(self, budget: str) -> Scenario:
        """The scenario as it runs under ``budget``.

        ``full`` (or ``demo``) without an entry of that name is the scenario as written;
        ``medium`` exists only where the scenario defines it (it is a study-specific choice).
        ``quick``, ``demo``'s old name, is understood.
        """
        budget = budget_name(budget)
        if budget not in BUDGET_NAMES:
            raise ScenarioError("--budget", "budget", budget, f"allowed: {', '.join(BUDGET_NAMES)}")
        b = self.budgets.get(budget)  # type: ignore[call-overload]
        if b is None and budget == "medium":
            defined = ", ".join(["full", *sorted(k for k in self.budgets if k != "full")])
            raise ScenarioError("--budget", "budget", budget, f"this scenario defines: {defined}")
        if b is None:
            return self
        data = self.model_dump()
        if b.train_steps is not None:
            for entry in data["policies"]["learned"]:
                entry["train_steps"] = b.train_steps
        if b.train_steps_fraction is not None:
            for entry in data["policies"]["learned"]:
                entry["train_steps"] = max(1, round(entry["train_steps"] * b.train_steps_fraction))
        if b.train_seeds is not None:
            data["seeds"]["train"] = data["seeds"]["train"][: b.train_seeds]
        if b.eval_seeds is not None:
            data["seeds"]["eval"] = data["seeds"]["eval"][: b.eval_seeds]
        if b.validations is not None:
            for entry in data["policies"]["learned"]:
                entry["validate_every"] = max(1, entry["train_steps"] // b.validations)
        if b.validation_seeds is not None and data["seeds"]["validation"] is not None:
            data["seeds"]["validation"] = data["seeds"]["validation"][: b.validation_seeds]
        if b.episodes_per_seed is not None:
            data["episodes_per_seed"] = b.episodes_per_seed
        if b.variants is not None:
            data["variants"] = {k: v for k, v in data["variants"].items() if k in b.variants}
            kept = list(data["variants"]) or ["default"]
            for entry in data["policies"]["learned"]:
                if entry["variants"] is not None:
                    entry["variants"] = [v for v in entry["variants"] if v in kept]  # none left: refused
            if data["stress"] is not None and data["stress"]["variants"] is not None:
                stressed = [v for v in data["stress"]["variants"] if v in kept]
                data["stress"]["variants"] = stressed or None  # none left: the first kept setting
        if b.imitation_episodes is not None:
            for entry in data["policies"]["learned"]:
                if entry["imitate"] is not None:
                    entry["imitate"]["episodes"] = min(entry["imitate"]["episodes"], b.imitation_episodes)
        return Scenario.model_validate(data)

    def part(self, index: int, of: int) -> Scenario:
        """The scenario cut to part ``index`` of ``of`` of its training seeds (consecutive blocks, the
        first parts one seed larger when they do not divide evenly): a study too long for one sitting
        runs in parts on the same held-out seeds, and ``fieldrl merge`` joins them."""
        seeds = list(self.seeds.train)
        if not 1 <= of <= len(seeds):
            raise ScenarioError(
                "--part", "part", f"{index}/{of}", f"K from 1 to its {len(seeds)} training seed(s)"
            )
        if not 1 <= index <= of:
            raise ScenarioError("--part", "part", f"{index}/{of}", f"I from 1 to {of}")
        data = self.model_dump()
        data["seeds"]["train"] = part_of(seeds, index, of)
        return Scenario.model_validate(data)


def part_of(seeds: list[int], index: int, of: int) -> list[int]:
    """Part ``index`` (from 1) of ``of`` consecutive blocks of ``seeds``."""
    size, extra = divmod(len(seeds), of)
    start = (index - 1) * size + min(index - 1, extra)
    return seeds[start : start + size + (1 if index <= extra else 0)]


# ----------------------------------------------------------------------------- loading


def builtin_scenarios() -> list[str]:
    """Names like ``chemo/quick`` of the scenarios shipped with fieldrl."""
    root = resources.files("fieldrl") / "scenarios"
    names = []
    for domain_dir in root.iterdir():
        if domain_dir.is_dir() and not domain_dir.name.startswith("_"):
            for f in domain_dir.iterdir():
                if f.name.endswith(".yaml"):
                    names.append(f"{domain_dir.name}/{f.name[: -len('.yaml')]}")
    return sorted(names)


def scenario_text(ref: str | Path) -> tuple[str, str]:
    """Return ``(source label, YAML text)`` for a path or a built-in name."""
    source, text, _ = _scenario_source(ref)
    return source, text


def _scenario_source(ref: str | Path) -> tuple[str, str, Any]:
    """``(source label, YAML text, folder that relative paths in it start from)``."""
    path = Path(ref)
    if path.is_file():
        try:
            if path.stat().st_size > MAX_SCENARIO_BYTES:
                size = path.stat().st_size
                raise ScenarioError(
                    str(path),
                    "",
                    MISSING,
                    f"file is {size:,} bytes; scenarios are limited to {MAX_SCENARIO_BYTES:,}",
                )
            return str(path), path.read_text(encoding="utf-8"), path.parent
        except (OSError, UnicodeDecodeError) as exc:
            raise ScenarioError(str(path), "", MISSING, f"cannot read file ({exc})") from None
    ref = str(ref)
    if ref in builtin_scenarios():
        domain, name = ref.split("/", 1)
        folder = resources.files("fieldrl") / "scenarios" / domain
        return ref, (folder / f"{name}.yaml").read_text("utf-8"), folder
    raise ScenarioError(
        ref,
        "",
        MISSING,
        "no such file and not a built-in scenario; built-ins: " + ", ".join(builtin_scenarios()),
    )


def load_scenario(ref: str | Path, build: bool = True) -> Scenario:
    """Load and validate a scenario (file path or built-in name like ``chemo/quick``).

    :param build: also build what only construction can judge -- each learned entry's model on a
        one-env copy of its environment, a custom Flatland layout, a SUMO network -- as ``run``
        does before it writes anything. False checks everything else (heuristics are built: they
        are light) without importing torch or a simulator's heavy stack (``fieldrl validate``
        without ``--build``).
    """
    source, text, base = _scenario_source(ref)
    return parse_scenario(text, source, base, build=build)


class TunedFile(Strict):
    """A tuned-hyperparameters file, as ``fieldrl tune`` writes it."""

    algorithm: str
    policy: str | None = Field(None, description="label of the learned entry it was tuned for")
    n_envs: int | None = Field(None, ge=1, le=4096)
    hyperparameters: dict[str, Any] = Field(default_factory=dict)
    params: dict[str, Any] = Field(
        default_factory=dict, description="the entry's own domain params the study tuned (policy_params)"
    )
    fine_tune: FineTune | None = Field(
        None,
        description="how the study chose to fine-tune the warm start ({}: not at all); absent: not tuned",
    )
    study: TuningRecord


#: a tuned-hyperparameters file is a few hundred bytes; anything near this is not one
MAX_TUNED_FILE_BYTES = 256 * 1024


def _read_tuned(base: Any, rel: str, source: str, where: str) -> TunedFile:
    if base is None:
        raise ScenarioError(source, where, rel, "a tuned file needs a scenario file to be relative to")
    target = base
    for part in Path(rel).parts:
        target = target / part
    try:
        if not target.is_file():
            raise FileNotFoundError(rel)
        raw = target.read_bytes()[: MAX_TUNED_FILE_BYTES + 1]
        if len(raw) > MAX_TUNED_FILE_BYTES:
            raise ValueError(f"larger than {MAX_TUNED_FILE_BYTES // 1024} KiB")
        text = raw.decode("utf-8")
    except (OSError, ValueError) as exc:
        why = "no such file" if isinstance(exc, FileNotFoundError) else f"cannot read it ({exc})"
        raise ScenarioError(
            source, where, rel, f"{why}; give the YAML file `fieldrl tune` wrote, relative to the scenario"
        ) from None
    data = load_yaml(text, f"{source} -> {rel}")
    check_finite(data, f"{source} -> {rel}")
    return _validate(TunedFile, data, f"{source} -> {rel}")


def _resolve_tuned(scenario: Scenario, source: str, base: Any) -> Scenario:
    """Merge every learned entry's ``tuned`` file into it; the result no longer needs the file."""
    if not any(e.tuned for e in scenario.policies.learned):
        return scenario
    data = scenario.model_dump()
    for i, entry in enumerate(data["policies"]["learned"]):
        if not entry["tuned"]:
            continue
        wrote_n_envs = "n_envs" in scenario.policies.learned[i].model_fields_set
        where = f"policies.learned[{i}].tuned"
        tuned = _read_tuned(base, entry["tuned"], source, where)
        if tuned.algorithm != entry["algorithm"]:
            raise ScenarioError(
                source,
                where,
                entry["tuned"],
                f"tuned for algorithm {tuned.algorithm}, but this entry is {entry['algorithm']}",
            )
        written = {**entry["hyperparameters"], **({"n_envs": entry["n_envs"]} if wrote_n_envs else {})}
        written |= {f"params.{k}": v for k, v in entry["params"].items()}
        replacing = {**tuned.hyperparameters, **({} if tuned.n_envs is None else {"n_envs": tuned.n_envs})}
        replacing |= {f"params.{k}": v for k, v in tuned.params.items()}
        if tuned.fine_tune is not None:
            written_fine = FineTune.model_validate(entry["fine_tune"] or {}).model_dump(exclude_defaults=True)
            tuned_fine = tuned.fine_tune.model_dump(exclude_defaults=True)
            if entry["fine_tune"] is not None:
                written["fine_tune"] = written_fine
            replacing["fine_tune"] = tuned_fine
            entry["fine_tune"] = tuned.fine_tune.model_dump()
        replaced = sorted(k for k, v in replacing.items() if k in written and written[k] != v)
        kept = {k: written[k] for k in replaced}
        entry["hyperparameters"] = {**entry["hyperparameters"], **tuned.hyperparameters}
        entry["params"] = {**entry["params"], **tuned.params}
        if tuned.n_envs is not None:
            entry["n_envs"] = tuned.n_envs
        entry["tuning"] = {
            **tuned.study.model_dump(),
            "file": entry["tuned"],
            "replaced": replaced,
            "written": kept,
        }
        entry["tuned"] = None
    return _validate(Scenario, data, source)


def _resolve_files(scenario: Scenario, source: str, base: Any) -> Scenario:
    """The domain's file params (``Domain.file_params``) made absolute against ``base``.

    ``base`` is the scenario file's folder (the working folder when there is none), so a run
    folder's snapshot of the result names the same files wherever it is read from.
    """
    from fieldrl.domains import domain_names

    if scenario.domain not in domain_names():
        return scenario  # refused, by name, with the domain parts
    domain = _installed_domain(scenario.domain, source)
    if not domain.file_params:
        return scenario
    folder = Path(str(base)) if base is not None else Path.cwd()
    data = scenario.model_dump()
    params = domain.resolve_files(data["params"], folder)
    variants = {name: domain.resolve_files(v, folder) for name, v in data["variants"].items()}
    if params == data["params"] and variants == data["variants"]:
        return scenario
    data["params"], data["variants"] = params, variants
    return _validate(Scenario, data, source)


def parse_scenario(text: str, source: str = "<scenario>", base: Any = None, build: bool = True) -> Scenario:
    """Validate a scenario's YAML text; ``base`` is the folder its relative paths start from.

    ``build``: as for :func:`load_scenario`.
    """
    data = load_yaml(text, source)  # size, nesting and alias limits; syntax errors with their line
    if not isinstance(data, dict):
        raise ScenarioError(source, "", MISSING, "a scenario must be a YAML mapping (key: value)")
    check_finite(data, source)
    scenario = _resolve_tuned(_validate(Scenario, data, source), source, base)
    scenario = _resolve_files(scenario, source, base)
    _check_sizes(scenario, source)
    _validate_domain_parts(scenario, source, build)
    return scenario


def _check_sizes(scenario: Scenario, source: str) -> None:
    """Counts that size the run's memory (results table, jobs, bootstrap draws) stay bounded."""
    variants, learned = len(scenario.variant_names), len(scenario.policies.learned)
    n_train, n_eval = len(scenario.seeds.train), len(scenario.seeds.eval)
    runs = len(scenario.policies.heuristics) + learned * n_train
    episodes = n_eval * scenario.episodes_per_seed * runs * variants
    if episodes > MAX_EVAL_EPISODES:
        raise ScenarioError(
            source,
            "seeds.eval",
            f"{n_eval:,} seeds",
            f"{episodes:,} evaluation episodes (eval seeds x episodes_per_seed x policies and their "
            f"training seeds x variants); at most {MAX_EVAL_EPISODES:,}",
        )
    if variants * learned * n_train > MAX_TRAIN_JOBS:
        raise ScenarioError(
            source,
            "seeds.train",
            f"{n_train:,} seeds",
            f"{variants * learned * n_train:,} training jobs (variants x learned policies x train seeds); "
            f"at most {MAX_TRAIN_JOBS:,}",
        )
    draws = scenario.report.bootstrap_samples * n_eval
    if draws > MAX_BOOTSTRAP_DRAWS:
        raise ScenarioError(
            source,
            "report.bootstrap_samples",
            scenario.report.bootstrap_samples,
            f"x {n_eval:,} eval seeds = {draws:,} bootstrap draws; at most {MAX_BOOTSTRAP_DRAWS:,}",
        )


def _validate(model: type[BaseModel], data: Any, source: str, prefix: str = "") -> Any:
    try:
        validated = model.model_validate(data)
    except ValidationError as exc:
        raise _scenario_error(exc, model, data, source, prefix) from None
    check_finite(validated.model_dump(), source, prefix)  # e.g. the string "inf" read as a float
    return validated


def _loc_text(prefix: str, loc: tuple[Any, ...]) -> str:
    text = prefix
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else str(part)
    return text


def _scenario_error(
    exc: ValidationError, model: type[BaseModel], data: Any, source: str, prefix: str
) -> ScenarioError:
    err = exc.errors()[0]
    loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and "[" in p))  # drop union tags
    field = _loc_text(prefix, loc)
    value = err.get("input", MISSING)
    if err["loc"] and err["loc"][-1] == "[key]":  # a mapping's key: name the mapping, show the key
        field = _loc_text(prefix, loc[:-1]) + " (a key)"
    message = err["msg"].removeprefix("Value error, ")
    if err["type"] == "extra_forbidden":
        allowed = _fields_at(model, loc[:-1])
        message = "unknown field" + (f"; allowed fields: {', '.join(allowed)}" if allowed else "")
        value = MISSING
    elif err["type"] == "missing":
        message = "required field is missing"
        value = MISSING
    extra = len(exc.errors()) - 1
    if extra:
        message += f" ({extra} more problem{'s' if extra > 1 else ''} after this one)"
    return ScenarioError(source, field, value, message)


def _fields_at(model: type[BaseModel], loc: tuple[Any, ...]) -> list[str]:
    """Field names of the pydantic model found by walking ``loc`` from ``model``."""
    current: Any = model
    for part in loc:
        if isinstance(part, int):
            continue
        if not (inspect.isclass(current) and issubclass(current, BaseModel)):
            return []
        info = current.model_fields.get(part)
        if info is None:
            return []
        current = _inner_model(info.annotation)
    if inspect.isclass(current) and issubclass(current, BaseModel):
        return list(current.model_fields)
    return []


def _inner_model(annotation: Any) -> Any:
    if inspect.isclass(annotation) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()) or ():
        found = _inner_model(arg)
        if found is not None:
            return found
    return None


def _check_variant_names(scenario: Scenario, names: list[str] | None, source: str, where: str) -> None:
    """Every name in ``names`` (a list at ``where``) is one of the scenario's variants."""
    for j, v in enumerate(names or []):
        if v not in scenario.variant_names:
            raise ScenarioError(
                source, f"{where}[{j}]", v, "unknown variant; allowed: " + ", ".join(scenario.variant_names)
            )


def _check_policy_params(
    scenario: Scenario, domain: Any, entry: LearnedEntry, source: str, where: str
) -> None:
    """A learned entry's own ``params`` may set only the domain's ``policy_params`` (its controller's
    design); every variant with them over it must still be valid params."""
    for key, value in entry.params.items():
        if key not in domain.policy_params:
            allowed = ", ".join(sorted(domain.policy_params)) or f"none (domain {domain.name} has none)"
            raise ScenarioError(
                source,
                f"{where}.params.{key}",
                value,
                "not a setting a single policy may choose (it would change the world the policies are "
                f"compared in); allowed: {allowed}",
            )
    if entry.params:
        for variant in scenario.variants_of(entry):
            _validate(
                domain.params_model, scenario.policy_params(variant, entry.label), source, f"{where}.params"
            )


def _check_written(scenario: Scenario, domain: Any, entry: LearnedEntry, source: str, where: str) -> None:
    """What the scenario wrote for settings its tuned file replaces is checked as written: ``gamma: 7.5``
    is a typo whatever replaces it, and the user should hear of it rather than have it ignored."""
    from fieldrl.policies.registry import check_hyperparameters

    if entry.tuning is None or not entry.tuning.written:
        return
    written = entry.tuning.written
    replaced_by = f"(as written; the tuned file {entry.tuning.file} replaces it)"
    hyper = {k: v for k, v in written.items() if k != "n_envs" and not k.startswith("params.")}
    problem = check_hyperparameters(entry.algorithm, hyper)
    if problem:
        key, allowed = problem
        raise ScenarioError(source, f"{where}.hyperparameters.{key}", hyper[key], f"{allowed} {replaced_by}")
    own = {k.removeprefix("params."): v for k, v in written.items() if k.startswith("params.")}
    if own:
        for variant in scenario.variants_of(entry):
            params = {**scenario.policy_params(variant, entry.label), **own}
            try:
                domain.params_model.model_validate(params)
            except ValidationError as exc:
                error = _scenario_error(exc, domain.params_model, params, source, f"{where}.params")
                raise ScenarioError(
                    source, error.field, error.value, f"{error.allowed} {replaced_by}"
                ) from None


def stressed_params(scenario: Scenario) -> list[dict[str, Any]]:
    """The raw params a stress test moves: each stressed setting's, and each learned entry's own over them."""
    return [
        scenario.policy_params(variant, entry)
        for variant in scenario.stressed_variants
        for entry in [None, *(e.label for e in scenario.policies.learned if e.runs_in(variant))]
    ]


def stress_points(
    scenario: Scenario, domain: Any, name: str, points: list[float] | None
) -> tuple[list[float], tuple[str, Any, str] | None]:
    """The points of stress axis ``name`` (``points``, else the domain's), and the first problem with
    them as ``(part, value, what is allowed)`` (``part``: ``axis`` or ``points[k]``), or None: the axis
    is the domain's, every point lies in its range, and the world at every point is valid params in
    every stressed setting."""
    axes = domain.stress_axes
    if name not in axes:
        allowed = ", ".join(sorted(axes)) or f"none (domain {domain.name} has no stress axes)"
        return [], ("axis", name, f"unknown stress axis; allowed: {allowed}")
    axis = axes[name]
    chosen = list(axis.points if points is None else points)
    every_params = stressed_params(scenario)
    why = next((why for raw in every_params if (why := axis.problem(raw))), None)
    if why:
        return chosen, ("axis", name, f"does not apply here: {why}")
    for k, value in enumerate(chosen):
        if not axis.low <= value <= axis.high:
            unit = f" {axis.unit}" if axis.unit else ""
            allowed = f"allowed: {fmt(axis.low)} to {fmt(axis.high)}{unit}"
            return chosen, (f"points[{k}]", value, f"outside the range of {axis.label.lower()}; {allowed}")
        for raw in every_params:
            world = axis.apply(raw, value)
            try:
                domain.params_model.model_validate(world)
            except ValidationError as exc:
                error = _scenario_error(exc, domain.params_model, world, "", "params")
                return chosen, (
                    f"points[{k}]",
                    value,
                    f"at {name} = {value:g}, {error.field} = {short_repr(error.value)}: {error.allowed}",
                )
    return chosen, None


def _check_heuristic_label(scenario: Scenario, label: str, source: str, where: str) -> None:
    labels = [h.label for h in scenario.policies.heuristics]
    if label not in labels:
        allowed = ", ".join(labels) if labels else "none (add one under policies.heuristics)"
        raise ScenarioError(source, where, label, f"heuristics in this scenario: {allowed}")


def _check_shield(scenario: Scenario, domain: Any, shield: Shield, source: str, where: str) -> None:
    """A shield names a heuristic of this scenario whose kind the domain can shield with."""
    _check_heuristic_label(scenario, shield.heuristic, source, where)
    use = next(h.use for h in scenario.policies.heuristics if h.label == shield.heuristic)
    if use not in domain.shield_heuristics:
        kinds = ", ".join(domain.shield_heuristics)
        if not kinds:
            raise ScenarioError(
                source, where, shield.heuristic, f"the {domain.name} domain has no runtime shield"
            )
        raise ScenarioError(
            source, where, shield.heuristic, f"a shield must be a heuristic of kind {kinds}, not {use}"
        )


def _check_imitable(scenario: Scenario, domain: Any, label: str, source: str, where: str) -> None:
    """A warm start copies a heuristic's decisions: one handing the simulator a program or plan has none."""
    uses = {h.label: h.use for h in scenario.policies.heuristics}
    if domain.heuristics[uses[label]].imitable:
        return
    allowed = [lab for lab, use in uses.items() if domain.heuristics[use].imitable]
    raise ScenarioError(
        source,
        where,
        label,
        "it hands the simulator its own program or plan instead of choosing actions, so it makes no "
        "decisions to copy; heuristics that do here: " + (", ".join(allowed) or "none"),
    )


def _check_anchoring(
    scenario: Scenario, domain: Any, params: Any, entry: LearnedEntry, source: str, where: str, build: bool
) -> None:
    """A warm start or a residual needs a heuristic of this scenario and an algorithm that fits."""
    from fieldrl.policies.signatures import IMITABLE

    if entry.imitate is not None:
        _check_heuristic_label(scenario, entry.imitate.heuristic, source, f"{where}.imitate.heuristic")
        _check_imitable(scenario, domain, entry.imitate.heuristic, source, f"{where}.imitate.heuristic")
        if entry.algorithm not in IMITABLE:
            raise ScenarioError(
                source,
                f"{where}.imitate",
                entry.algorithm,
                f"imitation warm starts {', '.join(IMITABLE)} only",
            )
    if entry.shield is not None:
        _check_shield(scenario, domain, entry.shield, source, f"{where}.shield.heuristic")
    if entry.fine_tune is not None:
        _check_fine_tune(scenario, entry, source, f"{where}.fine_tune")
    if entry.residual is None:
        return
    _check_heuristic_label(scenario, entry.residual.heuristic, source, f"{where}.residual.heuristic")
    if entry.imitate is not None:
        raise ScenarioError(
            source,
            f"{where}.imitate",
            entry.imitate.heuristic,
            "a residual policy already starts from its heuristic's actions; give imitate or residual",
        )
    if not build:
        return
    venv = domain.make_train_vec_env(params, 1, 0)
    space = venv.action_space
    venv.close()
    if type(space).__name__ != "Box":
        raise ScenarioError(
            source,
            f"{where}.residual",
            domain.name,
            f"residual corrections need continuous (Box) actions; this domain's are {type(space).__name__}",
        )


def _check_fine_tune(scenario: Scenario, entry: LearnedEntry, source: str, where: str) -> None:
    """Fine-tuning keeps a warm start: it needs one, and an actor-critic algorithm to act on."""
    from fieldrl.policies.signatures import FINE_TUNABLE, PULLABLE

    spec = entry.fine_tune
    assert spec is not None
    if entry.imitate is None and entry.residual is None:
        raise ScenarioError(
            source,
            where,
            spec.model_dump(exclude_defaults=True),
            "fine-tuning keeps a warm start; give imitate (or residual) too",
        )
    if entry.algorithm not in FINE_TUNABLE:
        raise ScenarioError(
            source,
            where,
            entry.algorithm,
            f"fine-tuning needs an actor-critic algorithm; allowed: {', '.join(FINE_TUNABLE)}",
        )
    for name, part in (("pull", spec.pull), ("jump_start", spec.jump_start)):
        if part is None:
            continue
        if entry.imitate is None:
            raise ScenarioError(
                source,
                f"{where}.{name}",
                part.model_dump(),
                "it uses the behaviour clone; give imitate too",
            )
        if entry.algorithm not in PULLABLE:
            raise ScenarioError(
                source,
                f"{where}.{name}",
                entry.algorithm,
                f"it works on on-policy rollouts; allowed: {', '.join(PULLABLE)}",
            )
    if spec.jump_start is not None and not scenario.seeds.validation:
        raise ScenarioError(
            source,
            f"{where}.jump_start",
            spec.jump_start.model_dump(),
            "its horizon falls when the learner's validation score reaches the clone's; give "
            "seeds.validation",
        )
    if spec.critic_warmup + spec.actor_ramp >= 1:
        raise ScenarioError(
            source,
            f"{where}.critic_warmup",
            spec.critic_warmup,
            f"warm-up plus ramp ({spec.critic_warmup} + {spec.actor_ramp}) must leave some of "
            "train_steps for the actor at its full learning rate (sum < 1)",
        )


def _construction_problem(
    scenario: Scenario, domain: Any, params: Any, entry: LearnedEntry, budgets: dict[str, LearnedEntry]
) -> tuple[str | None, Any, str] | None:
    """Build the entry's model on a one-env copy of its training env (see ``construction_problem``)."""
    from fieldrl.policies.learned import construction_problem
    from fieldrl.scenario_checks import training_vec_env

    specs = {budget: applied.training_spec() for budget, applied in budgets.items()}
    return construction_problem(
        training_vec_env(scenario, domain, params, entry), entry.training_spec(), specs
    )


def _budget_problem(
    entry: LearnedEntry, budgets: dict[str, LearnedEntry]
) -> tuple[str | None, Any, str] | None:
    """The budget checks without building anything: one env per parallel env (a multi-agent env's
    agent slots, which only building it tells, can only make a rollout longer)."""
    from fieldrl.policies.feasibility import training_problem

    for budget, applied in budgets.items():
        problem = training_problem(
            applied.algorithm, applied.hyperparameters, applied.n_envs, 1, applied.train_steps
        )
        if problem:
            key, value, text = problem
            return key, value, text + ("" if budget == "full" else f" (budget {budget})")
    return None


def _budgeted(scenario: Scenario, budget: str, source: str) -> Scenario:
    """The scenario under ``budget``, with a problem in the budget named as the budget's field."""
    try:
        return scenario.with_budget(budget)
    except ValidationError as exc:
        raise _scenario_error(exc, Scenario, {}, source, f"budgets.{budget} ->") from None


def _validate_domain_parts(scenario: Scenario, source: str, build: bool = True) -> None:
    """Check what only the named domain and the algorithm registry know (``build``: see load_scenario)."""
    from fieldrl.domains.base import SIMULATOR_CHECKS

    token = SIMULATOR_CHECKS.set(build)
    try:
        _check_domain_parts(scenario, source, build)
    finally:
        SIMULATOR_CHECKS.reset(token)


def _installed_domain(name: str, source: str) -> Any:
    """The registered domain ``name``; a ``ScenarioError`` on ``domain`` when its extra is missing."""
    from fieldrl.domains import DomainUnavailableError, get_domain

    try:
        return get_domain(name)
    except DomainUnavailableError as exc:
        raise ScenarioError(source, "domain", name, exc.advice) from None


def _check_domain_parts(scenario: Scenario, source: str, build: bool) -> None:
    from fieldrl.domains import domain_names
    from fieldrl.policies.registry import ALGORITHM_NAMES, check_hyperparameters
    from fieldrl.scenario_checks import check_heuristics

    if scenario.domain not in domain_names():
        raise ScenarioError(
            source,
            "domain",
            scenario.domain,
            f"unknown domain; allowed: {', '.join(domain_names())}",
        )
    domain = _installed_domain(scenario.domain, source)
    _validate(domain.params_model, scenario.params, source, "params")
    for name, overrides in scenario.variants.items():
        _validate(domain.params_model, scenario.variant_params(name), source, f"variants.{name}")
        del overrides
    for i, entry in enumerate(scenario.policies.heuristics):
        where = f"policies.heuristics[{i}]"
        if entry.use not in domain.heuristics:
            raise ScenarioError(
                source,
                f"{where}.use",
                entry.use,
                f"unknown heuristic for domain {domain.name}; allowed: "
                + ", ".join(sorted(domain.heuristics)),
            )
        _validate(domain.heuristics[entry.use].settings_model, entry.settings, source, f"{where}.settings")
    check_heuristics(scenario, source)  # heuristic x params combinations the domain refuses; builds each
    for name in scenario.variant_names:
        try:
            domain.held_out_params(
                domain.params_model.model_validate(scenario.variant_params(name)), scenario.seeds.eval
            )
        except ValueError as exc:
            where = "params" if name not in scenario.variants else f"variants.{name}"
            raise ScenarioError(source, where, MISSING, str(exc)) from None
    for budget_name, budget in scenario.budgets.items():
        for i, entry in enumerate(scenario.policies.learned):
            kept = budget.variants
            if kept is not None and entry.variants and not set(entry.variants) & set(kept):
                raise ScenarioError(
                    source,
                    f"budgets.{budget_name}.variants",
                    budget.variants,
                    f"leaves {entry.label} no setting to run in (policies.learned[{i}].variants: "
                    f"{', '.join(entry.variants)}); include one of them",
                )
    for i, entry in enumerate(scenario.policies.learned):
        where = f"policies.learned[{i}]"
        if entry.algorithm not in ALGORITHM_NAMES:
            raise ScenarioError(
                source,
                f"{where}.algorithm",
                entry.algorithm,
                "unknown algorithm; allowed: " + ", ".join(sorted(ALGORITHM_NAMES)),
            )
        _check_variant_names(scenario, entry.variants, source, f"{where}.variants")
        _check_policy_params(scenario, domain, entry, source, where)
        first = scenario.variants_of(entry)[0]
        first_params = domain.params_model.model_validate(scenario.policy_params(first, entry.label))
        _check_anchoring(scenario, domain, first_params, entry, source, where, build)
        problem = check_hyperparameters(entry.algorithm, entry.hyperparameters)
        if problem:
            key, allowed = problem
            raise ScenarioError(source, f"{where}.hyperparameters.{key}", entry.hyperparameters[key], allowed)
        _check_written(scenario, domain, entry, source, where)
        budgets = {"full": entry}
        for budget_name in scenario.budgets:
            budgets[budget_name] = _budgeted(scenario, budget_name, source).policies.learned[i]
        built = (
            _construction_problem(scenario, domain, first_params, entry, budgets)
            if build
            else _budget_problem(entry, budgets)
        )
        if built:
            key, value, problem = built
            if key is not None:
                raise ScenarioError(source, f"{where}.hyperparameters.{key}", value, problem)
            shown = {"algorithm": entry.algorithm, "policy": entry.policy, **entry.hyperparameters}
            raise ScenarioError(source, where, shown, problem)
    for budget_name, budget in scenario.budgets.items():
        _check_variant_names(scenario, budget.variants, source, f"budgets.{budget_name}.variants")
    if scenario.stress is not None:
        _check_variant_names(scenario, scenario.stress.variants, source, "stress.variants")
        for j, wanted in enumerate(scenario.stress.axes):
            _, problem = stress_points(scenario, domain, wanted.axis, wanted.points)
            if problem:
                part, value, allowed = problem
                raise ScenarioError(source, f"stress.axes[{j}].{part}", value, allowed)
    labels = [e.label for e in [*scenario.policies.heuristics, *scenario.policies.learned]]
    for j, pair in enumerate(scenario.report.comparisons):
        for role in ("policy", "baseline"):
            name = getattr(pair, role)
            if name not in labels:
                raise ScenarioError(
                    source,
                    f"report.comparisons[{j}].{role}",
                    name,
                    "not a policy of this scenario; allowed: " + ", ".join(labels),
                )
    rankable = [k.name for k in domain.kpis if not k.wall_clock]
    for field in ("primary_kpi", "selection_kpi"):
        chosen = getattr(scenario.report, field)
        if chosen is not None and chosen not in rankable:
            timed = chosen in [k.name for k in domain.kpis]
            why = "a computation time cannot decide 'best'" if timed else ""
            raise ScenarioError(
                source,
                f"report.{field}",
                chosen,
                (why + "; " if why else "unknown KPI; ") + "allowed: " + ", ".join(rankable),
            )
