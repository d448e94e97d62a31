"""What a scenario asks of the machine: steps to train, episodes to play, and a rough time.

Counted from the scenario alone (no domain is imported), so ``fieldrl list`` and ``validate`` can
say it at once. The time is an order of magnitude, not a promise: it multiplies the counts by each
domain's speed as measured with ``--jobs 1`` on a busy 2-core machine (its ``Domain.speed``, read
from the domain's source: :func:`~fieldrl.domains.speed.declared_speed`); bigger maps, longer
episodes or another algorithm move it by a factor of two either way.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from fieldrl.domains.speed import DEFAULT_SPEED, Speed, declared_speed
from fieldrl.policies.algorithms import OFF_POLICY, TABLE
from fieldrl.scenario import BUDGET_NAMES, Scenario


def _cost(entry: Any) -> tuple[bool, float]:
    """(off-policy?, cost of one env step relative to the domain's measured speed) for a learned entry."""
    factor = RECURRENT_COST.get(entry.algorithm, 1.0)
    if entry.algorithm not in OFF_POLICY:
        return False, factor
    hp = entry.hyperparameters
    freq = hp.get("train_freq", 1)
    freq = freq[0] if isinstance(freq, list | tuple) else freq
    updates = float(hp.get("gradient_steps", 1)) / (max(1, int(freq)) * entry.n_envs)
    if updates < 0:  # SB3's gradient_steps=-1: as many as env steps collected
        updates = 1.0
    return True, factor * updates / REFERENCE_UPDATES_PER_STEP


#: learners slower per step than the speed measured for their kind (:attr:`Speed.on_policy`, or
#: :attr:`Speed.off_policy` for the algorithm table's ``OFF_POLICY``), and by how much: the table's
#: ``cost`` (recurrent learners pass sequences through an LSTM)
RECURRENT_COST = {a.name: a.cost for a in TABLE if a.cost != 1.0}
#: gradient steps per environment step that :attr:`Speed.off_policy` was measured at
REFERENCE_UPDATES_PER_STEP = 0.25
#: start-up (imports, worker processes) and the report, once per run
FIXED_S = 10.0
#: drawing the report's side-by-side replay (about 120 frames), once per run with two policies to show
REPLAY_DRAW_S = 15.0
#: held-out episodes per setting the decision differences replay (``evaluation.decisions.MAX_EPISODES``;
#: estimates sits beside evaluation, so the number is repeated here and a test keeps the two equal)
DECISION_EPISODES = 12


@dataclass(frozen=True)
class Workload:
    """Counts for one run: what ``fieldrl run`` would train and play."""

    settings: int
    training_runs: int
    steps_by_policy: dict[str, int]
    off_policy_steps: float
    eval_episodes: int
    validation_episodes: int
    on_policy_steps: float = 0.0
    #: held-out episodes played again by the stress test (``stress:``), every point of every axis
    stress_episodes: int = 0
    #: held-out episodes played again for the decision differences and the replay
    explain_episodes: int = 0

    @property
    def train_steps(self) -> int:
        return sum(self.steps_by_policy.values())

    def seconds(self, domain: str) -> float:
        """Rough wall time with ``--jobs 1`` in domain ``domain`` (its measured speed, or the default)."""
        speed = speed_of(domain)
        episodes = (
            self.eval_episodes + self.validation_episodes + self.stress_episodes + self.explain_episodes
        )
        train = self.on_policy_steps / speed.on_policy + self.off_policy_steps / speed.off_policy
        replay = REPLAY_DRAW_S if self.explain_episodes else 0.0
        return FIXED_S + replay + train + episodes * speed.episode_s


def speed_of(domain: str) -> Speed:
    """Domain ``domain``'s measured speed (its ``Domain.speed``, read without importing it), or
    :data:`~fieldrl.domains.speed.DEFAULT_SPEED` where it declares none."""
    return declared_speed(domain) or DEFAULT_SPEED


def workload(scenario: Scenario) -> Workload:
    """Steps and episodes of ``scenario`` as it stands (apply a budget first with ``with_budget``)."""
    settings = len(scenario.variant_names)
    n_train = len(scenario.seeds.train)
    learned = scenario.policies.learned
    where = {e.label: len(scenario.variants_of(e)) for e in learned}  # settings each entry runs in
    steps_by_policy = {e.label: where[e.label] * n_train * e.train_steps for e in learned}
    policy_runs = settings * len(scenario.policies.heuristics) + sum(where.values()) * n_train
    eval_episodes = policy_runs * len(scenario.seeds.eval) * scenario.episodes_per_seed
    n_validation = len(scenario.seeds.validation or [])
    per_training = {e.label: math.ceil(e.train_steps / e.validation_interval) + 1 for e in learned}
    validations = sum(where[label] * n for label, n in per_training.items())
    heuristics_once = len(scenario.policies.heuristics) if learned else 0
    weighted = {True: 0.0, False: 0.0}  # env steps weighted by their cost, off-policy and on-policy
    for e in learned:
        off, cost = _cost(e)
        weighted[off] += steps_by_policy[e.label] * cost
    return Workload(
        settings=settings,
        training_runs=sum(where.values()) * n_train,
        steps_by_policy=steps_by_policy,
        off_policy_steps=weighted[True],
        on_policy_steps=weighted[False],
        eval_episodes=eval_episodes,
        validation_episodes=n_validation * (validations * n_train + settings * heuristics_once),
        stress_episodes=_stress_episodes(scenario),
        explain_episodes=_explain_episodes(scenario),
    )


def _explain_episodes(scenario: Scenario) -> int:
    """Held-out episodes the decision differences (per setting with a learned policy) and the report's
    replay (two) play again."""
    if not scenario.policies.learned:
        return 0
    per_setting = min(DECISION_EPISODES, len(scenario.seeds.eval) * scenario.episodes_per_seed)
    return per_setting * len(scenario.variant_names) + 2


def _stress_episodes(scenario: Scenario) -> int:
    """Held-out episodes the scenario's stress test plays: every point, stressed setting and policy run."""
    if scenario.stress is None:
        return 0
    points = sum(len(a.points) for a in scenario.stress.axes if a.points is not None)
    if any(a.points is None for a in scenario.stress.axes):  # the domain's default points: import it
        from fieldrl.domains import get_domain

        axes = get_domain(scenario.domain).stress_axes
        points += sum(len(axes[a.axis].points) for a in scenario.stress.axes if a.points is None)
    n_train = len(scenario.seeds.train)
    runs = sum(
        len(scenario.policies.heuristics) + n_train * sum(e.runs_in(v) for e in scenario.policies.learned)
        for v in scenario.stressed_variants
    )
    return points * runs * len(scenario.seeds.eval) * scenario.episodes_per_seed


def duration_text(seconds: float) -> str:
    """``≈ 40 s``, ``≈ 3 min``, ``≈ 2.5 h``, ``≈ 3 days``: one or two significant figures."""
    if seconds < 90:
        return f"≈ {max(10, round(seconds, -1)):.0f} s"
    if seconds < 90 * 60:
        return f"≈ {seconds / 60:.0f} min"
    if seconds < 48 * 3600:
        hours = seconds / 3600
        return f"≈ {hours:.1f} h" if hours < 10 else f"≈ {hours:.0f} h"
    return f"≈ {seconds / 86400:.0f} days"


@dataclass(frozen=True)
class Overview:
    """A built-in scenario as ``fieldrl list`` shows it."""

    name: str
    path: Path
    summary: str
    times: dict[str, str]


def first_sentence(text: str, limit: int = 130) -> str:
    """The description's first sentence, shortened to ``limit`` characters at a word."""
    flat = " ".join(text.split())
    end = flat.find(". ")
    sentence = flat if end < 0 else flat[: end + 1]
    if len(sentence) <= limit:
        return sentence
    return sentence[: sentence.rfind(" ", 0, limit - 1)] + " …"


def overview(name: str, path: Path) -> Overview:
    """Description and estimated time per budget of a built-in scenario, read without its domain.

    Built-in files are valid (tests load each fully); here only their structure is read.
    """
    data: Any = yaml.safe_load(path.read_text(encoding="utf-8"))
    scenario = Scenario.model_validate(data)
    times = {}
    for budget in BUDGET_NAMES:
        if budget == "full" or budget in scenario.budgets:
            load = workload(scenario.with_budget(budget))
            times[budget] = duration_text(load.seconds(scenario.domain))
    return Overview(name, path, first_sentence(scenario.description), times)
