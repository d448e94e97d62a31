"""Decision differences: at every decision the best learned policy takes on held-out episodes, what the
best standard policy would have done in the same state.

Recorded as part of evaluation, once the best policies are known: the learned policy drives the held-out
episodes again (the same seeds, so the same episodes it was scored on) while the standard policy is
*asked* at every step, bound to the envs through ``Policy.observe_envs`` so that it changes nothing in
them. A standard policy that cannot be asked about a state it is not driving (a program running inside
SUMO, a planner whose plan is its own earlier moves: ``HeuristicSpec.why_not_askable``) is replaced by the
best standard policy that can be, and the summary says so. Multi-agent domains pool their agents'
decisions: one row per agent that really decides (more than one action open to it).

Each job writes ``decisions/<setting>/<policy>/seed-<k>.parquet`` (one row per decision: the held-out
case, the step, the agent slot, the observation's features ``f0..``, the learned action ``l0..`` and the
standard one ``s0..``); ``decisions/summary.json`` says what was compared and, worked out once here,
what it shows (:mod:`fieldrl.evaluation.decision_story`: agreement, differences, *when* the two differ),
which the report reads (:mod:`fieldrl.reports.decisions`). Nothing here is retrained.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict

from fieldrl.domains.base import Domain, EvalEnvs
from fieldrl.errors import FieldrlError
from fieldrl.evaluation import runner
from fieldrl.evaluation.decision_story import DecisionStory, explain
from fieldrl.evaluation.store import RunFolder
from fieldrl.names import slug
from fieldrl.policies.base import Policy
from fieldrl.results import Summary
from fieldrl.scenario import HeuristicEntry, Scenario
from fieldrl.scenario_checks import entry_of

DECISIONS_SUMMARY = "decisions/summary.json"
#: held-out episodes per setting the decisions are recorded on (the first ones, spread over the
#: learned policy's training seeds): enough decisions for a depth-3 tree at a fraction of evaluation
MAX_EPISODES = 12
#: decisions kept per job (an even sample of them where an episode has more)
MAX_DECISIONS = 20_000


# ----------------------------------------------------------------------------- what is compared


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class DecisionSetting(_Strict):
    """What one setting's decision differences compare, and where the decisions are."""

    learned: str
    #: the standard policy asked (None: no standard policy of this run can be asked)
    standard: str | None
    #: the best standard policy of the evaluation (the one asked, unless it cannot be)
    best_standard: str | None
    #: why the best standard policy was not the one asked (None where it was)
    substituted: str | None = None
    features: list[str]
    action_kind: Literal["discrete", "multi-discrete", "continuous"]
    action_words: list[str] | None = None
    action_low: list[float] | None = None
    action_high: list[float] | None = None
    files: list[str]
    episodes: int
    decisions: int
    #: what the decisions show (None in folders recorded before fieldrl kept it: the report works it out)
    story: DecisionStory | None = None


class DecisionSummary(_Strict):
    """``decisions/summary.json``: setting -> what was compared (a setting without a learned policy or
    without any standard policy that can be asked has ``standard`` None and no files)."""

    variants: dict[str, DecisionSetting]


@dataclass(frozen=True)
class DecisionJob:
    """The learned policy ``learned`` (training seed ``train_seed``) of setting ``variant`` drives its
    first held-out episodes ``episodes`` (indices into the evaluation plan) while ``standard`` is asked."""

    variant: str
    learned: str
    train_seed: int
    standard: str
    episodes: tuple[int, ...]

    @property
    def key(self) -> str:
        where = "" if self.variant == "default" else f" [{self.variant}]"
        return f"decisions {self.learned} seed {self.train_seed} vs {self.standard}{where}"

    @property
    def path(self) -> str:
        return f"decisions/{slug(self.variant)}/{slug(self.learned)}/seed-{self.train_seed}.parquet"


def askable(scenario: Scenario, domain: Domain, label: str, variant: str | None = None) -> bool:
    """Whether heuristic entry ``label`` can be asked about a state another policy drives in ``variant``
    (default: the first setting)."""
    return why_not_askable(scenario, domain, label, variant) is None


def why_not_askable(scenario: Scenario, domain: Domain, label: str, variant: str | None = None) -> str | None:
    """Why entry ``label`` cannot be asked about another policy's states in ``variant`` (None where it
    can): its own nature (``HeuristicSpec.why_not_askable``), or what the domain says of this setting."""
    entry = entry_of(scenario, label)
    if not isinstance(entry, HeuristicEntry):
        return "is not a standard policy"
    params = domain.params_model.model_validate(scenario.variant_params(variant or scenario.variant_names[0]))
    return domain.ask_problem(entry.use, params)


def standard_to_ask(
    scenario: Scenario, domain: Domain, summary: Summary, variant: str
) -> tuple[str | None, str | None]:
    """The standard policy to ask in ``variant`` and, where it is not the best one, why: the best
    standard policy if it can be asked, else the best (primary KPI) of those that can be."""
    entry = summary.variant(variant)
    best = entry.best_heuristic
    if best is None or askable(scenario, domain, best, variant):
        return best, None
    primary = runner.primary_kpi(scenario, domain)
    sign = 1.0 if primary.higher_is_better else -1.0
    scored = []
    for name in entry.evaluated:
        if summary.is_oracle(name) or not any(e.label == name for e in scenario.policies.heuristics):
            continue
        mean = entry.value(name, primary.name)
        if askable(scenario, domain, name, variant) and np.isfinite(mean):
            scored.append((sign * mean, name))
    reason = why_not_askable(scenario, domain, best, variant)
    why = f"{best} cannot be asked about a state it is not driving: it {reason}"
    if not scored:
        return None, why + "; no other standard policy of this run can be asked"
    return max(scored)[1], why + f"; {max(scored)[1]} is the best standard policy that can be"


def decision_jobs(scenario: Scenario, domain: Domain, summary: Summary) -> list[DecisionJob]:
    """Per setting, one job per training seed of the best learned policy, together covering the first
    :data:`MAX_EPISODES` held-out episodes."""
    n_plan = len(scenario.seeds.eval) * scenario.episodes_per_seed
    chosen = list(range(min(MAX_EPISODES, n_plan)))
    jobs = []
    for variant in scenario.variant_names:
        learned = summary.variant(variant).best_learned
        standard, _ = standard_to_ask(scenario, domain, summary, variant)
        if learned is None or standard is None:
            continue
        seeds = list(scenario.seeds.train)
        for k, seed in enumerate(seeds):
            share = tuple(chosen[k :: len(seeds)])
            if share:
                jobs.append(DecisionJob(variant, learned, seed, standard, share))
    return jobs


# ----------------------------------------------------------------------------- playing


def decision_mask(envs: EvalEnvs, active: np.ndarray) -> np.ndarray:
    """Which decisions of this step count: ``(n,)`` for single-agent envs (the running episodes),
    ``(n, n_slots)`` for agent slots (a live agent with more than one action open to it)."""
    if not hasattr(envs, "slot_agents"):
        return np.asarray(active, dtype=bool).copy()
    sims: Any = envs
    live = np.zeros((sims.n, sims.n_slots), dtype=bool)
    for i in np.flatnonzero(active):
        agents = set(sims.envs[i].agents)
        for s, agent in enumerate(sims.slot_agents(int(i))):
            live[i, s] = agent is not None and agent in agents
    if hasattr(sims, "action_masks"):
        masks = np.asarray(sims.action_masks()).reshape(sims.n, sims.n_slots, -1)
        if masks.shape[-1] > 1:  # unmasked envs answer one "allowed" column per slot
            live &= masks.sum(axis=-1) > 1
    return live


def _rows(obs: Any, action: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Features and actions of the decisions ``mask`` keeps, one row each (agents pooled)."""
    obs = np.asarray(obs, dtype=np.float64)
    action = np.asarray(action)
    lead = mask.ndim
    feats = obs.reshape(*obs.shape[:lead], -1)[mask]
    acts = action.reshape(*action.shape[:lead], -1)[mask]
    return feats, acts


def play_decisions(
    domain: Domain, envs: EvalEnvs, learned: Policy, standard: Policy, n: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Step ``n`` episodes with ``learned`` while asking ``standard`` at every decision.

    :return: per decision: episode index, step, agent slot (0 for single-agent), features, learned
        action, standard action.
    """
    obs = envs.reset()
    learned.reset(n)
    standard.reset(n)
    learned.bind_envs(envs)
    standard.observe_envs(envs)  # after: asked policies change nothing the driving policy set up
    episode_start = np.ones(n, dtype=bool)
    active = np.ones(n, dtype=bool)
    parts: list[tuple[np.ndarray, ...]] = []
    step = 0
    while active.any():
        mask = decision_mask(envs, active)
        action = runner._act(learned, obs, episode_start)
        asked = np.asarray(standard.act(obs, episode_start))
        feats, acts = _rows(obs, domain.effective_actions(envs, action), mask)
        _, other = _rows(obs, domain.effective_actions(envs, asked), mask)
        where = np.argwhere(mask)
        slots = where[:, 1] if mask.ndim > 1 else np.zeros(len(where), dtype=int)
        parts.append((where[:, 0], np.full(len(where), step), slots, feats, acts, other))
        obs, _, terminated, truncated, _ = envs.step(action)
        episode_start = np.zeros(n, dtype=bool)
        active = active & ~(np.asarray(terminated) | np.asarray(truncated))
        step += 1
    return tuple(np.concatenate([p[k] for p in parts]) for k in range(6))  # type: ignore[return-value]


def run_decision_job(
    scenario_data: dict[str, Any],
    run_dir: str,
    job: DecisionJob,
    hashes: dict[str, str],
    trust: bool,
    events: Any,
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Record one job's decisions (see the module docstring) as a tidy frame, and the words for them
    (``features``: one agent's observation features; ``action_words``). ``trust``: as for evaluation."""
    import torch

    torch.set_num_threads(1)
    scenario, domain, params = runner._context(scenario_data, job.variant, job.learned)
    context = (scenario, domain, params)
    own_job = runner.EvalJob(job.variant, job.learned, job.train_seed)
    learned = runner.build_policy(*context, own_job, run_dir, hashes, trust)
    # the standard policy in the learned policy's params: the same world; only the controller's own
    # design (its decision interval, its reward) is the learned entry's
    asked_job = runner.EvalJob(job.variant, job.standard, runner.HEURISTIC_TRAIN_SEED)
    standard = runner.build_policy(*context, asked_job, run_dir, hashes)
    plan = [(s, e) for s in scenario.seeds.eval for e in range(scenario.episodes_per_seed)]
    chosen = [plan[i] for i in job.episodes]
    events.put(("start", job.key, len(chosen)))
    held_out = domain.held_out_params(params, scenario.seeds.eval)
    frames, words = [], {}
    batch = max(1, int(domain.eval_batch_size))
    for start in range(0, len(chosen), batch):
        part = chosen[start : start + batch]
        seeds = [runner.episode_seed(s, e) for s, e in part]
        envs = domain.make_eval_envs(held_out, seeds, [s for s, _ in part])
        try:
            played = play_decisions(domain, envs, learned, standard, len(part))
            if not words:
                words = {
                    "features": domain.decision_features(envs, played[3].shape[1]),
                    "action_words": domain.action_words(envs),
                }
        finally:
            envs.close()
        frames.append(_frame(part, *played))
        events.put(("update", job.key, start + len(part)))
    frame = pd.concat(frames, ignore_index=True)
    if len(frame) > MAX_DECISIONS:  # an even sample, in order
        keep = np.sort(np.random.default_rng(job.train_seed).choice(len(frame), MAX_DECISIONS, replace=False))
        frame = frame.iloc[keep].reset_index(drop=True)
    events.put(("done", job.key, len(chosen)))
    return frame.assign(train_seed=job.train_seed), words


def _frame(
    part: list[tuple[int, int]],
    episode: np.ndarray,
    step: np.ndarray,
    slot: np.ndarray,
    feats: np.ndarray,
    acts: np.ndarray,
    other: np.ndarray,
) -> pd.DataFrame:
    columns: dict[str, Any] = {
        "eval_seed": np.array([part[i][0] for i in episode], dtype=np.int64),
        "episode": np.array([part[i][1] for i in episode], dtype=np.int64),
        "step": step.astype(np.int64),
        "slot": slot.astype(np.int64),
    }
    columns |= {f"f{k}": feats[:, k].astype(np.float32) for k in range(feats.shape[1])}
    columns |= {f"l{k}": acts[:, k] for k in range(acts.shape[1])}
    columns |= {f"s{k}": other[:, k] for k in range(other.shape[1])}
    return pd.DataFrame(columns)


# ----------------------------------------------------------------------------- the summary


def _action_bounds(domain: Domain, scenario: Scenario, variant: str, learned: str) -> dict[str, Any]:
    """The action's kind and bounds, from the learned entry's training env (built, not stepped)."""
    from gymnasium import spaces

    _, _, params = runner._context(scenario.model_dump(mode="json"), variant, learned)
    space = runner._action_space(domain, params)
    if isinstance(space, spaces.Box):
        return {
            "action_kind": "continuous",
            "action_low": [float(v) for v in np.ravel(space.low)],
            "action_high": [float(v) for v in np.ravel(space.high)],
        }
    return {"action_kind": "multi-discrete" if isinstance(space, spaces.MultiDiscrete) else "discrete"}


class _Words(_Strict):
    """``seed-<k>.json`` beside a job's decisions: the words for its features and actions."""

    features: list[str]
    action_words: list[str] | None = None


def words_path(job: DecisionJob) -> str:
    return job.path.removesuffix(".parquet") + ".json"


def summarize_decisions(
    folder: RunFolder, scenario: Scenario, domain: Domain, summary: Summary, jobs: list[DecisionJob]
) -> DecisionSummary:
    settings: dict[str, DecisionSetting] = {}
    for variant in scenario.variant_names:
        learned = summary.variant(variant).best_learned
        if learned is None:
            continue
        standard, why = standard_to_ask(scenario, domain, summary, variant)
        mine = [j for j in jobs if j.variant == variant]
        words = _Words(features=[])
        if mine:
            words = folder.read_model(words_path(mine[0]), _Words)
        frames = [folder.read_parquet(j.path) for j in mine]
        n_features = sum(c[0] == "f" and c[1:].isdigit() for c in frames[0].columns) if frames else 0
        features = (
            words.features if len(words.features) == n_features else [f"obs[{k}]" for k in range(n_features)]
        )
        setting = DecisionSetting(
            learned=learned,
            standard=standard,
            best_standard=summary.variant(variant).best_heuristic,
            substituted=why,
            features=features,
            action_words=words.action_words,
            files=[j.path for j in mine],
            episodes=sum(len(j.episodes) for j in mine),
            decisions=int(sum(len(f) for f in frames)),
            **_action_bounds(domain, scenario, variant, learned),
        )
        if frames and standard is not None:
            frame = pd.concat(frames, ignore_index=True)
            setting = setting.model_copy(update={"story": explain(frame, setting)})
        settings[variant] = setting
    return DecisionSummary(variants=settings)


def read_decision_summary(folder: RunFolder) -> DecisionSummary | None:
    """``decisions/summary.json`` as fieldrl wrote it (manifest and shape checked), or None where the run
    has no decisions recorded (evaluated before fieldrl recorded them)."""
    if DECISIONS_SUMMARY not in folder.hashes():
        return None
    return folder.read_model(DECISIONS_SUMMARY, DecisionSummary)


def read_decisions(folder: RunFolder, setting: DecisionSetting) -> pd.DataFrame:
    """Every recorded decision of one setting, its columns checked against the summary."""
    frames = [folder.read_parquet(rel) for rel in setting.files]
    frame = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    wanted = [f"f{k}" for k in range(len(setting.features))]
    missing = [c for c in wanted + ["l0", "s0"] if c not in frame.columns] if frames else []
    if missing:
        raise FieldrlError(
            f"{folder.path / setting.files[0]}: decisions without column {missing[0]!r}; "
            "evaluate the run again (`fieldrl evaluate RUN_DIR`)"
        )
    return frame
