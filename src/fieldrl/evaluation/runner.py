"""Training and evaluation jobs, and the pool that runs them.

A job is a plain function of plain data (the scenario as a dict, the run folder
path, a few labels), so the same job runs in this process (``--jobs 1``) or in a
worker process, and gives the same numbers either way: every job seeds itself and
uses one torch thread.
"""

from __future__ import annotations

import multiprocessing as mp
import queue as queue_module
import re
import signal
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
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
) -> Policy:
    entry = _entry(scenario, job.policy)
    if isinstance(entry, HeuristicEntry):
        spec = domain.heuristics[entry.use]
        return spec.build(spec.settings_model.model_validate(entry.settings), params, entry.label)
    from fieldrl.policies.learned import MODEL_FILE, NORM_FILE, load_policy

    folder = RunFolder(run_dir)
    rel = model_dir(job.variant, job.policy, job.train_seed)
    model_rel, norm_rel = f"{rel}/{MODEL_FILE}", f"{rel}/{NORM_FILE}"
    if model_rel not in hashes:
        raise FieldrlError(
            f"{folder.path / model_rel}: no trained model in the manifest; run `fieldrl train` first"
        )
    model_path = folder.verified_path(model_rel, hashes[model_rel])
    norm_path = folder.verified_path(norm_rel, hashes[norm_rel]) if norm_rel in hashes else None
    return load_policy(entry.label, entry.algorithm, model_path, norm_path)


def run_eval_job(
    scenario_data: dict[str, Any], run_dir: str, job: EvalJob, hashes: dict[str, str], events: Any
) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """Evaluate one (variant, policy, train seed) on every held-out episode."""
    import torch

    torch.set_num_threads(1)
    scenario, domain, params = _context(scenario_data, job.variant)
    policy = build_policy(scenario, domain, params, job, run_dir, hashes)
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


# ----------------------------------------------------------------------------- pool


class _Inline:
    """Queue stand-in for in-process jobs: events go straight to the handler."""

    def __init__(self, handler: Callable[[tuple[Any, ...]], None]):
        self.handler = handler

    def put(self, event: tuple[Any, ...]) -> None:
        self.handler(event)


def execute(
    func: Callable[..., Any],
    calls: Iterable[tuple[Any, ...]],
    jobs: int,
    on_event: Callable[[tuple[Any, ...]], None],
) -> list[Any]:
    """Run ``func(*args, events)`` for each args tuple; results in input order.

    ``jobs == 1`` runs in this process; more uses a spawn-based process pool
    (fork is unsafe once torch has started threads).
    """
    calls = list(calls)
    if jobs <= 1 or len(calls) <= 1:
        inline = _Inline(on_event)
        return [func(*args, inline) for args in calls]
    ctx = mp.get_context("spawn")
    with ctx.Manager() as manager:
        events = manager.Queue()
        pool = ProcessPoolExecutor(
            max_workers=min(jobs, len(calls)), mp_context=ctx, initializer=_ignore_ctrl_c
        )
        try:
            futures: dict[Future[Any], int] = {
                pool.submit(func, *args, events): i for i, args in enumerate(calls)
            }
            results: list[Any] = [None] * len(calls)
            pending = set(futures)
            while pending:
                _drain(events, on_event)
                done, pending = wait(pending, timeout=0.2, return_when=FIRST_COMPLETED)
                for fut in done:
                    results[futures[fut]] = fut.result()
            _drain(events, on_event)
        except BaseException:
            _stop_workers(pool)  # Ctrl-C or a failed job: don't wait for the others to finish
            raise
        pool.shutdown()
    return results


def _ignore_ctrl_c() -> None:
    """Workers leave Ctrl-C to the main process, which stops them (no traceback from each worker)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _stop_workers(pool: ProcessPoolExecutor) -> None:
    # Python < 3.14 has no public way to terminate a pool's workers.
    for process in list((getattr(pool, "_processes", None) or {}).values()):
        process.terminate()
    pool.shutdown(wait=False, cancel_futures=True)


def _drain(events: Any, on_event: Callable[[tuple[Any, ...]], None]) -> None:
    while True:
        try:
            on_event(events.get_nowait())
        except queue_module.Empty:
            return
