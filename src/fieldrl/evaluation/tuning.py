"""``fieldrl tune``: an equal-effort hyperparameter study for every learned entry of a scenario.

Each learned entry gets its own Optuna study (TPE sampler, median pruner) with the same number
of trials, so a comparison between algorithms compares algorithms, not tuning effort. A trial
trains the entry with one sampled configuration (:mod:`~fieldrl.policies.search_spaces`) and
scores it on the scenario's **validation seeds**, never on held-out ones: its value is the best
validation score of its checkpoints (the one validation-gated selection would keep), reported
to the study after every evaluation so the pruner can stop hopeless trials early.

Studies live in Optuna's SQLite storage inside the tuning folder. A study killed outright (even
``kill -9``) resumes with ``fieldrl tune --resume DIR``: trials that were running are marked
failed and their configurations queued again, so every entry still gets its full count of
finished trials. With ``--jobs N`` (local processes or Ray tasks) N workers share each study
through that storage, each asking for a trial, training it and telling the result, as Optuna's
distributed optimisation does; with one worker the study is deterministic.

The result of each study is a small YAML file (``tuned/<policy>.yaml``) that a scenario entry
references with ``tuned:``; the run's report names the study it came from.

A tuning folder has one writer at a time (``.fieldrl.lock``, as a run folder has; the workers of
that writer share the studies through the storage), and what it holds is read back as fieldrl
wrote it or refused with one line: ``tuning.json`` and ``scenario.yaml`` strictly, ``study.db``
only as a regular SQLite file of the folder (never a link, FIFO or device) holding every study
the settings name, and each trial's value and attributes checked before a study goes on
(:mod:`~fieldrl.evaluation.study_store`).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import fcntl
import json
import math
import os
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from fieldrl.domains import get_domain
from fieldrl.errors import FieldrlError, file_shape_error
from fieldrl.evaluation import runner, study_store
from fieldrl.evaluation.store import new_output_folder
from fieldrl.files import atomic_write_bytes, folder_lock, open_regular, read_regular
from fieldrl.progress import JobProgress
from fieldrl.scenario import (
    BUDGET_ALIASES,
    BUDGET_NAMES,
    FineTune,
    LearnedEntry,
    Scenario,
    budget_name,
    load_scenario,
    parse_scenario,
)
from fieldrl.scenario_checks import entry_of, training_vec_env

SETTINGS_FILE = "tuning.json"
SCENARIO_FILE = "scenario.yaml"
#: flock-ed by a worker while it takes a trial from the study (see _one_asker)
ASK_LOCK_FILE = ".ask.lock"
#: flock-ed by the one fieldrl command writing the folder (see fieldrl.files.folder_lock)
LOCK_FILE = ".fieldrl.lock"
#: the most trials a study may have (as ``fieldrl tune --trials`` allows)
MAX_TRIALS = 10_000
#: user attribute of the trial that runs the scenario's own hand-set configuration
HANDSET = "handset"
#: prefix of a sampled name that is one of the domain's policy params (``params.decision_s``)
PARAM_PREFIX = "params."
#: keys a user may keep at the scenario's value, and the sampled names they stand for
KEEP_ALIASES = {
    "fine_tune": (
        "fine_tune.critic_warmup",
        "fine_tune.actor_ramp",
        "fine_tune.pull_weight",
        "fine_tune.pull_fade",
        "fine_tune.jump_start",
    ),
    "policy_kwargs": ("net_arch", "activation_fn"),
    "gae_lambda": ("one_minus_gae_lambda",),
    "action_noise": ("noise_type", "noise_std"),
}


@dataclass(frozen=True)
class TrialJob:
    """One trial: the configuration the study asked for, trained on one training seed."""

    policy: str
    study: str
    trial_id: int
    number: int
    hyperparameters: dict[str, Any]
    n_envs: int
    train_steps: int
    seed: int
    params: dict[str, Any] = field(default_factory=dict)  # the entry's own domain params of this trial
    fine_tune: dict[str, Any] | None = None  # how this trial fine-tunes the warm start (None: not at all)

    @property
    def key(self) -> str:
        return f"tune {self.policy} trial {self.number}"


@dataclass
class TuningResult:
    folder: Path
    studies: dict[str, dict[str, Any]] = field(default_factory=dict)


class TuningSettings(BaseModel):
    """``tuning.json``: what ``fieldrl tune`` was asked for, read back strictly on ``--resume``.

    An edited file is refused rather than obeyed: a changed variant or policy would start studies
    beside the old trial files, a changed ``keep`` would tell the old trials' sampler another space.
    """

    model_config = ConfigDict(extra="forbid", strict=True)
    source: str = ""
    budget: str = "full"
    created: str = ""
    trials: Annotated[int, Field(ge=1, le=MAX_TRIALS)]
    policies: Annotated[list[str], Field(min_length=1)]
    variant: str
    train_steps: Annotated[int, Field(ge=1)] | None
    keep: list[str]
    seed: Annotated[int, Field(ge=0, le=2**31 - 1)]


def _optuna() -> Any:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna


def study_name(scenario: Scenario, variant: str, label: str) -> str:
    return f"{scenario.name}/{variant}/{label}"


def _space(entry: LearnedEntry, keep: tuple[str, ...], domain: Any) -> dict[str, Any]:
    """The entry's search space: its algorithm's hyperparameters and the domain's tunable policy
    params (``params.<name>``, a choice among labelled values), less what ``keep`` holds fixed."""
    from optuna.distributions import CategoricalDistribution

    from fieldrl.policies.search_spaces import fine_tune_space, search_space

    space = search_space(entry.algorithm, entry.n_envs)
    if entry.imitate is not None or entry.residual is not None:  # a warm start to keep while learning
        jump = entry.fine_tune is not None and entry.fine_tune.jump_start is not None
        space |= fine_tune_space(entry.algorithm, entry.imitate is not None, jump)
    for name, choices in domain.tunable_policy_params.items():
        space[PARAM_PREFIX + name] = CategoricalDistribution(list(choices))
    dropped = {name for k in keep for name in (k, PARAM_PREFIX + k, *KEEP_ALIASES.get(k, ()))}
    return {k: v for k, v in space.items() if k not in dropped}


def split_sample(sample: dict[str, Any], domain: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(hyperparameter sample, the entry's own domain params)`` of one sampled configuration (its
    ``fine_tune.*`` values are neither: see ``search_spaces.to_fine_tune``)."""
    from fieldrl.policies.search_spaces import FINE_TUNE_PREFIX

    hyper = {k: v for k, v in sample.items() if not k.startswith((PARAM_PREFIX, FINE_TUNE_PREFIX))}
    own = {k.removeprefix(PARAM_PREFIX): v for k, v in sample.items() if k.startswith(PARAM_PREFIX)}
    params = {name: domain.tunable_policy_params[name][label] for name, label in own.items()}
    return hyper, params


def _handset_params(
    scenario: Scenario, variant: str, entry: LearnedEntry, domain: Any, space: Any
) -> dict[str, Any]:
    """The labels of the tunable policy params' values the entry runs with as written (where one matches)."""
    current = domain.params_model.model_validate(scenario.policy_params(variant, entry.label)).model_dump()
    sample = {}
    for name, choices in domain.tunable_policy_params.items():
        if PARAM_PREFIX + name in space:
            label = next((k for k, v in choices.items() if v == current.get(name)), None)
            if label is not None:
                sample[PARAM_PREFIX + name] = label
    return sample


def _own_tunable_params(entry: LearnedEntry, domain: Any, space: dict[str, Any]) -> dict[str, Any]:
    """The tunable params the entry runs with as loaded (its ``params:``, with any earlier tuned
    file's merged in). The hand-set trial records them, so that the tuned file written when it wins
    reproduces it: without them such a file would drop, say, the reward an earlier study chose,
    and the entry would fall back to the reward its scenario wrote, which no trial scored."""
    return {
        name: value
        for name, value in entry.params.items()
        if name in domain.tunable_policy_params and PARAM_PREFIX + name in space
    }


def _width(scenario: Scenario, variant: str, entry: LearnedEntry) -> int:
    _, domain, params = runner._context(scenario.model_dump(mode="json"), variant, entry.label)
    venv = training_vec_env(scenario, domain, params, entry)(1, 0)
    try:
        return int(venv.num_envs)
    finally:
        venv.close()


def _objective_text(scenario: Scenario, variant: str, train_steps: int) -> str:
    from fieldrl.domains import get_domain

    domain = get_domain(scenario.domain)
    kpi = runner.selection_kpi(scenario, domain)
    seeds = scenario.seeds.validation or []
    label = kpi.label.lower() if kpi.label.lower().startswith("mean ") else f"mean {kpi.label.lower()}"
    where = "" if variant == "default" else f", setting {variant}"
    return (
        f"{'highest' if kpi.higher_is_better else 'lowest'} {label} on "
        f"{len(seeds)} validation seed(s) x {scenario.episodes_per_seed} episode(s){where}, best "
        f"checkpoint of {train_steps:,} training steps"
    )


# ----------------------------------------------------------------------------- the study


def tune(
    scenario_ref: str | Path,
    trials: int,
    out: str | Path | None = None,
    budget: str = "full",
    backend: Any = None,
    policies: list[str] | None = None,
    variant: str | None = None,
    train_steps: int | None = None,
    keep: tuple[str, ...] = (),
    seed: int = 0,
    show_progress: bool = True,
) -> TuningResult:
    """Create a tuning folder, its studies, and run ``trials`` trials for each selected learned entry."""
    if not 1 <= trials <= MAX_TRIALS:
        raise FieldrlError(f"--trials = {trials}: allowed: an integer from 1 to {MAX_TRIALS:,}")
    if train_steps is not None and train_steps < 1:
        raise FieldrlError(f"--train-steps = {train_steps}: allowed: an integer >= 1")
    budget = budget_name(budget)
    scenario = load_scenario(scenario_ref).with_budget(budget)
    if not scenario.seeds.validation:
        raise FieldrlError(
            f"{scenario_ref}: seeds.validation is missing; tuning scores trials on validation seeds, "
            "never on held-out ones: add e.g. `validation: {start: 5000, count: 20}` under seeds"
        )
    chosen = list(dict.fromkeys(policies or [e.label for e in scenario.policies.learned]))
    variant = variant or scenario.variant_names[0]
    _check_choices(scenario, chosen, variant, keep, _OPTION_NAMES.__getitem__)
    folder = new_output_folder(out, "tuning", f"{runner.slug(scenario.name)}-{budget}")
    folder.mkdir(parents=True, exist_ok=True)
    with folder_lock(folder, LOCK_FILE, "tuning folder"):
        if any(p.name != LOCK_FILE for p in folder.iterdir()):  # another `tune --out` got here first
            raise FieldrlError(
                f"--out = {str(folder)!r}: already exists and is not empty; choose a new folder"
            )
        snapshot = yaml.safe_dump(
            scenario.model_dump(mode="json", exclude={"budgets"}), sort_keys=False, allow_unicode=True
        )
        then = "start the study again with a new --out"
        atomic_write_bytes(folder / SCENARIO_FILE, snapshot.encode(), then)
        settings = TuningSettings(
            source=str(scenario_ref),
            budget=budget,
            created=dt.datetime.now().isoformat(),
            trials=trials,
            policies=chosen,
            variant=variant,
            train_steps=train_steps,
            keep=list(keep),
            seed=seed,
        )
        atomic_write_bytes(folder / SETTINGS_FILE, settings.model_dump_json(indent=1).encode(), then)
        _create_studies(folder, scenario, settings)
        return _run_study(folder, backend, show_progress)


#: how a field of the settings is named when it comes from the command line
_OPTION_NAMES = {"policies": "--policy", "variant": "--variant", "keep": "--keep"}


def _check_choices(
    scenario: Scenario, labels: list[str], variant: str, keep: tuple[str, ...], name: Callable[[str], str]
) -> None:
    """The policies, variant and ``keep`` of a study exist in ``scenario`` and fit together.

    :param name: how to name a field in a message (``--policy`` on the command line, ``tuning.json:
        policies`` on resuming).
    """
    known = [e.label for e in scenario.policies.learned]
    for label in labels:
        if label not in known:
            allowed = ", ".join(known) or "none (no learned entry)"
            raise FieldrlError(f"{name('policies')} = {label!r}: allowed: {allowed}")
    if variant not in scenario.variant_names:
        raise FieldrlError(f"{name('variant')} = {variant!r}: allowed: {', '.join(scenario.variant_names)}")
    for label in labels:
        entry = _learned(scenario, label)
        if not entry.runs_in(variant):
            allowed = ", ".join(entry.variants or [])
            raise FieldrlError(
                f"{name('variant')} = {variant!r}: {label} does not run in it; allowed: {allowed}"
            )
    _check_keep(scenario, labels, keep, name("keep"))


def _learned(scenario: Scenario, label: str) -> LearnedEntry:
    entry = entry_of(scenario, label)
    assert isinstance(entry, LearnedEntry)
    return entry


def _check_keep(scenario: Scenario, labels: list[str], keep: tuple[str, ...], option: str = "--keep") -> None:
    """Every ``--keep`` names something the chosen entries' search spaces tune."""
    domain = get_domain(scenario.domain)
    known = set(KEEP_ALIASES)
    for label in labels:
        for name in _space(_learned(scenario, label), (), domain):
            known |= {name, name.removeprefix(PARAM_PREFIX)}
    for name in keep:
        if name not in known:
            raise FieldrlError(f"{option} = {name!r}: not tuned here; allowed: {', '.join(sorted(known))}")


def _create_studies(folder: Path, scenario: Scenario, settings: TuningSettings) -> None:
    """Every study of a new tuning folder, before its first trial: so that on ``--resume`` a study
    missing from study.db is a lost one (refused), never one to start over beside its trial files."""
    optuna = _optuna()
    direction = "maximize" if _higher_is_better(scenario) else "minimize"
    with study_store.storage_errors(folder):
        storage = study_store.storage(folder, existing=False)
        for label in settings.policies:
            optuna.create_study(
                study_name=study_name(scenario, settings.variant, label), storage=storage, direction=direction
            )


def resume_tuning(folder: str | Path, backend: Any = None, show_progress: bool = True) -> TuningResult:
    """Finish an interrupted study: trials that were running are retried, finished ones kept."""
    path = Path(folder)
    if not path.is_dir() or not os.path.lexists(path / SETTINGS_FILE):
        raise FieldrlError(f"--resume = {str(folder)!r}: not a fieldrl tuning folder (no {SETTINGS_FILE})")
    with folder_lock(path, LOCK_FILE, "tuning folder"):
        return _run_study(path, backend, show_progress)


def _read_text(path: Path) -> str:
    """A file of the tuning folder as text; a missing, non-regular or undecodable one is one line."""
    try:
        return read_regular(path).decode("utf-8")
    except FileNotFoundError:
        raise FieldrlError(f"{path}: missing; not a complete fieldrl tuning folder") from None
    except OSError as exc:
        raise FieldrlError(f"{path}: cannot read ({exc.strerror or exc})") from None
    except UnicodeDecodeError as exc:
        raise FieldrlError(f"{path}: not readable as text ({exc}); was the file edited?") from None


def _read_folder(folder: Path) -> tuple[Scenario, TuningSettings]:
    """The tuning folder's scenario and settings, checked against each other (see TuningSettings)."""
    scenario = parse_scenario(_read_text(folder / SCENARIO_FILE), str(folder / SCENARIO_FILE))
    path = folder / SETTINGS_FILE
    try:
        data = json.loads(_read_text(path))
    except json.JSONDecodeError as exc:
        raise FieldrlError(f"{path}: not valid JSON ({exc}); was the file edited?") from None
    try:
        settings = TuningSettings.model_validate(data)
    except ValidationError as exc:
        raise file_shape_error(exc, str(path)) from None
    if settings.budget not in (*BUDGET_NAMES, *BUDGET_ALIASES):
        raise FieldrlError(f"{path}: budget = {settings.budget!r}: allowed: {', '.join(BUDGET_NAMES)}")
    if len(set(settings.policies)) != len(settings.policies):
        raise FieldrlError(f"{path}: policies = {settings.policies!r}: each policy at most once")
    _check_choices(
        scenario,
        settings.policies,
        settings.variant,
        tuple(settings.keep),
        lambda name: f"{path}: {name}",
    )
    return scenario, settings


def _sampler(seed: int, trials: int) -> Any:
    optuna = _optuna()
    return optuna.samplers.TPESampler(
        seed=seed, n_startup_trials=min(10, max(3, trials // 3)), multivariate=True, constant_liar=True
    )


def _pruner(steps: int) -> Any:
    return _optuna().pruners.MedianPruner(n_startup_trials=5, n_warmup_steps=steps // 3)


def _run_study(folder: Path, backend: Any, show_progress: bool) -> TuningResult:
    """Run (or finish) every study of a tuning folder. The caller holds the folder's lock."""
    scenario, settings = _read_folder(folder)
    _check_ask_lock(folder)
    with study_store.storage_errors(folder):
        return _run_studies(folder, scenario, settings, backend, show_progress)


def _run_studies(
    folder: Path, scenario: Scenario, settings: TuningSettings, backend: Any, show_progress: bool
) -> TuningResult:
    from fieldrl.evaluation.backends import Backend

    optuna = _optuna()
    backend = backend if backend is not None else Backend()
    variant, trials = settings.variant, settings.trials
    storage = study_store.storage(folder)
    study_store.check_studies_exist(
        folder, storage, [study_name(scenario, variant, label) for label in settings.policies], SETTINGS_FILE
    )
    result = TuningResult(folder)
    data = scenario.model_dump(mode="json")
    domain = get_domain(scenario.domain)
    for label in settings.policies:
        entry = _learned(scenario, label)
        steps = settings.train_steps or entry.train_steps
        study = optuna.load_study(
            study_name=study_name(scenario, variant, label),
            storage=storage,
            sampler=_sampler(settings.seed, trials),
            pruner=_pruner(steps),
        )
        trial_list = study_store.checked_trials(folder, study)
        space = _space(entry, tuple(settings.keep), domain)
        if not trial_list:
            _enqueue_handset(study, entry, space, _handset_params(scenario, variant, entry, domain, space))
        _requeue_interrupted(study)
        remaining = trials - _finished(study)
        if remaining > 0:
            workers = min(backend.jobs, remaining)
            sampling = {**settings.model_dump(), "seed": _sampling_seed(settings.seed, study)}
            calls = [(data, variant, str(folder), label, sampling, worker) for worker in range(workers)]
            with JobProgress(f"tuning {label}", remaining, enabled=show_progress) as progress:
                backend.execute(study_worker, calls, progress, None)
        result.studies[label] = _write_tuned(folder, scenario, variant, entry, study, space, steps)
    _write_summary(folder, result)
    return result


def _check_ask_lock(folder: Path) -> None:
    """The workers' ask lock is a regular file of the folder (or not there yet): checked before any
    trial is touched, so a link or FIFO planted there stops the study before it writes anything."""
    with contextlib.suppress(FileNotFoundError):
        os.close(open_regular(folder / ASK_LOCK_FILE, follow=False))


def _sampling_seed(seed: int, study: Any) -> int:
    """The samplers' seed for this round of workers: the study's own seed on a new study, another
    one for each resumption. A resumed study's samplers seeded as before would propose the very
    configurations they proposed before the interruption (TPE's start-up trials are random draws),
    so the study would spend its remaining trials on configurations it had already scored."""
    from optuna.trial import TrialState

    started = [t for t in study.get_trials(deepcopy=False) if t.state != TrialState.WAITING]
    return seed + 100_003 * len(started)


def _higher_is_better(scenario: Scenario) -> bool:
    from fieldrl.domains import get_domain

    return bool(runner.selection_kpi(scenario, get_domain(scenario.domain)).higher_is_better)


def _counts(t: Any) -> bool:
    """Whether a trial counts toward the budget: finished on its own, or still running."""
    from optuna.trial import TrialState

    if t.state in (TrialState.COMPLETE, TrialState.PRUNED, TrialState.RUNNING):
        return True
    return t.state == TrialState.FAIL and "error" in t.user_attrs


def _taken(study: Any) -> int:
    """Trials that count toward the budget, finished or still running."""
    return sum(1 for t in study.get_trials(deepcopy=False) if _counts(t))


def _finished(study: Any) -> int:
    """Trials that count toward the budget and are over: complete, pruned, or failed on their own."""
    from optuna.trial import TrialState

    return sum(1 for t in study.get_trials(deepcopy=False) if _counts(t) and t.state != TrialState.RUNNING)


def _enqueue_handset(study: Any, entry: LearnedEntry, space: dict[str, Any], params: dict[str, Any]) -> None:
    """Make a new study's first trial the scenario's own, hand-set configuration.

    So a study can only end at the hand-set values or at something that scored better on the
    validation seeds: with the few trials a CPU budget allows, TPE's random start-up trials alone
    can all be worse than a practitioner's sensible defaults. The trial runs the entry's
    hyperparameters exactly; the sampler is told the nearest point of the search space.
    """
    from fieldrl.policies.search_spaces import handset_sample

    sample = handset_sample(entry.algorithm, entry.hyperparameters, entry.n_envs, space)
    study.enqueue_trial({**sample, **params}, user_attrs={HANDSET: True})


def _requeue_interrupted(study: Any) -> None:
    """Trials left RUNNING by a killed study: mark them failed and ask for their configuration again."""
    from optuna.trial import TrialState

    for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        study._storage.set_trial_user_attr(t._trial_id, "interrupted", True)
        study._storage.set_trial_state_values(t._trial_id, TrialState.FAIL)
        handset = {HANDSET: True} if t.user_attrs.get(HANDSET) else None
        study.enqueue_trial(t.params, user_attrs=handset, skip_if_exists=False)


def study_worker(
    scenario_data: dict[str, Any],
    variant: str,
    folder: str,
    label: str,
    settings: dict[str, Any],
    worker: int,
    events: Any,
) -> int:
    """Run trials of one study until it has its budget of trials; return how many this worker ran.

    Several workers (processes, or Ray tasks on other machines) share the study through its
    storage, as Optuna's distributed optimisation does: each asks for a trial, trains it, and
    tells the result. A trial asked after the budget is filled (two workers asking at once for
    the last one) is marked ``surplus`` and not run, so every study ends with exactly its count.
    Workers sharing the study folder check the budget under the ask lock and never ask for a
    surplus trial; the check after asking is for workers the lock does not reach (a Ray worker
    whose copy of the folder is on another machine's file system).
    """
    path = Path(folder)
    # as one line, also from a worker process (SQLAlchemy's errors do not pickle well)
    with study_store.storage_errors(path), _disk_full(path):
        return _work(scenario_data, variant, path, label, settings, worker, events)


def _is_disk_full(exc: BaseException) -> bool:
    return isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)


@contextlib.contextmanager
def _disk_full(folder: Path) -> Iterator[None]:
    """A full disk while a trial trains (its temporary files) as one line with the resume command."""
    try:
        yield
    except OSError as exc:
        if not _is_disk_full(exc):
            raise
        where = exc.filename or "a trial's temporary files"
        db = folder / study_store.DB_FILE
        raise FieldrlError(
            f"{where}: cannot write ({exc.strerror}); trials finished before are kept in {db} "
            f"— free space, then {study_store.resume_advice(folder)}"
        ) from None


def _work(
    scenario_data: dict[str, Any],
    variant: str,
    path: Path,
    label: str,
    settings: dict[str, Any],
    worker: int,
    events: Any,
) -> int:
    from optuna.trial import TrialState

    from fieldrl.policies.search_spaces import to_fine_tune, to_hyperparameters

    optuna = _optuna()
    scenario, domain, _ = runner._context(scenario_data, variant)
    entry = _learned(scenario, label)
    trials = int(settings["trials"])
    steps = int(settings["train_steps"] or entry.train_steps)
    space = _space(entry, tuple(settings["keep"]), domain)
    width = _width(scenario, variant, entry)
    study = optuna.load_study(
        study_name=study_name(scenario, variant, label),
        storage=study_store.storage(path),
        sampler=_sampler(int(settings["seed"]) + worker, trials),
        pruner=_pruner(steps),
    )
    ran = 0
    while _finished(study) < trials:
        with _one_asker(path):
            if _taken(study) >= trials:  # the others are running the last ones
                break
            trial = study.ask(space)
        earlier = [t for t in study.get_trials(deepcopy=False) if t.number < trial.number and _counts(t)]
        if len(earlier) >= trials:  # the budget was filled while this trial was being asked for
            study._storage.set_trial_user_attr(trial._trial_id, "surplus", True)
            study.tell(trial, state=TrialState.FAIL)
            break
        sample, params = split_sample(trial.params, domain)
        written = entry.fine_tune.model_dump(exclude_defaults=True) if entry.fine_tune is not None else None
        if trial.user_attrs.get(HANDSET):  # the scenario's own configuration, exactly
            hyperparameters, n_envs = dict(entry.hyperparameters), entry.n_envs
            params = _own_tunable_params(entry, domain, space)
            fine_tune = written
        else:
            hyperparameters, n_envs = to_hyperparameters(
                entry.algorithm, sample, steps, width, entry.hyperparameters, entry.n_envs
            )
            fine_tune = to_fine_tune(trial.params, written) if _tunes_fine_tune(space) else written
        trial.set_user_attr("hyperparameters", hyperparameters)
        trial.set_user_attr("n_envs", n_envs)
        trial.set_user_attr("params", params)
        trial.set_user_attr("fine_tune", fine_tune)
        seeds = scenario.seeds.train
        job = TrialJob(
            policy=label,
            study=study.study_name,
            trial_id=trial._trial_id,
            number=trial.number,
            hyperparameters=hyperparameters,
            n_envs=n_envs,
            train_steps=steps,
            seed=int(seeds[trial.number % len(seeds)]),
            params=params,
            fine_tune=fine_tune,
        )
        outcome = run_trial(scenario_data, variant, job, trial, events)
        _tell(study, job, outcome, path)
        ran += 1
    return ran


def _tunes_fine_tune(space: dict[str, Any]) -> bool:
    from fieldrl.policies.search_spaces import FINE_TUNE_PREFIX

    return any(k.startswith(FINE_TUNE_PREFIX) for k in space)


@contextlib.contextmanager
def _one_asker(folder: Path) -> Iterator[None]:
    """Hold the study folder's ask lock: one worker at a time takes a trial.

    Optuna hands out an enqueued trial (the hand-set one, or one a killed study re-queued) by
    reading that it waits and then marking it running. SQLite has no ``SELECT ... FOR UPDATE``,
    so two workers asking at once can both take the same trial, train it twice, and the second
    to finish fails on telling a finished trial (seen with ``--jobs 2``). An exclusive ``flock``
    around ``ask`` closes that window; the kernel drops it if the worker dies. The lock file is a
    regular file of the folder, never opened through a link (``open_regular``).
    """
    fd = open_regular(folder / ASK_LOCK_FILE, os.O_RDWR, follow=False, create=True)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _tell(study: Any, job: TrialJob, outcome: dict[str, Any], folder: Path) -> None:
    from optuna.trial import TrialState

    if outcome.get("curve"):
        rel = f"trials/{runner.slug(job.policy)}/trial-{job.number:04d}.csv"
        atomic_write_bytes(folder / rel, outcome["curve"].encode(), study_store.resume_advice(folder))
    for key in ("num_timesteps", "gradient_updates"):
        if key in outcome:
            study._storage.set_trial_user_attr(job.trial_id, key, outcome[key])
    state = outcome["state"]
    if state == "complete":
        study.tell(job.number, outcome["value"])
    elif state == "pruned":
        study.tell(job.number, state=TrialState.PRUNED)
    else:
        study._storage.set_trial_user_attr(job.trial_id, "error", outcome.get("error", "failed"))
        study.tell(job.number, state=TrialState.FAIL)


# ----------------------------------------------------------------------------- one trial


def run_trial(
    scenario_data: dict[str, Any], variant: str, job: TrialJob, trial: Any, events: Any
) -> dict[str, Any]:
    """Train one configuration and score it on the validation seeds.

    Returns ``{"state": "complete"|"pruned"|"failed", "value", "curve", ...}``; every validation
    score is reported to ``trial`` as it comes, so the study's pruner can stop the trial early.
    """
    import dataclasses

    from fieldrl.policies.learned import MODEL_FILE, VALIDATION_FILE, train_model
    from fieldrl.policies.weights import record_of

    scenario, domain, _ = runner._context(scenario_data, variant)
    base = entry_of(scenario, job.policy)
    assert isinstance(base, LearnedEntry)
    entry = base.model_copy(
        update={
            "hyperparameters": {**base.hyperparameters, **job.hyperparameters},
            "n_envs": job.n_envs,
            "train_steps": job.train_steps,
            "params": {**base.params, **job.params},
            "fine_tune": None if job.fine_tune is None else FineTune.model_validate(job.fine_tune),
        }
    )
    params = domain.params_model.model_validate({**scenario.variant_params(variant), **entry.params})
    pruned: list[bool] = []

    def observe(steps: int, value: float) -> bool:
        if not math.isfinite(value):
            return True
        trial.report(value, steps)
        if trial.should_prune():
            pruned.append(True)
            return False
        return True

    validation = runner.validation_for(scenario, domain, params, entry)
    assert validation is not None
    validation = dataclasses.replace(validation, observe=observe)
    events.put(("start", job.key, entry.train_steps))
    try:
        with tempfile.TemporaryDirectory(prefix="fieldrl-trial-") as tmp:
            artifacts = train_model(
                training_vec_env(scenario, domain, params, entry),
                entry.training_spec(),
                job.seed,
                Path(tmp),
                report=lambda done: events.put(("update", job.key, done)),
                demonstrations=runner.demonstrations_for(scenario, domain, params, entry, job.seed),
                validation=validation,
                prepare=runner.preparation_for(entry),
            )
    except (KeyboardInterrupt, FieldrlError):
        raise
    except Exception as exc:  # a configuration that breaks training (NaN losses, ...) is a bad one
        if study_store.is_storage_error(exc) or _is_disk_full(exc):
            raise  # the machine's fault, not the configuration's: the trial stays to be run again
        events.put(("done", job.key, entry.train_steps))
        return {"state": "failed", "error": f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"}
    events.put(("done", job.key, entry.train_steps))
    record = record_of(artifacts[MODEL_FILE])
    selected = record.get("selected") or {}
    outcome: dict[str, Any] = {
        "curve": artifacts.get(VALIDATION_FILE, b"").decode(),
        "num_timesteps": record.get("num_timesteps"),
        "gradient_updates": record.get("gradient_updates"),
    }
    value = selected.get("value")
    if pruned:
        return {**outcome, "state": "pruned"}
    if value is None or not math.isfinite(float(value)):
        return {**outcome, "state": "failed", "error": "no finite validation score"}
    return {**outcome, "state": "complete", "value": float(value)}


# ----------------------------------------------------------------------------- results


def _write_tuned(
    folder: Path,
    scenario: Scenario,
    variant: str,
    entry: LearnedEntry,
    study: Any,
    space: dict[str, Any],
    steps: int,
) -> dict[str, Any]:
    from fieldrl.policies.search_spaces import describe

    trials = study_store.checked_trials(folder, study)  # read back as written, whatever was done to study.db
    finished = _finished(study)
    try:
        best = study.best_trial
    except ValueError:  # no complete trial
        return {"trials": finished, "best_value": None, "file": None}
    handset = [t for t in trials if t.user_attrs.get(HANDSET) and t.value is not None]
    record = {
        "study": study.study_name,
        "trials": finished,
        "best_trial": best.number,
        "best_value": float(best.value),
        "handset_value": float(handset[0].value) if handset else None,
        "best_is_handset": bool(best.user_attrs.get(HANDSET)),
        "objective": _objective_text(scenario, variant, steps),
        "search_space": describe(space),
        "train_steps": steps,
    }
    tuned = {
        "algorithm": entry.algorithm,
        "policy": entry.label,
        "n_envs": int(best.user_attrs["n_envs"]),
        "hyperparameters": best.user_attrs["hyperparameters"],
        **({"params": best.user_attrs["params"]} if best.user_attrs.get("params") else {}),
        # {} where the study chose not to fine-tune (the entry's own section is then replaced by none)
        **(
            {"fine_tune": best.user_attrs["fine_tune"]}
            if best.user_attrs.get("fine_tune") is not None
            else {}
        ),
        "study": record,
    }
    rel = f"tuned/{runner.slug(entry.label)}.yaml"
    header = (
        f"# Tuned hyperparameters for {entry.label} ({entry.algorithm}) of scenario {scenario.name},\n"
        f"# written by `fieldrl tune` ({finished} trials). Reference it from the scenario entry:\n"
        f"#   tuned: {rel}\n"
    )
    text = header + yaml.safe_dump(tuned, sort_keys=False, allow_unicode=True)
    atomic_write_bytes(folder / rel, text.encode(), study_store.resume_advice(folder))
    return {**record, "file": rel}


def _write_summary(folder: Path, result: TuningResult) -> None:
    data = json.dumps(result.studies, indent=1).encode()
    atomic_write_bytes(folder / "results.json", data, study_store.resume_advice(folder))


def trials_frame(folder: str | Path) -> Any:
    """Every trial of a tuning folder as a table (policy, number, state, value, hyperparameters, ...)."""
    import pandas as pd

    optuna = _optuna()
    path = Path(folder)
    rows = []
    with study_store.storage_errors(path):
        storage = study_store.storage(path)
        for name in optuna.get_all_study_names(storage):
            study = optuna.load_study(study_name=name, storage=storage)
            for t in study_store.checked_trials(path, study):
                rows.append(
                    {
                        "study": name,
                        "number": t.number,
                        "state": t.state.name,
                        "value": t.value,
                        "n_envs": t.user_attrs.get("n_envs"),
                        "params": json.dumps(t.params, sort_keys=True),
                        "hyperparameters": json.dumps(t.user_attrs.get("hyperparameters")),
                        "policy_params": json.dumps(t.user_attrs.get("params") or {}),
                        "fine_tune": json.dumps(t.user_attrs.get("fine_tune")),
                        "interrupted": bool(t.user_attrs.get("interrupted", False)),
                        "handset": bool(t.user_attrs.get(HANDSET, False)),
                    }
                )
    return pd.DataFrame(rows)


__all__ = ["TrialJob", "TuningResult", "resume_tuning", "run_trial", "study_worker", "trials_frame", "tune"]
