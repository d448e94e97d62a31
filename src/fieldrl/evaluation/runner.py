"""Training and evaluation jobs, and the pool that runs them.

A job is a plain function of plain data (the scenario as a dict, the run folder
path, a few labels), so the same job runs in this process (``--jobs 1``) or in a
worker process, and gives the same numbers either way: every job seeds itself and
uses one torch thread.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from functools import partial
from itertools import count, islice
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from fieldrl.domains import get_domain
from fieldrl.domains.base import SIMULATOR_CHECKS, Domain, EpisodeRecord, EvalEnvs
from fieldrl.errors import FieldrlError
from fieldrl.evaluation.store import RunFolder
from fieldrl.names import slug
from fieldrl.policies.base import Policy
from fieldrl.results import NON_FINITE_ACTIONS
from fieldrl.scenario import HeuristicEntry, LearnedEntry, Scenario
from fieldrl.scenario_checks import entry_of, heuristic_policy, training_vec_env

HEURISTIC_TRAIN_SEED = -1  # heuristics are not trained; their rows carry this train_seed
RESULT_COLUMNS = [
    "variant",
    "policy",
    "kind",
    "train_seed",
    "eval_seed",
    "episode",
    "metric",
    "value",
]


def episode_seed(eval_seed: int, episode: int) -> int:
    """Environment seed of episode ``episode`` on held-out seed ``eval_seed``."""
    if episode == 0:
        return int(eval_seed)
    return int(np.random.SeedSequence([eval_seed, episode]).generate_state(1)[0])


def model_dir(variant: str, label: str, seed: int) -> str:
    return f"models/{slug(variant)}/{slug(label)}/seed-{seed}"


def checkpoint_dir(job: TrainJob) -> str:
    """Where a training job keeps its resumable checkpoint until its model is recorded."""
    return f"checkpoints/{slug(job.variant)}/{slug(job.policy)}/seed-{job.seed}"


def partial_results(job: EvalJob) -> tuple[str, str, str]:
    """Where a finished evaluation job's results, trace and failures wait until they are merged."""
    stem = f"partial/{slug(job.variant)}/{slug(job.policy)}/seed-{job.train_seed}"
    if job.axis is not None:
        stem = f"stress/{slug(job.axis)}/{point_folder(job.point)}/{stem}"
    return f"{stem}.results.parquet", f"{stem}.trace.parquet", f"{stem}.failures.json"


def point_folder(point: float | None) -> str:
    """A stress point as a folder name: ``0.5``, ``m1.5`` for -1.5 (a slug alone would drop the sign
    and file -2 and +2 in one folder)."""
    assert point is not None
    return ("m" if point < 0 else "") + slug(format(abs(point), ".6g"))


def partial_validation(job: EvalJob) -> str:
    """Where a heuristic's score on the validation seeds waits until it is merged into the summary."""
    return f"partial/{slug(job.variant)}/{slug(job.policy)}/seed-{job.train_seed}.validation.json"


# ----------------------------------------------------------------------------- episodes


def run_episodes(
    domain: Domain,
    params: Any,
    policy: Policy,
    seeds: Sequence[int],
    on_episodes_done: Callable[[int], None] | None = None,
    trace_index: int | None = 0,
    cases: Sequence[int] | None = None,
    failures: list[tuple[int, str]] | None = None,
) -> tuple[dict[str, np.ndarray], pd.DataFrame | None]:
    """Run one episode per seed with ``policy``; return KPI arrays (seed order) and one trace.

    :param cases: held-out evaluation seed of each episode (see ``Domain.make_eval_envs``).
    :param failures: if given, a simulator error does not stop the evaluation: the batch is
        re-run one episode at a time on fresh environments, an episode that still fails gets
        NaN KPIs, and ``(index in seeds, reason)`` is appended here. If None, errors propagate.
    """
    batch = int(domain.eval_batch_size)
    kpis: dict[str, list[np.ndarray]] = {}
    trace = None
    for start in range(0, len(seeds), batch):
        chunk = list(seeds[start : start + batch])
        chunk_cases = None if cases is None else list(cases[start : start + batch])
        local_trace = None if trace_index is None else trace_index - start
        try:
            values, chunk_trace = _episode_values(domain, params, policy, chunk, chunk_cases, local_trace)
        except (FieldrlError, KeyboardInterrupt):
            raise
        except Exception:
            if failures is None:
                raise
            values, chunk_trace = _one_at_a_time(
                domain, params, policy, chunk, chunk_cases, local_trace, start, failures
            )
        for name, value in values.items():
            kpis.setdefault(name, []).append(np.asarray(value, dtype=float))
        trace = chunk_trace if chunk_trace is not None else trace
        if on_episodes_done is not None:
            on_episodes_done(start + len(chunk))
    return {k: np.concatenate(v) for k, v in kpis.items()}, trace


def _episode_values(
    domain: Domain,
    params: Any,
    policy: Policy,
    seeds: list[int],
    cases: list[int] | None,
    trace_index: int | None,
) -> tuple[dict[str, np.ndarray], pd.DataFrame | None]:
    record = _run_batch(domain, params, policy, seeds, cases)
    values = domain.episode_kpis(record)
    trace = None
    if trace_index is not None and 0 <= trace_index < len(seeds):
        trace = domain.episode_trace(record, trace_index)
    return values, trace


def _one_at_a_time(
    domain: Domain,
    params: Any,
    policy: Policy,
    seeds: list[int],
    cases: list[int] | None,
    trace_index: int | None,
    offset: int,
    failures: list[tuple[int, str]],
) -> tuple[dict[str, np.ndarray], pd.DataFrame | None]:
    """Each episode alone on fresh envs; failing ones become NaN with their reason recorded."""
    rows: list[dict[str, np.ndarray] | None] = []
    trace = None
    for i, seed in enumerate(seeds):
        case = None if cases is None else [cases[i]]
        try:
            wanted = 0 if i == trace_index else None
            values, one_trace = _episode_values(domain, params, policy, [seed], case, wanted)
        except (FieldrlError, KeyboardInterrupt):
            raise
        except Exception as exc:
            failures.append((offset + i, failure_reason(exc)))
            rows.append(None)
            continue
        rows.append(values)
        trace = one_trace if one_trace is not None else trace
    names = next((list(r) for r in rows if r is not None), [k.name for k in domain.kpis])
    values = {
        name: np.array([np.nan if r is None else float(np.asarray(r[name])[0]) for r in rows])
        for name in names
    }
    return values, trace


class PolicyFailure(Exception):
    """The policy, not the simulator, ended an episode: it answered NaN or infinite actions.

    Its message is the failure's recorded reason, :data:`~fieldrl.results.NON_FINITE_ACTIONS`,
    which reports and the exit line tell apart from simulator errors.
    """


#: what in a policy's error says it met NaN or infinite numbers (torch's distributions, given a NaN
#: mean: "Expected parameter loc ... to satisfy the constraint Real(), but found invalid values")
_NON_FINITE_WORDS = re.compile(r"\b(?:nan|inf)\b|invalid values", re.IGNORECASE)


def failure_reason(exc: Exception) -> str:
    """Why an episode failed, as recorded: the policy's failure as it said, else the simulator's error."""
    if isinstance(exc, PolicyFailure):
        return str(exc)
    return f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"


def _act(policy: Policy, obs: Any, episode_start: np.ndarray) -> np.ndarray:
    """``policy``'s actions; a :class:`PolicyFailure` where, on finite observations, they are NaN or
    infinite or the policy's own numbers are (a learned model with NaN weights).

    Passed on, a NaN dose or move fails inside the simulator, reads as a simulator error, or
    silently gives NaN KPIs. Non-finite observations are the simulator's doing: nothing is said
    here, and what follows is recorded as the simulator's error.
    """
    try:
        action = np.asarray(policy.act(obs, episode_start))
    except FieldrlError:
        raise
    except Exception as exc:
        if _NON_FINITE_WORDS.search(str(exc)) and _finite(obs):
            raise PolicyFailure(NON_FINITE_ACTIONS) from exc
        raise
    if action.dtype.kind in "fc" and not np.isfinite(action).all() and _finite(obs):
        raise PolicyFailure(NON_FINITE_ACTIONS)
    return action


def _finite(obs: Any) -> bool:
    """Whether every number of ``obs`` (an array, or a dict of arrays) is finite."""
    parts = obs.values() if isinstance(obs, dict) else [obs]
    for part in parts:
        array = np.asarray(part)
        if array.dtype.kind in "fc" and not np.isfinite(array).all():
            return False
    return True


@contextmanager
def _closed_after(envs: EvalEnvs) -> Iterator[None]:
    """Close ``envs`` when the block ends; if the block failed, its error wins over one from closing."""
    try:
        yield
    except BaseException:
        with suppress(Exception):
            envs.close()
        raise
    envs.close()


def _run_batch(
    domain: Domain, params: Any, policy: Policy, seeds: list[int], cases: list[int] | None
) -> EpisodeRecord:
    envs = domain.make_eval_envs(params, seeds, cases)
    with _closed_after(envs):  # also on a simulator error: it must free its simulator (libsumo)
        return _play(envs, policy, len(seeds))


def _play(envs: EvalEnvs, policy: Policy, n: int) -> EpisodeRecord:
    """Step ``n`` episodes of ``envs`` with ``policy`` until every one has ended."""
    obs = envs.reset()
    policy.reset(n)
    policy.bind_envs(envs)
    episode_start = np.ones(n, dtype=bool)
    active = np.ones(n, dtype=bool)
    rewards, actions, actives, terms = [], [], [], []
    infos: dict[str, list[np.ndarray]] = {}
    while active.any():
        action = _act(policy, obs, episode_start)
        obs, reward, terminated, truncated, info = envs.step(action)
        rewards.append(np.asarray(reward, dtype=float))
        actions.append(action)
        actives.append(active.copy())
        terms.append(np.asarray(terminated, dtype=bool) & active)
        for key, value in info.items():
            infos.setdefault(key, []).append(np.asarray(value))
        episode_start = np.zeros(n, dtype=bool)
        active = active & ~(np.asarray(terminated) | np.asarray(truncated))
    return EpisodeRecord(
        rewards=np.stack(rewards),
        actions=np.stack(actions),
        active=np.stack(actives),
        terminated=np.stack(terms),
        info={k: np.stack(v) for k, v in infos.items()},
        initial_info=dict(envs.initial_info),
        extras=envs.final_extras(),
    )


# ----------------------------------------------------------------------------- jobs


@dataclass(frozen=True)
class TrainJob:
    variant: str
    policy: str
    seed: int

    @property
    def key(self) -> str:
        return f"train {self.policy} seed {self.seed}" + (
            "" if self.variant == "default" else f" [{self.variant}]"
        )


@dataclass(frozen=True)
class EvalJob:
    """One policy (and training seed) of one setting on every held-out episode; with ``axis``, in the
    world that stress axis gives at ``point`` (``fieldrl stress``) instead of the setting's own."""

    variant: str
    policy: str
    train_seed: int
    axis: str | None = None
    point: float | None = None

    @property
    def key(self) -> str:
        seed = "" if self.train_seed == HEURISTIC_TRAIN_SEED else f" seed {self.train_seed}"
        where = "" if self.variant == "default" else f" [{self.variant}]"
        stressed = "" if self.axis is None else f" at {self.axis} {self.point:g}"
        return f"evaluate {self.policy}{seed}{where}{stressed}"


def train_jobs(scenario: Scenario) -> list[TrainJob]:
    return [
        TrainJob(v, entry.label, seed)
        for v in scenario.variant_names
        for entry in scenario.policies.learned
        if entry.runs_in(v)
        for seed in scenario.seeds.train
    ]


def eval_jobs(scenario: Scenario) -> list[EvalJob]:
    jobs = [
        EvalJob(v, entry.label, HEURISTIC_TRAIN_SEED)
        for v in scenario.variant_names
        for entry in scenario.policies.heuristics
    ]
    jobs += [EvalJob(j.variant, j.policy, j.seed) for j in train_jobs(scenario)]
    return jobs


def _context(
    scenario_data: dict[str, Any], variant: str, policy: str | None = None
) -> tuple[Scenario, Domain, Any]:
    """The scenario, its domain, and the params ``policy`` runs with in ``variant``."""
    scenario = Scenario.model_validate(scenario_data)
    domain = get_domain(scenario.domain)
    params = domain.params_model.model_validate(scenario.policy_params(variant, policy))
    return scenario, domain, params


def stressed_params(scenario: Scenario, domain: Domain, job: EvalJob) -> Any:
    """The params ``job.policy`` runs with in ``job.variant`` with the world at ``job.point`` of
    stress axis ``job.axis`` (the policy's own settings unchanged)."""
    assert job.axis is not None and job.point is not None
    axis = domain.stress_axes[job.axis]
    raw = axis.apply(scenario.policy_params(job.variant, job.policy), job.point)
    token = SIMULATOR_CHECKS.set(False)  # the scenario's validation checked this world already
    try:
        return domain.params_model.model_validate(raw)
    finally:
        SIMULATOR_CHECKS.reset(token)


def demonstration_seeds(scenario: Scenario, seed: int, episodes: int) -> list[int]:
    """Seeds of a warm start's demonstrations: training seed ``seed`` onwards, skipping held-out
    and validation ones."""
    kept_apart = set(scenario.seeds.eval) | set(scenario.seeds.validation or [])
    return list(islice((s for s in count(seed) if s not in kept_apart), episodes))


def validation_plan(scenario: Scenario) -> list[tuple[int, int, int]]:
    """``(validation seed, episode, env seed)`` of every validation episode (as for held-out ones)."""
    seeds = scenario.seeds.validation or []
    return [(s, e, episode_seed(s, e)) for s in seeds for e in range(scenario.episodes_per_seed)]


def validation_score(scenario: Scenario, domain: Domain, params: Any, policy: Policy) -> float:
    """Mean selection KPI of ``policy`` over the validation episodes (NaN episodes left out)."""
    plan = validation_plan(scenario)
    kpis, _ = run_episodes(
        domain,
        params,
        policy,
        [p[2] for p in plan],
        trace_index=None,
        cases=[p[0] for p in plan],
        failures=[],
    )
    values = np.asarray(kpis[selection_kpi(scenario, domain).name], dtype=float)
    return float(np.nanmean(values)) if np.isfinite(values).any() else float("nan")


def primary_kpi(scenario: Scenario, domain: Domain) -> Any:
    return domain.kpi(scenario.report.primary_kpi or domain.kpis[0].name)


def selection_kpi(scenario: Scenario, domain: Domain) -> Any:
    """The KPI validation scores (checkpoint selection, tuning trials): ``report.selection_kpi``, else
    the primary KPI."""
    report = scenario.report
    return domain.kpi(report.selection_kpi or report.primary_kpi or domain.kpis[0].name)


def evaluation_wrapper(
    scenario: Scenario, domain: Domain, params: Any, entry: LearnedEntry, shielded: bool = True
) -> Callable[[Any], Policy] | None:
    """What turns the loaded network into the evaluated policy (residual: heuristic + correction;
    shield: the domain's runtime shield around it, unless ``shielded`` is False).

    Validation scores a learned entry without its shield: checkpoints and tuning trials are chosen
    on what the policy does on its own (through a shield every checkpoint would look alike on
    safety, and the untrained first one would be kept).
    """
    residual, shield = entry.residual, entry.shield if shielded else None
    if residual is None and shield is None:
        return None
    if residual is not None:
        space = _action_space(domain, params)  # the heuristic's (the network's is the correction's)

    def wrap(learned: Any) -> Policy:
        if residual is not None:
            from fieldrl.policies.residual import ResidualPolicy

            heuristic = heuristic_policy(scenario, domain, params, residual.heuristic)
            learned = ResidualPolicy(entry.label, heuristic, learned, residual.scale, space.low, space.high)
        if shield is not None:
            planner = heuristic_policy(scenario, domain, params, shield.heuristic)
            learned = domain.shielded_policy(entry.label, learned, planner, shield.patience)
        return learned

    return wrap


def _action_space(domain: Domain, params: Any) -> Any:
    venv = domain.make_train_vec_env(params, 1, 0)
    try:
        return venv.action_space
    finally:
        venv.close()


def _demonstrations(
    scenario: Scenario, domain: Domain, params: Any, entry: LearnedEntry, seed: int, gamma: float
) -> Any:
    """The decisions of the heuristic ``entry.imitate`` names, on training seeds."""
    from fieldrl.policies.imitation import Demonstrations, collect

    assert entry.imitate is not None
    policy = heuristic_policy(scenario, domain, params, entry.imitate.heuristic)
    seeds = demonstration_seeds(scenario, seed, entry.imitate.episodes)
    size = max(1, domain.eval_batch_size)  # as the held-out runner batches (libsumo: one at a time)
    parts = []
    for start in range(0, len(seeds), size):
        envs = domain.make_eval_envs(params, seeds[start : start + size])
        try:
            parts.append(collect(envs, policy, gamma))
        finally:
            envs.close()
    return Demonstrations.concatenate(parts)


def run_train_job(scenario_data: dict[str, Any], run_dir: str, job: TrainJob, events: Any) -> list[str]:
    """Train one (variant, policy, seed) and write its artifacts; return their relative paths."""
    from fieldrl.policies.learned import train_model

    scenario, domain, params = _context(scenario_data, job.variant, job.policy)
    entry = entry_of(scenario, job.policy)
    assert isinstance(entry, LearnedEntry)
    folder = RunFolder(run_dir)
    rel = model_dir(job.variant, job.policy, job.seed)
    events.put(("start", job.key, entry.train_steps))
    artifacts = train_model(
        training_vec_env(scenario, domain, params, entry),
        entry.training_spec(),
        job.seed,
        folder.inside(rel),
        tensorboard_dir=folder.inside(f"tensorboard/{slug(job.variant)}"),
        report=lambda done: events.put(("update", job.key, done)),
        # Checkpoints cut every training env's episode (simulator state is not saved), which for
        # long episodes and short rollouts hurts learning: only where the scenario asks for them.
        checkpoint_dir=folder.inside(checkpoint_dir(job)) if entry.checkpoint_every else None,
        demonstrations=demonstrations_for(scenario, domain, params, entry, job.seed),
        validation=validation_for(scenario, domain, params, entry),
        prepare=preparation_for(entry),
    )
    written = []
    for name, data in artifacts.items():
        folder.write_bytes(f"{rel}/{name}", data, record=False)
        written.append(f"{rel}/{name}")
    events.put(("done", job.key, entry.train_steps))
    return written


def demonstrations_for(
    scenario: Scenario, domain: Domain, params: Any, entry: LearnedEntry, seed: int
) -> Callable[[float], Any] | None:
    """``gamma -> Demonstrations`` of the entry's warm start, or None without one."""
    if entry.imitate is None:
        return None
    return partial(_demonstrations, scenario, domain, params, entry, seed)


def preparation_for(entry: LearnedEntry) -> Callable[[Any], None] | None:
    """What a new model of ``entry`` needs before training (a residual starts at zero correction)."""
    if entry.residual is None:
        return None
    from fieldrl.policies.residual import zero_correction

    return zero_correction


def validation_for(scenario: Scenario, domain: Domain, params: Any, entry: LearnedEntry) -> Any:
    """The entry's validation-gated selection, or None when the scenario has no validation seeds."""
    from fieldrl.policies.learned import SB3Policy
    from fieldrl.policies.selection import Validation

    if not scenario.seeds.validation:
        return None
    wrap = evaluation_wrapper(scenario, domain, params, entry, shielded=False)

    def score(model: Any, norm: dict[str, Any] | None) -> float:
        policy: Policy = SB3Policy(entry.label, model, norm)
        if wrap is not None:
            policy = wrap(policy)
        return validation_score(scenario, domain, params, policy)

    kpi = selection_kpi(scenario, domain)
    return Validation(entry.validation_interval, score, kpi.higher_is_better, kpi.name)


def build_policy(
    scenario: Scenario,
    domain: Domain,
    params: Any,
    job: EvalJob,
    run_dir: str,
    hashes: dict[str, str],
    trust: bool = False,
) -> Policy:
    entry = entry_of(scenario, job.policy)
    if isinstance(entry, HeuristicEntry):
        spec = domain.heuristics[entry.use]
        return spec.build(spec.settings_model.model_validate(entry.settings), params, entry.label)
    from fieldrl.policies.learned import load_policy

    load = partial(
        load_policy,
        entry.label,
        entry.training_spec(),
        training_vec_env(scenario, domain, params, entry),
        wrap=evaluation_wrapper(scenario, domain, params, entry),
    )
    return load(*model_files(run_dir, job, hashes, trust))


def model_files(run_dir: str, job: EvalJob, hashes: dict[str, str], trust: bool) -> tuple[Path, Path | None]:
    """The weights file and normalisation statistics of a learned job, checked against the
    manifest (``trust``: only that the weights file exists) and confined to the run folder."""
    from fieldrl.policies.learned import MODEL_FILE, NORM_FILE

    folder = RunFolder(run_dir)
    rel = model_dir(job.variant, job.policy, job.train_seed)
    model_rel, norm_rel = f"{rel}/{MODEL_FILE}", f"{rel}/{NORM_FILE}"
    if trust:  # the user vouches for files the manifest does not list (they are only tensors)
        model_path = folder.require(model_rel, "no trained model here; run `fieldrl train` first")
        norm_path = folder.inside(norm_rel) if (folder.path / norm_rel).exists() else None  # a FIFO: refused
        return model_path, norm_path
    if model_rel not in hashes:
        raise FieldrlError(
            f"{folder.path / model_rel}: no trained model in the manifest; run `fieldrl train` first "
            "(or, for a weights file you are sure of, `fieldrl evaluate --trust`)"
        )
    model_path = folder.verified_path(model_rel, hashes[model_rel])
    norm_path = folder.verified_path(norm_rel, hashes[norm_rel]) if norm_rel in hashes else None
    return model_path, norm_path


def check_learned_models(
    scenario_data: dict[str, Any], run_dir: str, jobs: list[EvalJob], hashes: dict[str, str], trust: bool
) -> None:
    """Check every learned model the evaluation ``jobs`` need, before any job runs.

    The checks each job's own loading makes (manifest, path inside the run folder, a safetensors
    header, tensors that fit the model the scenario describes), made first so that a damaged or
    planted model file ends the evaluation with one message before a heuristic has written a
    partial result. One model is built per setting and policy; every seed's weights load into it.
    """
    import torch

    from fieldrl.policies import weights
    from fieldrl.policies.learned import build_model

    torch.set_num_threads(1)
    models: dict[tuple[str, str], Any] = {}
    for job in jobs:
        if job.train_seed == HEURISTIC_TRAIN_SEED:
            continue
        model_path, _ = model_files(run_dir, job, hashes, trust)
        key = (job.variant, job.policy)
        if key not in models:
            scenario, domain, params = _context(scenario_data, job.variant, job.policy)
            entry = entry_of(scenario, job.policy)
            assert isinstance(entry, LearnedEntry)
            venv = training_vec_env(scenario, domain, params, entry)(1, 0)
            try:
                models[key] = build_model(entry.training_spec(), venv, seed=0)
            finally:
                venv.close()
        weights.load_into(models[key], weights.read_weights(model_path), str(model_path))


def run_eval_job(
    scenario_data: dict[str, Any],
    run_dir: str,
    job: EvalJob,
    hashes: dict[str, str],
    trust: bool,
    events: Any,
) -> tuple[pd.DataFrame, pd.DataFrame | None, list[dict[str, Any]], float | None]:
    """Evaluate one (variant, policy, train seed) on every held-out episode.

    Returns the tidy results, one trace, the episodes that failed (simulator errors) with why, and
    for a heuristic its mean primary KPI on the validation seeds (None otherwise).

    :param trust: load model files without checking them against the manifest.
    """
    import torch

    torch.set_num_threads(1)
    scenario, domain, params = _context(scenario_data, job.variant, job.policy)
    if job.axis is not None:
        params = stressed_params(scenario, domain, job)
    context = (scenario, domain, params, job, run_dir, hashes, trust)
    policy = build_policy(*context)
    plan = [
        (s, e, episode_seed(s, e)) for s in scenario.seeds.eval for e in range(scenario.episodes_per_seed)
    ]
    events.put(("start", job.key, len(plan)))
    failed: list[tuple[int, str]] = []
    kpis, trace = run_episodes(
        domain,
        domain.held_out_params(params, scenario.seeds.eval),  # e.g. chemo's cohort: patient i for seed i
        policy,
        [p[2] for p in plan],
        on_episodes_done=lambda done: events.put(("update", job.key, done)),
        cases=[p[0] for p in plan],
        failures=failed,
    )
    kind = "heuristic" if job.train_seed == HEURISTIC_TRAIN_SEED else "learned"
    frames = []
    for metric, values in kpis.items():
        frames.append(
            pd.DataFrame(
                {
                    "variant": job.variant,
                    "policy": job.policy,
                    "kind": kind,
                    "train_seed": job.train_seed,
                    "eval_seed": [p[0] for p in plan],
                    "episode": [p[1] for p in plan],
                    "metric": metric,
                    "value": values,
                }
            )
        )
    if trace is not None:
        trace = trace.assign(variant=job.variant, policy=job.policy, train_seed=job.train_seed)
    validation = None
    if kind == "heuristic" and scenario.seeds.validation and job.axis is None:  # what learned ones met
        validation = validation_score(scenario, domain, params, build_policy(*context))
    events.put(("done", job.key, len(plan)))
    results = pd.concat(frames, ignore_index=True)[RESULT_COLUMNS]
    if failed:  # failed episodes have no KPI rows; failures.json says why
        lost = {(plan[i][0], plan[i][1]) for i, _ in failed}
        keep = [(s, e) not in lost for s, e in zip(results["eval_seed"], results["episode"], strict=True)]
        results = results[keep].reset_index(drop=True)
    failures = [
        {
            "variant": job.variant,
            "policy": job.policy,
            "train_seed": job.train_seed,
            "eval_seed": plan[i][0],
            "episode": plan[i][1],
            "reason": reason,
        }
        for i, reason in failed
    ]
    return results, trace, failures, validation
