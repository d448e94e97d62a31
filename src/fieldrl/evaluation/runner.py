"""Training and evaluation jobs, and the pool that runs them.

A job is a plain function of plain data (the scenario as a dict, the run folder
path, a few labels), so the same job runs in this process (``--jobs 1``) or in a
worker process, and gives the same numbers either way: every job seeds itself and
uses one torch thread.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from fieldrl.domains import get_domain
from fieldrl.domains.base import Domain, EpisodeRecord
from fieldrl.errors import FieldrlError
from fieldrl.evaluation.store import RunFolder
from fieldrl.policies.base import Policy
from fieldrl.scenario import HeuristicEntry, LearnedEntry, Scenario

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


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-") or "policy"


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


def partial_results(job: EvalJob) -> tuple[str, str]:
    """Where a finished evaluation job's results (and trace) wait until the run's results are merged."""
    stem = f"partial/{slug(job.variant)}/{slug(job.policy)}/seed-{job.train_seed}"
    return f"{stem}.results.parquet", f"{stem}.trace.parquet"


# ----------------------------------------------------------------------------- episodes


def run_episodes(
    domain: Domain,
    params: Any,
    policy: Policy,
    seeds: Sequence[int],
    on_episodes_done: Callable[[int], None] | None = None,
    trace_index: int | None = 0,
    cases: Sequence[int] | None = None,
) -> tuple[dict[str, np.ndarray], pd.DataFrame | None]:
    """Run one episode per seed with ``policy``; return KPI arrays (seed order) and one trace.

    :param cases: held-out evaluation seed of each episode (see ``Domain.make_eval_envs``).
    """
    batch = int(getattr(domain, "eval_batch_size", 256))
    kpis: dict[str, list[np.ndarray]] = {}
    trace = None
    for start in range(0, len(seeds), batch):
        chunk = list(seeds[start : start + batch])
        chunk_cases = None if cases is None else list(cases[start : start + batch])
        record = _run_batch(domain, params, policy, chunk, chunk_cases)
        for name, values in domain.episode_kpis(record).items():
            kpis.setdefault(name, []).append(np.asarray(values, dtype=float))
        if trace_index is not None and start <= trace_index < start + len(chunk):
            trace = domain.episode_trace(record, trace_index - start)
        if on_episodes_done is not None:
            on_episodes_done(start + len(chunk))
    return {k: np.concatenate(v) for k, v in kpis.items()}, trace


def _run_batch(
    domain: Domain, params: Any, policy: Policy, seeds: list[int], cases: list[int] | None
) -> EpisodeRecord:
    envs = domain.make_eval_envs(params, seeds, cases)
    obs = envs.reset()
    n = len(seeds)
    policy.reset(n)
    bind = getattr(policy, "bind_envs", None)
    if bind is not None:
        bind(envs)
    episode_start = np.ones(n, dtype=bool)
    active = np.ones(n, dtype=bool)
    rewards, actions, actives, terms = [], [], [], []
    infos: dict[str, list[np.ndarray]] = {}
    while active.any():
        action = np.asarray(policy.act(obs, episode_start))
        obs, reward, terminated, truncated, info = envs.step(action)
        rewards.append(np.asarray(reward, dtype=float))
        actions.append(action)
        actives.append(active.copy())
        terms.append(np.asarray(terminated, dtype=bool) & active)
        for key, value in info.items():
            infos.setdefault(key, []).append(np.asarray(value))
        episode_start = np.zeros(n, dtype=bool)
        active = active & ~(np.asarray(terminated) | np.asarray(truncated))
    close = getattr(envs, "close", None)
    if close is not None:
        close()
    return EpisodeRecord(
        rewards=np.stack(rewards),
        actions=np.stack(actions),
        active=np.stack(actives),
        terminated=np.stack(terms),
        info={k: np.stack(v) for k, v in infos.items()},
        initial_info=dict(getattr(envs, "initial_info", {}) or {}),
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
    variant: str
    policy: str
    train_seed: int

    @property
    def key(self) -> str:
        seed = "" if self.train_seed == HEURISTIC_TRAIN_SEED else f" seed {self.train_seed}"
        return f"evaluate {self.policy}{seed}" + ("" if self.variant == "default" else f" [{self.variant}]")


def train_jobs(scenario: Scenario) -> list[TrainJob]:
    return [
        TrainJob(v, entry.label, seed)
        for v in scenario.variant_names
        for entry in scenario.policies.learned
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


def _context(scenario_data: dict[str, Any], variant: str) -> tuple[Scenario, Domain, Any]:
    scenario = Scenario.model_validate(scenario_data)
    domain = get_domain(scenario.domain)
    params = domain.params_model.model_validate(scenario.variant_params(variant))
    return scenario, domain, params


def _entry(scenario: Scenario, label: str) -> HeuristicEntry | LearnedEntry:
    for entry in [*scenario.policies.heuristics, *scenario.policies.learned]:
        if entry.label == label:
            return entry
    raise KeyError(label)


def run_train_job(scenario_data: dict[str, Any], run_dir: str, job: TrainJob, events: Any) -> list[str]:
    """Train one (variant, policy, seed) and write its artifacts; return their relative paths."""
    from fieldrl.policies.learned import train_model

    scenario, domain, params = _context(scenario_data, job.variant)
    entry = _entry(scenario, job.policy)
    assert isinstance(entry, LearnedEntry)
    folder = RunFolder(run_dir)
    rel = model_dir(job.variant, job.policy, job.seed)
    events.put(("start", job.key, entry.train_steps))
    artifacts = train_model(
        lambda n, s: domain.make_train_vec_env(params, n, s),
        entry,
        job.seed,
        folder.path / rel,
        tensorboard_dir=folder.path / "tensorboard" / slug(job.variant),
        report=lambda done: events.put(("update", job.key, done)),
        checkpoint_dir=folder.path / checkpoint_dir(job),
    )
    written = []
    for name, data in artifacts.items():
        folder.write_bytes(f"{rel}/{name}", data, record=False)
        written.append(f"{rel}/{name}")
    events.put(("done", job.key, entry.train_steps))
    return written


def build_policy(
    scenario: Scenario,
    domain: Domain,
    params: Any,
    job: EvalJob,
    run_dir: str,
    hashes: dict[str, str],
    trust: bool = False,
) -> Policy:
    entry = _entry(scenario, job.policy)
    if isinstance(entry, HeuristicEntry):
        spec = domain.heuristics[entry.use]
        return spec.build(spec.settings_model.model_validate(entry.settings), params, entry.label)
    from fieldrl.policies.learned import MODEL_FILE, NORM_FILE, load_policy

    folder = RunFolder(run_dir)
    rel = model_dir(job.variant, job.policy, job.train_seed)
    model_rel, norm_rel = f"{rel}/{MODEL_FILE}", f"{rel}/{NORM_FILE}"
    if trust:  # the user vouches for files fieldrl cannot verify
        model_path = folder.require(model_rel, "no trained model here; run `fieldrl train` first")
        norm_path = folder.path / norm_rel if (folder.path / norm_rel).is_file() else None
        return load_policy(entry.label, entry.algorithm, model_path, norm_path)
    if model_rel not in hashes:
        raise FieldrlError(
            f"{folder.path / model_rel}: no trained model in the manifest; run `fieldrl train` first "
            "(or, for a model file you are sure of, `fieldrl evaluate --trust`)"
        )
    model_path = folder.verified_path(model_rel, hashes[model_rel])
    norm_path = folder.verified_path(norm_rel, hashes[norm_rel]) if norm_rel in hashes else None
    return load_policy(entry.label, entry.algorithm, model_path, norm_path)


def run_eval_job(
    scenario_data: dict[str, Any],
    run_dir: str,
    job: EvalJob,
    hashes: dict[str, str],
    trust: bool,
    events: Any,
) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """Evaluate one (variant, policy, train seed) on every held-out episode.

    :param trust: load model files without checking them against the manifest.
    """
    import torch

    torch.set_num_threads(1)
    scenario, domain, params = _context(scenario_data, job.variant)
    policy = build_policy(scenario, domain, params, job, run_dir, hashes, trust)
    plan = [
        (s, e, episode_seed(s, e)) for s in scenario.seeds.eval for e in range(scenario.episodes_per_seed)
    ]
    events.put(("start", job.key, len(plan)))
    kpis, trace = run_episodes(
        domain,
        params,
        policy,
        [p[2] for p in plan],
        on_episodes_done=lambda done: events.put(("update", job.key, done)),
        cases=[p[0] for p in plan],
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
    events.put(("done", job.key, len(plan)))
    return pd.concat(frames, ignore_index=True)[RESULT_COLUMNS], trace
