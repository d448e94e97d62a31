"""Held-out episodes replayed through an exported bundle, their KPIs compared with the run's evaluation.

``fieldrl export`` checks the bundle's actions against the torch policy on a training-seed episode. This
module answers the question a user asks next: *does the bundle, run in the world the run evaluated it in,
give the numbers the report gives?* It plays held-out episodes of the run's scenario exactly as the
evaluation runner plays them (:func:`fieldrl.evaluation.runner.run_eval_job`): the same setting and
params, the held-out params (:meth:`~fieldrl.domains.base.Domain.held_out_params`), the same environment
seed for each episode (:func:`~fieldrl.evaluation.runner.episode_seed`), batched and scored by the
runner's own :func:`~fieldrl.evaluation.runner.run_episodes` (``Domain.episode_kpis``), but every action is
the bundle's: the network is reached only through :class:`fieldrl.runtime.Bundle` (observations and
action masks as the environment gives them, a recurrent bundle's state kept in a
:class:`~fieldrl.runtime.Stream`). Nothing of torch or SB3 acts.

The KPIs of each episode are then compared with the run's ``results.parquet`` rows of the same policy,
setting, training seed, held-out seed and episode: equal for discrete actions (the same actions give the
same episode), within :data:`RTOL` for continuous ones (the bundle's actions may differ from torch's by
float rounding, at most 1e-5 by the export check, and the simulator carries that difference on). Machine
timings (wall-clock KPIs) are not compared.

:func:`fieldrl.export.replay_bundle` checks a bundle folder against its run; ``fieldrl export`` calls
:func:`replay_held_out` before it writes a bundle (``--replay N``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fieldrl import runtime
from fieldrl.errors import FieldrlError
from fieldrl.policies.base import Policy

#: held-out episodes ``fieldrl export`` replays by default
DEFAULT_EPISODES = 1
#: relative tolerance of a continuous-action bundle's KPIs against the run's (see :func:`_close`): the
#: export check allows 1e-5 between the bundle's and torch's actions; measured, the replayed KPIs of the
#: tests' continuous policies differ from the run's by at most 3.2e-7 relative (docs/deploying.md)
RTOL = 1e-5
#: absolute floor of that tolerance, for KPIs at or near zero
ATOL = 1e-8


class NothingToReplay(FieldrlError):
    """The run has no held-out episode of this policy to replay (not evaluated, or every one failed)."""


class BundlePolicy(Policy):
    """A bundle behind the evaluation's Policy protocol: batched observations (a row per agent for
    multi-agent domains) and the environments' action masks in, the bundle's actions out; a recurrent
    bundle's state is kept per episode row and reset where an episode starts, as ``SB3Policy`` does.

    :param name: the policy's label in the run.
    :param bundle: the loaded bundle; nothing else decides.
    """

    def __init__(self, name: str, bundle: runtime.Bundle) -> None:
        self.name = name
        self.bundle = bundle
        self.stream = bundle.stream()
        self._envs: Any = None

    def reset(self, n_envs: int) -> None:
        self.stream.reset()

    def bind_envs(self, envs: Any) -> None:
        self._envs = envs

    def act(self, obs: np.ndarray, episode_start: np.ndarray) -> np.ndarray:
        obs = np.asarray(obs)
        lead = obs.shape[: obs.ndim - len(self.bundle.obs_shape)]
        mask = None
        if self.bundle.mask_size is not None:
            if self._envs is None or not hasattr(self._envs, "action_masks"):
                raise FieldrlError(
                    f"{self.name}: the bundle needs action masks; these environments give none"
                )
            mask = np.asarray(self._envs.action_masks(), dtype=bool).reshape(*lead, -1)
        return self.stream.act(obs, mask, np.asarray(episode_start, dtype=bool))


@dataclass
class ReplayCheck:
    """What a replay found: per episode the run's KPIs and the bundle's, and whether they agree."""

    setting: str
    policy: str
    train_seed: int
    continuous: bool
    #: ``(held-out seed, episode)`` of each replayed episode, in the evaluation's order
    cases: list[tuple[int, int]]
    #: KPI names compared (the run's metrics without machine timings)
    metrics: list[str]
    #: ``{metric: [run's value per case]}`` and the same for the bundle
    run: dict[str, list[float]]
    bundle: dict[str, list[float]]
    #: held-out episodes of this policy and seed that failed in the run's evaluation (not replayable)
    failed_in_run: int = 0
    mismatches: list[dict[str, Any]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.mismatches

    @property
    def max_abs_difference(self) -> float:
        worst = 0.0
        for name in self.metrics:
            for a, b in zip(self.run[name], self.bundle[name], strict=True):
                if not (math.isnan(a) and math.isnan(b)):
                    worst = max(worst, abs(a - b))
        return worst

    def summary(self) -> dict[str, Any]:
        """Plain data for the model card (``held_out_replay``)."""
        return {
            "episodes": len(self.cases),
            "cases": [{"eval_seed": s, "episode": e} for s, e in self.cases],
            "metrics": self.metrics,
            "rule": rule(self.continuous),
            "max_abs_difference": self.max_abs_difference,
            "mismatches": self.mismatches,
            "failed_in_run": self.failed_in_run,
            "equal": self.ok,
            "sentence": self.sentence(),
        }

    def sentence(self) -> str:
        """One line saying what was replayed and what it found."""
        n = len(self.cases)
        what = f"{n} held-out episode{'s' if n != 1 else ''} ({_cases_text(self.cases)})"
        if self.ok:
            same = "the same KPIs" if not self.continuous else "the same KPIs within the tolerance"
            return (
                f"Replayed {what} through the bundle: {same} as the run's evaluation "
                f"({len(self.metrics)} KPIs, max |difference| {self.max_abs_difference:.3g})"
            )
        first = self.mismatches[0]
        return (
            f"Replayed {what} through the bundle: {len(self.mismatches)} KPI value(s) differ from the run's "
            f"evaluation (first: {first['metric']} of held-out seed {first['eval_seed']} episode "
            f"{first['episode']}: run {first['run']!r}, bundle {first['bundle']!r})"
        )


def rule(continuous: bool) -> str:
    """How the bundle's KPIs must agree with the run's, in words."""
    if not continuous:
        return "KPIs must be equal (discrete actions)"
    return f"KPIs must agree within {RTOL:g} relative, {ATOL:g} absolute (continuous actions)"


def _cases_text(cases: list[tuple[int, int]]) -> str:
    """``seed 100`` / ``seeds 100, 101, ...``, or ``seed/episode 10/0, 10/1`` where there are several
    episodes per held-out seed."""
    shown = cases[:5]
    more = ", ..." if len(cases) > 5 else ""
    if all(e == 0 for _, e in cases):
        return f"seed{'s' if len(cases) > 1 else ''} " + ", ".join(str(s) for s, _ in shown) + more
    return "seed/episode " + ", ".join(f"{s}/{e}" for s, e in shown) + more


def _close(a: float, b: float, continuous: bool) -> bool:
    """Whether KPI values ``a`` (the run's) and ``b`` (the bundle's) agree: NaN agrees with NaN."""
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    if not continuous:
        return a == b
    return abs(a - b) <= max(ATOL, RTOL * abs(a))


def replay_held_out(
    bundle: runtime.Bundle,
    folder: Any,
    scenario: Any,
    setting: str,
    policy: str,
    train_seed: int,
    episodes: int | None = DEFAULT_EPISODES,
) -> ReplayCheck:
    """Replay held-out episodes of an evaluated run through ``bundle`` and compare their KPIs with the
    run's results for ``policy`` (training seed ``train_seed``) in ``setting``.

    :param bundle: the bundle (loaded, or built in memory by the export); every action is its.
    :param folder: the run's :class:`~fieldrl.evaluation.store.RunFolder`.
    :param scenario: the run's validated scenario.
    :param episodes: how many held-out episodes, the first the evaluation played (an episode that failed
        in the run's evaluation has no KPIs and is passed over); None: every one.
    :return: the comparison (see :attr:`ReplayCheck.ok`); a :class:`FieldrlError` where the run has no
        evaluation of this policy and seed.
    """
    from fieldrl.domains import get_domain
    from fieldrl.evaluation.readback import RESULTS_FILE, read_results
    from fieldrl.evaluation.runner import episode_seed, failure_reason, run_episodes

    if episodes is not None and episodes < 1:
        raise FieldrlError(f"episodes = {episodes!r}: replay at least one held-out episode")
    domain = get_domain(scenario.domain)
    if RESULTS_FILE not in folder.hashes():
        raise NothingToReplay(f"{folder.path}: the run was not evaluated (`fieldrl evaluate RUN_DIR`)")
    results = read_results(folder, scenario)
    own = results[
        (results["variant"] == setting)
        & (results["policy"] == policy)
        & (results["train_seed"] == train_seed)
    ]
    if own.empty:
        raise NothingToReplay(
            f"{folder.path}: the run's results have no held-out episodes of {policy} (training seed "
            f"{train_seed}, setting {setting}): evaluate the run first (`fieldrl evaluate RUN_DIR`)"
        )
    timings = domain.wall_clock_metrics()
    metrics = [m for m in dict.fromkeys(own["metric"]) if m not in timings]
    stored: dict[tuple[int, int], dict[str, float]] = {}
    for s, e, m, v in zip(own["eval_seed"], own["episode"], own["metric"], own["value"], strict=True):
        stored.setdefault((int(s), int(e)), {})[str(m)] = float(v)
    plan = [(s, e) for s in scenario.seeds.eval for e in range(scenario.episodes_per_seed)]
    played = [c for c in plan if c in stored and all(m in stored[c] for m in metrics)]
    if not played:
        raise NothingToReplay(
            f"every held-out episode of {policy} (training seed {train_seed}) failed in the run"
        )
    chosen = played if episodes is None else played[:episodes]
    params = domain.params_model.model_validate(scenario.policy_params(setting, policy))
    acting = BundlePolicy(policy, bundle)
    try:
        kpis, _ = run_episodes(
            domain,
            domain.held_out_params(params, scenario.seeds.eval),
            acting,
            [episode_seed(s, e) for s, e in chosen],
            trace_index=None,
            cases=[s for s, _ in chosen],
        )
    except runtime.BundleError as exc:
        raise FieldrlError(
            f"held-out replay: the bundle refused an observation of the simulator ({exc})"
        ) from None
    except (FieldrlError, KeyboardInterrupt):
        raise
    except Exception as exc:  # the evaluation played these episodes to the end; here they failed
        raise FieldrlError(
            f"held-out replay: the simulator failed on a held-out episode the run's evaluation played to the "
            f"end ({failure_reason(exc)})"
        ) from None
    continuous = bundle.contract["action"]["kind"] == "continuous"
    check = ReplayCheck(
        setting,
        policy,
        train_seed,
        continuous,
        chosen,
        metrics,
        run={m: [stored[c][m] for c in chosen] for m in metrics},
        bundle={
            m: [float(v) for v in np.asarray(kpis.get(m, [np.nan] * len(chosen)), float)] for m in metrics
        },
        failed_in_run=len(plan) - len([c for c in plan if c in stored]),
    )
    for m in metrics:
        for (s, e), a, b in zip(chosen, check.run[m], check.bundle[m], strict=True):
            if not _close(a, b, continuous):
                check.mismatches.append({"eval_seed": s, "episode": e, "metric": m, "run": a, "bundle": b})
    return check
