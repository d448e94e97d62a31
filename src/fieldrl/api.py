"""The Python API: everything the CLI does, callable from a notebook.

>>> import fieldrl
>>> result = fieldrl.run("chemo/quick")
>>> result.report, result.results.head()
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import json
import os
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import pandas as pd
import yaml
from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from fieldrl.domains import get_domain
from fieldrl.errors import FieldrlError, file_shape_error
from fieldrl.evaluation import runner
from fieldrl.evaluation.backends import Backend, BackendUnavailable
from fieldrl.evaluation.readback import read_summary
from fieldrl.evaluation.store import RunFolder, library_versions, new_output_folder
from fieldrl.evaluation.summary import summarize
from fieldrl.files import sha256_of
from fieldrl.names import slug
from fieldrl.progress import JobProgress
from fieldrl.results import Summary
from fieldrl.scenario import (
    BUDGET_ALIASES,
    BUDGET_NAMES,
    Scenario,
    budget_name,
    load_scenario,
    parse_scenario,
)

if TYPE_CHECKING:  # loaded where used: replays draw with matplotlib
    from fieldrl.evaluation.replay import ReplayRecord

T = TypeVar("T")
SCENARIO_FILE = "scenario.yaml"
RUN_FILE = "run.json"
#: the SHA-256 of every user file the run's simulations read (layouts, networks, cohorts, ...)
INPUTS_FILE = "inputs.json"


@dataclass
class RunResult:
    """What a run produced. ``results`` is the tidy table (one row per episode and KPI)."""

    run_dir: Path
    results: pd.DataFrame
    summary: Summary
    report: Path


def validate(scenario: str | Path) -> Scenario:
    """Load and check a scenario; raises :class:`~fieldrl.errors.ScenarioError` if it is invalid."""
    return load_scenario(scenario)


def create_run(
    scenario: str | Path,
    out: str | Path | None = None,
    budget: str = "full",
    announce: Callable[[str], None] | None = None,
    part: tuple[int, int] | None = None,
) -> RunFolder:
    """Validate ``scenario`` and create its run folder (nothing is written if it is invalid).

    The folder is ``runs/<scenario>-<time>`` at the full budget, ``runs/<scenario>-<budget>-<time>``
    under another.

    :param announce: told, line by line, what the run takes from elsewhere than the scenario's own
        words (settings a tuned file replaced), before anything is written.
    :param part: ``(i, k)``: the run trains part i of k of the training seeds (:meth:`Scenario.part`);
        :func:`merge_runs` joins the parts into one run.
    """
    budget = budget_name(budget)
    if budget not in BUDGET_NAMES:
        raise FieldrlError(f"--budget = {budget!r}: allowed: {', '.join(BUDGET_NAMES)}")
    resolved = load_scenario(scenario).with_budget(budget)
    every_train_seed = list(resolved.seeds.train)
    if part is not None:
        resolved = resolved.part(*part)
    for entry in resolved.policies.learned:
        if announce is not None and entry.tuning is not None and entry.tuning.replaced:
            replaced = "; ".join(entry.replaced_settings())
            announce(f"{entry.label}: {entry.tuning.file} replaces what the scenario wrote: {replaced}")
    stem = slug(resolved.name) if budget == "full" else f"{slug(resolved.name)}-{budget}"
    if part is not None:
        stem += f"-part-{part[0]}-of-{part[1]}"
    path = new_output_folder(out, "runs", stem)
    folder = RunFolder(path)
    # the budget is applied already (run.json names it): its caps are not kept to be applied again
    snapshot = yaml.safe_dump(
        resolved.model_dump(mode="json", exclude={"budgets"}), sort_keys=False, allow_unicode=True
    )
    folder.write_text(SCENARIO_FILE, snapshot, record=False)
    meta: dict[str, Any] = {
        "source": str(scenario),
        "budget": budget,
        "created": dt.datetime.now().isoformat(),
    }
    if part is not None:
        meta["part"] = {"index": part[0], "of": part[1], "train_seeds": every_train_seed}
    folder.write_json(RUN_FILE, meta, record=False)
    folder.write_json("versions.json", library_versions(), record=False)
    folder.write_json(INPUTS_FILE, {"files": _pins(resolved)}, record=False)
    folder.record(SCENARIO_FILE, RUN_FILE, "versions.json", INPUTS_FILE)
    return folder


def _input_files(scenario: Scenario) -> dict[str, str]:
    """Every user file the scenario's simulations read (path -> where it is named), in any setting."""
    domain = get_domain(scenario.domain)
    named: dict[str, str] = {}
    for variant in scenario.variant_names:
        for where, path in domain.input_files(scenario.variant_params(variant)).items():
            shown = where if variant == "default" else f"{where} (setting {variant})"
            named.setdefault(str(path), shown)
    return named


def _pins(scenario: Scenario) -> dict[str, dict[str, Any]]:
    """``inputs.json``'s files: path -> where it is named, its SHA-256 and size, as the run starts."""
    pins = {}
    for path, where in _input_files(scenario).items():
        digest, size = _digest_of_input(Path(path), where)
        pins[path] = {"field": where, "sha256": digest, "bytes": size}
    return pins


def _digest_of_input(path: Path, where: str) -> tuple[str, int]:
    try:
        return sha256_of(path), path.stat().st_size
    except FileNotFoundError:
        raise FieldrlError(
            f"{path}: this run's input file ({where}) is missing; restore it, or start a new run"
        ) from None
    except OSError as exc:
        raise FieldrlError(
            f"{path}: cannot read this run's input file ({where}): {exc.strerror or exc}"
        ) from None


class _Pin(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    field: str
    sha256: str
    bytes: int


class _Inputs(BaseModel):
    """``inputs.json``: the user files the run read, pinned by SHA-256 when it started."""

    model_config = ConfigDict(extra="forbid", strict=True)
    files: dict[str, _Pin]


def _check_pins(folder: RunFolder) -> dict[str, _Pin]:
    """The run's pinned input files, each refused (by name) if it changed or went missing since."""
    if not (folder.path / INPUTS_FILE).exists():
        return {}
    try:
        pins = _Inputs.model_validate(folder.read_json(INPUTS_FILE)).files
    except ValidationError as exc:
        raise file_shape_error(exc, str(folder.path / INPUTS_FILE)) from None
    for path, pin in pins.items():
        digest, _ = _digest_of_input(Path(path), pin.field)
        if digest != pin.sha256:
            raise FieldrlError(
                f"{path}: this run's input file ({pin.field}) changed after the run started (its SHA-256 "
                f"differs from the one pinned in {INPUTS_FILE}); refusing to use it: restore the file, or "
                "start a new run with it"
            )
    return pins


def _check_all_pinned(folder: RunFolder, scenario: Scenario, pins: dict[str, _Pin]) -> None:
    """Every user file the scenario names is pinned (a run folder from before pins, or one whose
    ``inputs.json`` lost an entry, cannot vouch for the files its results came from)."""
    for path, where in _input_files(scenario).items():
        if path not in pins:
            raise FieldrlError(
                f"{path}: this run's input file ({where}) is not pinned in {folder.path / INPUTS_FILE}, "
                "so fieldrl cannot tell whether it is the file the run used; start a new run"
            )


def open_run(run_dir: str | Path, build: bool = True) -> tuple[RunFolder, Scenario, dict[str, Any]]:
    """A run folder, its scenario (checked against the manifest and validated) and ``run.json``.

    :param build: also build what only construction can judge (each learned model, the simulator), as
        ``load_scenario`` does; readers of a finished run (``report``, ``compare``, ``summary_of``) pass
        False, so they import no torch, SB3 or simulator.
    """
    folder = RunFolder(run_dir)
    if not folder.path.is_dir():
        raise FieldrlError(f"RUN_DIR = {str(run_dir)!r}: no such folder")
    snapshot = folder.read_verified(SCENARIO_FILE, "not a fieldrl run folder")
    try:
        text = snapshot.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FieldrlError(f"{folder.path / SCENARIO_FILE}: not readable as text ({exc})") from None
    pins = _check_pins(folder)  # before the scenario's validation reads any of them
    scenario = parse_scenario(text, str(folder.path / SCENARIO_FILE), build=build)
    _check_all_pinned(folder, scenario, pins)
    meta = folder.read_json(RUN_FILE) if (folder.path / RUN_FILE).exists() else {"budget": "full"}
    try:
        meta = _RunMeta.model_validate(meta).model_dump()
    except ValidationError as exc:
        raise file_shape_error(exc, str(folder.path / RUN_FILE)) from None
    return folder, scenario, meta


class RunPart(BaseModel):
    """A run of part ``index`` of ``of`` of a scenario's ``train_seeds`` (``fieldrl run --part``)."""

    model_config = ConfigDict(extra="forbid", strict=True)
    index: int
    of: int
    train_seeds: list[int]


class _RunMeta(BaseModel):
    """``run.json``: where the scenario came from, the budget it ran at, when; for a part of a study,
    which part; for merged parts, the folders they came from."""

    model_config = ConfigDict(extra="forbid", strict=True)
    source: str = ""
    budget: str = "full"
    created: str = ""
    part: RunPart | None = None
    merged_from: list[str] | None = None

    @field_validator("budget")
    @classmethod
    def _known_budget(cls, value: str) -> str:
        if value not in (*BUDGET_NAMES, *BUDGET_ALIASES):
            raise ValueError(f"allowed: {', '.join(BUDGET_NAMES)}")
        return value


def _backend(jobs: int | Backend) -> Backend:
    return jobs if isinstance(jobs, Backend) else Backend(jobs=jobs)


@contextlib.contextmanager
def _discarded_if_unreachable(folder: RunFolder) -> Iterator[None]:
    """A run folder created for a cluster that cannot be joined is removed again: nothing ran in it."""
    try:
        yield
    except BackendUnavailable:
        shutil.rmtree(folder.path, ignore_errors=True)
        raise


@contextlib.contextmanager
def _discarded_on_error(folder: RunFolder) -> Iterator[None]:
    """A folder made from others (``merge_runs``) is removed again if making it stops: no half a run."""
    try:
        yield
    except BaseException:
        shutil.rmtree(folder.path, ignore_errors=True)
        raise


def _holding_run_folder(func: Callable[..., T]) -> Callable[..., T]:
    """Run ``func(run_dir, ...)`` holding the run folder's lock: a second writer gets one clear error."""

    @functools.wraps(func)
    def locked(run_dir: str | Path, *args: Any, **kwargs: Any) -> T:
        folder = RunFolder(run_dir)
        if not (folder.path / SCENARIO_FILE).is_file():
            return func(run_dir, *args, **kwargs)  # not a run folder, which it says (no lock left behind)
        with folder.lock():
            return func(run_dir, *args, **kwargs)

    return locked


def train(
    scenario: str | Path,
    out: str | Path | None = None,
    budget: str = "full",
    jobs: int | Backend = 1,
    show_progress: bool = True,
    announce: Callable[[str], None] | None = None,
    part: tuple[int, int] | None = None,
) -> Path:
    """Create a run folder and train every learned policy on every train seed and variant
    (``announce``, ``part``: as for :func:`create_run`)."""
    folder = create_run(scenario, out, budget, announce, part)
    with _discarded_if_unreachable(folder), folder.lock():
        train_in(folder, jobs, show_progress)
    return folder.path


def pending_train_jobs(folder: RunFolder, scenario: Scenario) -> list[runner.TrainJob]:
    """Training jobs whose model is not yet recorded in the manifest."""
    from fieldrl.policies.learned import MODEL_FILE

    recorded = folder.hashes()
    return [
        job
        for job in runner.train_jobs(scenario)
        if f"{runner.model_dir(job.variant, job.policy, job.seed)}/{MODEL_FILE}" not in recorded
    ]


def train_in(folder: RunFolder, jobs: int | Backend = 1, show_progress: bool = True) -> None:
    """Train the jobs not yet done (all of them in a new run); each is recorded as it finishes.

    A job interrupted earlier continues from its last checkpoint.
    """
    from fieldrl.policies import checkpoint

    _, scenario, _ = open_run(folder.path)
    todo = pending_train_jobs(folder, scenario)
    if not todo:
        return
    data = scenario.model_dump(mode="json")

    def finished(index: int, written: list[str]) -> None:
        folder.record(*written)
        checkpoint.remove_checkpoint(folder.inside(runner.checkpoint_dir(todo[index])))

    with JobProgress("training", len(todo), enabled=show_progress) as progress:
        _backend(jobs).execute(
            runner.run_train_job, [(data, str(folder.path), job) for job in todo], progress, finished
        )
    _remove_empty_folders(folder.path / "checkpoints")


def _remove_empty_folders(root: Path) -> None:
    """The folders finished trainings' checkpoints leave empty (``checkpoints/<variant>/<policy>``)."""
    if not root.is_dir() or root.is_symlink():
        return
    for path, _, _ in sorted(os.walk(root), key=lambda entry: -len(entry[0])):  # deepest first
        with contextlib.suppress(OSError):  # not empty: a checkpoint still needed
            os.rmdir(path)


@_holding_run_folder
def evaluate(
    run_dir: str | Path,
    jobs: int | Backend = 1,
    show_progress: bool = True,
    resume: bool = False,
    trust: bool = False,
) -> pd.DataFrame:
    """Evaluate every policy of a trained run on the held-out seeds; write results and summary.

    Each finished job's results are kept (recorded) until all are merged, so ``resume=True``
    evaluates only what an interrupted evaluation had not finished. ``trust=True`` loads model
    files that are not in (or differ from) the manifest: they hold pickles, so only for files
    the user is sure of.
    """
    folder, scenario, meta = open_run(run_dir)
    every = runner.eval_jobs(scenario)
    recorded = folder.hashes()
    if resume and _evaluation_finished(recorded):  # interrupted later (stress, replay, report)
        results = folder.read_parquet("results.parquet", "evaluate it first")
        summary = read_summary(folder, scenario, get_domain(scenario.domain))
        _record_decisions(folder, scenario, summary, jobs, show_progress, trust)
        return results
    if not resume:
        _forget_partials(folder)
        recorded = folder.hashes()
    todo = [job for job in every if runner.partial_results(job)[0] not in recorded]
    started = None if resume else (EVALUATION_STARTED, {"jobs": len(every)})
    _play(folder, scenario, todo, jobs, show_progress, trust, "evaluation", started)
    hashes = folder.hashes()
    frames, traces, failures = [], [], []
    validation: dict[str, dict[str, float]] = {}
    for job in every:
        results_rel, trace_rel, failures_rel = runner.partial_results(job)
        frames.append(pd.read_parquet(folder.verified_path(results_rel, hashes[results_rel])))
        if trace_rel in hashes:
            traces.append(pd.read_parquet(folder.verified_path(trace_rel, hashes[trace_rel])))
        if failures_rel in hashes:
            failures += json.loads(folder.verified_path(failures_rel, hashes[failures_rel]).read_text())
        validation_rel = runner.partial_validation(job)
        if validation_rel in hashes:
            score = json.loads(folder.verified_path(validation_rel, hashes[validation_rel]).read_text())
            validation.setdefault(job.variant, {})[job.policy] = score["value"]
    results, summary = _write_results(
        folder, scenario, meta.get("budget", "full"), frames, traces, failures, validation, trust
    )
    _forget_partials(folder)
    if not resume:  # what was made from the previous results goes only once the new ones are written
        _forget_stress(folder)
        _forget_replays(folder)
        _forget_decisions(folder)
    _record_decisions(folder, scenario, summary, jobs, show_progress, trust)
    return results


def _write_results(
    folder: RunFolder,
    scenario: Scenario,
    budget: str,
    frames: list[pd.DataFrame],
    traces: list[pd.DataFrame],
    failures: list[Any],
    heuristic_scores: dict[str, Any],
    trust: bool = False,
) -> tuple[pd.DataFrame, Summary]:
    """``results.parquet``, ``traces.parquet`` and ``summary.json`` from the evaluation's result frames:
    the tidy table in its order, summarised with its failures, the heuristics' validation scores and
    each model's training record; returns the table and the summary."""
    results = pd.concat(frames, ignore_index=True)
    results = results.sort_values(
        ["variant", "policy", "train_seed", "eval_seed", "episode", "metric"], kind="stable"
    ).reset_index(drop=True)
    validation = {"heuristics": heuristic_scores, "learned": _training_records(folder, scenario, trust)}
    domain = get_domain(scenario.domain)
    summary = summarize(results, scenario, domain, budget, failures=failures, validation=validation)
    written = ["results.parquet", "summary.json"]
    folder.write_parquet("results.parquet", results, record=False)
    if traces:
        folder.write_parquet("traces.parquet", pd.concat(traces, ignore_index=True), record=False)
        written.append("traces.parquet")
    folder.write_json("summary.json", summary.model_dump(exclude_unset=True), record=False)
    folder.record(*written)
    return results, summary


def _record_decisions(
    folder: RunFolder,
    scenario: Scenario,
    summary: Summary,
    jobs: int | Backend,
    show_progress: bool,
    trust: bool,
) -> None:
    """What the best learned policy does differently from the best standard policy that can be asked
    (:mod:`fieldrl.evaluation.decisions`): each finished job recorded at once, so a resumed evaluation
    plays only the jobs not done yet; then ``decisions/summary.json``."""
    from fieldrl.evaluation.decisions import (
        DECISIONS_SUMMARY,
        decision_jobs,
        run_decision_job,
        summarize_decisions,
        words_path,
    )

    domain = get_domain(scenario.domain)
    every = decision_jobs(scenario, domain, summary)
    recorded = folder.hashes()
    todo = [job for job in every if job.path not in recorded]
    if todo:
        data = scenario.model_dump(mode="json")

        def finished(index: int, output: tuple[pd.DataFrame, dict[str, Any]]) -> None:
            frame, words = output
            folder.write_json(words_path(todo[index]), words, record=False)
            folder.write_parquet(todo[index].path, frame, record=False)
            folder.record(words_path(todo[index]), todo[index].path)

        hashes = folder.hashes()
        runner.check_learned_models(
            data,
            str(folder.path),
            [runner.EvalJob(j.variant, j.learned, j.train_seed) for j in todo],
            hashes,
            trust,
        )
        with JobProgress("decisions", len(todo), enabled=show_progress) as progress:
            _backend(jobs).execute(
                run_decision_job,
                [(data, str(folder.path), job, hashes, trust) for job in todo],
                progress,
                finished,
            )
    decided = summarize_decisions(folder, scenario, domain, summary, every)
    folder.write_json(DECISIONS_SUMMARY, decided.model_dump(mode="json"))


def _play(
    folder: RunFolder,
    scenario: Scenario,
    todo: list[runner.EvalJob],
    jobs: int | Backend,
    show_progress: bool,
    trust: bool,
    label: str,
    started: tuple[str, Any] | None = None,
) -> None:
    """Play the evaluation (or stress) jobs ``todo``, each finished one's results, failures, heuristic
    validation score and trace (not a stress job's: the report draws plain episodes) written and
    recorded at once, so that an interruption loses only the jobs still running. ``started``: a JSON
    file recorded once the learned models are checked, before the first job (nothing is written for
    a refused model)."""
    if not todo:
        return
    data = scenario.model_dump(mode="json")

    def finished(index: int, output: tuple[pd.DataFrame, pd.DataFrame | None, list[Any], Any]) -> None:
        job = todo[index]
        results_rel, trace_rel, failures_rel = runner.partial_results(job)
        frame, trace, failures, validation = output
        written = [results_rel]
        if validation is not None:
            validation_rel = runner.partial_validation(job)
            folder.write_json(validation_rel, {"value": validation}, record=False)
            written.append(validation_rel)
        folder.write_parquet(results_rel, frame, record=False)
        if trace is not None and job.axis is None:
            folder.write_parquet(trace_rel, trace, record=False)
            written.append(trace_rel)
        if failures:
            folder.write_json(failures_rel, failures, record=False)
            written.append(failures_rel)
        folder.record(*written)

    hashes = folder.hashes()
    runner.check_learned_models(data, str(folder.path), todo, hashes, trust)
    if started is not None:
        folder.write_json(*started)
        hashes = folder.hashes()
    with JobProgress(label, len(todo), enabled=show_progress) as progress:
        _backend(jobs).execute(
            runner.run_eval_job,
            [(data, str(folder.path), job, hashes, trust) for job in todo],
            progress,
            finished,
        )


def _training_records(folder: RunFolder, scenario: Scenario, trust: bool = False) -> dict[str, Any]:
    """What each trained model's weights file says about its training (steps, updates, selection).

    Read from the files themselves (their safetensors header), not from the scenario's stated budget;
    ``trust``: from the weights files evaluated, whether the manifest lists them or not.
    """
    from fieldrl.policies.learned import MODEL_FILE
    from fieldrl.policies.weights import read_record

    hashes = folder.hashes()
    records: dict[str, Any] = {}
    for job in runner.train_jobs(scenario):
        rel = f"{runner.model_dir(job.variant, job.policy, job.seed)}/{MODEL_FILE}"
        if trust and folder.inside(rel).is_file():
            path = folder.inside(rel)
        elif rel in hashes:
            path = folder.verified_path(rel, hashes[rel])
        else:
            continue
        records.setdefault(job.variant, {}).setdefault(job.policy, {})[str(job.seed)] = read_record(path)
    return records


#: recorded when an evaluation starts afresh and forgotten with the other partial files once its
#: results are written: a run with results and no partial file has finished its latest evaluation
EVALUATION_STARTED = "partial/evaluation-started.json"


def _evaluation_finished(recorded: dict[str, str]) -> bool:
    """The latest evaluation wrote its results: nothing of it is left under ``partial/``."""
    return "results.parquet" in recorded and not any(rel.startswith("partial/") for rel in recorded)


def _forget_partials(folder: RunFolder) -> None:
    partials = [rel for rel in folder.hashes() if rel.startswith("partial/")]
    folder.forget(*partials)
    shutil.rmtree(folder.path / "partial", ignore_errors=True)


def _forget_decisions(folder: RunFolder) -> None:
    """A new evaluation may choose other best policies: the decisions recorded for the old ones go."""
    folder.forget(*(rel for rel in folder.hashes() if rel.startswith("decisions/")))
    shutil.rmtree(folder.inside("decisions"), ignore_errors=True)


def _forget_stress(folder: RunFolder) -> None:
    """A new evaluation makes every stress result of the run stale: they are dropped with it."""
    folder.forget(*(rel for rel in folder.hashes() if rel.startswith("stress/")))
    shutil.rmtree(folder.inside("stress"), ignore_errors=True)


def _forget_replays(folder: RunFolder) -> None:
    """A new evaluation may name other best policies: every replay of the run is dropped with it."""
    from fieldrl.evaluation.replay import forget_replays

    forget_replays(folder)


@_holding_run_folder
def stress(
    run_dir: str | Path,
    axes: list[tuple[str, list[float] | None]] | None = None,
    jobs: int | Backend = 1,
    show_progress: bool = True,
) -> Any:
    """Play an evaluated run's held-out episodes again while one condition of the world moves away from
    training (:mod:`fieldrl.evaluation.stress`); write ``stress/results.parquet`` and ``stress/summary.json``.

    :param axes: ``(axis, points or None for the domain's)`` to test; None: the scenario's ``stress``
        section, else every axis of the domain. Each finished job is kept (recorded), so an interrupted
        stress test, or one on another axis later, plays only what is not done yet. Nothing is trained.
    """
    from fieldrl.evaluation.stress import (
        STRESS_COLUMNS,
        STRESS_RESULTS,
        STRESS_SUMMARY,
        read_stress_summary,
        stress_jobs,
        stress_plan,
        summarize_stress,
    )

    folder, scenario, _ = open_run(run_dir)
    domain = get_domain(scenario.domain)
    folder.require("summary.json", "evaluate the run first (`fieldrl evaluate RUN_DIR`)")
    summary = read_summary(folder, scenario, domain)
    earlier = read_stress_summary(folder)  # axes stressed before stay in the map, unless asked again
    plan = {**(earlier.plan() if earlier is not None else {}), **stress_plan(scenario, domain, axes)}
    every = stress_jobs(scenario, plan)
    recorded = folder.hashes()
    todo = [job for job in every if runner.partial_results(job)[0] not in recorded]
    _play(folder, scenario, todo, jobs, show_progress, False, "stress")
    hashes = folder.hashes()
    frames, failures = [], []
    for job in every:
        results_rel, _, failures_rel = runner.partial_results(job)
        frame = folder.read_parquet(results_rel)
        frames.append(frame.assign(axis=job.axis, point=job.point))
        if failures_rel in hashes:
            failures += [{**f, "axis": job.axis, "point": job.point} for f in folder.read_json(failures_rel)]
    results = pd.concat(frames, ignore_index=True)[STRESS_COLUMNS]
    stressed = summarize_stress(results, failures, scenario, domain, plan, summary)
    folder.write_parquet(STRESS_RESULTS, results, record=False)
    folder.write_json(STRESS_SUMMARY, stressed.model_dump(mode="json"), record=False)
    folder.record(STRESS_RESULTS, STRESS_SUMMARY)
    return stressed


@_holding_run_folder
def replay(
    run_dir: str | Path,
    seed: int | None = None,
    policies: list[str] | None = None,
    variant: str | None = None,
    show_progress: bool = True,
) -> ReplayRecord:
    """Play two policies of an evaluated run on the same held-out case, side by side
    (:mod:`fieldrl.evaluation.replay`): ``replay/<setting>/seed-<S>/`` gets a GIF (an MP4 where ffmpeg is
    there), the storyboard's PNGs and ``replay.json``; returns that record. Nothing is trained.

    :param seed: a held-out seed (default: the first on which neither policy's episode failed).
    :param policies: two policy labels, left then right (default: the best standard policy and the best
        learned policy on the primary KPI).
    :param variant: the setting (default: the scenario's first).
    """
    from fieldrl.evaluation.replay import make_replay, plan_replay

    folder, scenario, _ = open_run(run_dir)
    domain = get_domain(scenario.domain)
    folder.require("summary.json", "evaluate the run first (`fieldrl evaluate RUN_DIR`)")
    plan = plan_replay(scenario, domain, read_summary(folder, scenario, domain), seed, policies, variant)
    with JobProgress("replay", len(plan.sides) + 1, enabled=show_progress) as progress:
        return make_replay(folder, scenario, domain, plan, progress)


def _replay_for_report(run_dir: Path, show_progress: bool) -> None:
    """The replay ``run`` makes for its report's storyboard (default case and policies); a run where none
    can be made (fewer than two evaluated policies, an episode that fails) is reported without one."""
    from fieldrl.evaluation.replay import ReplayUnavailable

    with contextlib.suppress(ReplayUnavailable):
        replay(run_dir, show_progress=show_progress)


def merge_runs(
    parts: list[str | Path],
    out: str | Path | None = None,
    jobs: int | Backend = 1,
    show_progress: bool = True,
) -> RunResult:
    """Join the evaluated parts of one study (``fieldrl run --part I/K``) into one run folder, as if it
    had trained every seed at once: the same held-out seeds, every training seed's models and results,
    the heuristics once (they must agree across parts), then summary, decisions and report as ``run``
    makes them. Every file taken from a part is checked against that part's manifest first."""
    opened = [open_run(p) for p in parts]
    full = _merged_scenario([str(p) for p in parts], opened)
    first_folder, _, first_meta = opened[0]
    stem = f"{slug(full.name)}" + ("" if first_meta["budget"] == "full" else f"-{first_meta['budget']}")
    folder = RunFolder(new_output_folder(out, "runs", f"{stem}-merged"))
    folder.path.mkdir(parents=True, exist_ok=True)
    with _discarded_on_error(folder), folder.lock():
        snapshot = yaml.safe_dump(full.model_dump(mode="json", exclude={"budgets"}), sort_keys=False)
        folder.write_text(SCENARIO_FILE, snapshot, record=False)
        meta = {
            "source": first_meta["source"],
            "budget": first_meta["budget"],
            "created": dt.datetime.now().isoformat(),
            "merged_from": [str(Path(p).resolve()) for p in parts],
        }
        folder.write_json(RUN_FILE, meta, record=False)
        copied = [RUN_FILE, SCENARIO_FILE]
        for rel in ("versions.json", INPUTS_FILE):
            folder.write_bytes(
                rel, first_folder.read_verified(rel, "not a complete run folder"), record=False
            )
            copied.append(rel)
        for part_folder, _, _ in opened:
            for rel in part_folder.hashes():
                if rel.startswith("models/"):
                    folder.write_bytes(
                        rel, part_folder.read_verified(rel, "its manifest lists it"), record=False
                    )
                    copied.append(rel)
        folder.record(*copied)
        frames, traces, failures, heuristic_scores = _merged_results(opened)
        results, summary = _write_results(
            folder, full, meta["budget"], frames, traces, failures, heuristic_scores
        )
        _record_decisions(folder, full, summary, jobs, show_progress, trust=False)
        if full.stress is not None:
            stress(folder.path, jobs=jobs, show_progress=show_progress)
        _replay_for_report(folder.path, show_progress)
        pdf = report(folder.path)
    return RunResult(folder.path, results, summary_of(folder.path), pdf)


def _merged_scenario(names: list[str], opened: list[tuple[RunFolder, Scenario, dict[str, Any]]]) -> Scenario:
    """The study the parts were cut from; refused in one line unless they are its parts, each once,
    all of them, at one budget, evaluated."""
    if len(opened) < 2:
        raise FieldrlError(f"RUN_DIR = {names!r}: give two or more part folders to merge")
    first_folder, first, first_meta = opened[0]
    part0 = first_meta.get("part")
    seen: set[int] = set()
    for name, (folder, scenario, meta) in zip(names, opened, strict=True):
        part = meta.get("part")
        if part is None:
            raise FieldrlError(f"RUN_DIR = {name!r}: not a part of a study (it was not run with --part I/K)")
        folder.require("results.parquet", "evaluate it first (`fieldrl run --resume RUN_DIR`)")
        if (part["of"], part["train_seeds"]) != (part0["of"], part0["train_seeds"]) or meta["budget"] != (
            first_meta["budget"]
        ):
            raise FieldrlError(
                f"RUN_DIR = {name!r}: part {part['index']}/{part['of']} at budget {meta['budget']!r} of "
                f"training seeds {part['train_seeds']}; {names[0]!r} is part {part0['index']}/{part0['of']} "
                f"at budget {first_meta['budget']!r} of {part0['train_seeds']}: not parts of one study"
            )
        other = scenario.model_dump(mode="json", exclude={"seeds"})
        if other != first.model_dump(mode="json", exclude={"seeds"}) or (
            scenario.seeds.eval,
            scenario.seeds.validation,
        ) != (first.seeds.eval, first.seeds.validation):
            raise FieldrlError(
                f"RUN_DIR = {name!r}: its scenario differs from {names[0]!r}'s beyond the training seeds"
            )
        if part["index"] in seen:
            raise FieldrlError(f"RUN_DIR = {name!r}: part {part['index']}/{part['of']} is given twice")
        seen.add(part["index"])
    missing = sorted(set(range(1, part0["of"] + 1)) - seen)
    if missing:
        raise FieldrlError(
            f"RUN_DIR: part(s) {', '.join(str(i) for i in missing)} of {part0['of']} are missing; all "
            f"{part0['of']} parts are needed"
        )
    data = first.model_dump()
    data["seeds"]["train"] = part0["train_seeds"]
    return Scenario.model_validate(data)


def _merged_results(
    opened: list[tuple[RunFolder, Scenario, dict[str, Any]]],
) -> tuple[list[pd.DataFrame], list[pd.DataFrame], list[Any], dict[str, Any]]:
    """Every part's learned results and the heuristics' once: ``(result frames, trace frames, failures,
    the heuristics' validation scores)``; refused if the parts' heuristics disagree (they are the same
    rules on the same seeds, so they must not)."""
    heuristic_names = {e.label for e in opened[0][1].policies.heuristics}
    frames, traces, failures = [], [], []
    heuristic_scores: dict[str, Any] = {}
    reference: pd.DataFrame | None = None
    for index, (folder, scenario, _) in enumerate(opened):
        results = folder.read_parquet("results.parquet", "evaluate it first")
        summary = read_summary(folder, scenario, get_domain(scenario.domain))
        is_heuristic = results["policy"].isin(heuristic_names)
        heuristics = results[is_heuristic].reset_index(drop=True)
        if reference is None:
            reference = heuristics
            frames.append(results)
            heuristic_scores = {} if summary.validation is None else summary.validation.heuristics
        else:
            if not heuristics.equals(reference):
                raise FieldrlError(
                    f"{folder.path}: its heuristics' results differ from {opened[0][0].path}'s on the same "
                    "held-out seeds: the parts did not run the same study (another fieldrl or simulator "
                    "version?)"
                )
            frames.append(results[~is_heuristic])
        if "traces.parquet" in folder.hashes():
            trace = folder.read_parquet("traces.parquet")
            traces.append(trace if index == 0 else trace[~trace["policy"].isin(heuristic_names)])
        failures += [f for f in summary.failed_episodes if index == 0 or f.policy not in heuristic_names]
    return frames, traces, failures, heuristic_scores


@_holding_run_folder
def report(run_dir: str | Path) -> Path:
    """(Re-)render ``report.pdf`` from a run folder's results; never trains or steps an env."""
    from fieldrl.reports.pdf import build_report

    folder, scenario, meta = open_run(run_dir, build=False)
    folder.require("results.parquet", "evaluate the run first (`fieldrl evaluate RUN_DIR`)")
    return build_report(folder, scenario, meta)


def run(
    scenario: str | Path,
    out: str | Path | None = None,
    budget: str = "full",
    jobs: int | Backend = 1,
    show_progress: bool = True,
    announce: Callable[[str], None] | None = None,
    part: tuple[int, int] | None = None,
) -> RunResult:
    """Train, evaluate and report in one go; returns the run folder, results and report path
    (``announce``, ``part``: as for :func:`create_run`)."""
    folder = create_run(scenario, out, budget, announce, part)
    with _discarded_if_unreachable(folder), folder.lock():
        return _finish(folder, jobs, show_progress, resume=False)


@_holding_run_folder
def resume(run_dir: str | Path, jobs: int | Backend = 1, show_progress: bool = True) -> RunResult:
    """Finish an interrupted run: train what is untrained (from checkpoints), evaluate what is
    unevaluated, and report. Finished work is never redone."""
    folder, _, _ = open_run(run_dir)
    if (folder.path / "report.pdf").is_file() and "report.pdf" in folder.hashes():
        raise FieldrlError(f"--resume = {str(run_dir)!r}: this run is complete (its report exists)")
    return _finish(folder, jobs, show_progress, resume=True)


def _finish(folder: RunFolder, jobs: int | Backend, show_progress: bool, resume: bool) -> RunResult:
    train_in(folder, jobs, show_progress)
    results = evaluate(folder.path, jobs, show_progress, resume=resume)
    _, scenario, _ = open_run(folder.path, build=False)  # evaluate has just built and checked it
    if scenario.stress is not None:
        stress(folder.path, jobs=jobs, show_progress=show_progress)
    _replay_for_report(folder.path, show_progress)
    pdf = report(folder.path)
    return RunResult(folder.path, results, summary_of(folder.path), pdf)


def summary_of(run_dir: str | Path) -> Summary:
    """An evaluated run's ``summary.json``, its shape checked against the run's scenario."""
    folder, scenario, _ = open_run(run_dir, build=False)
    return read_summary(folder, scenario, get_domain(scenario.domain))


def load_model(run_dir: str | Path, policy: str, seed: int | None = None, variant: str | None = None) -> Any:
    """The trained SB3 model of learned policy ``policy`` (training seed ``seed``, default the first).

    The model is rebuilt from the run's scenario and its weights file is loaded into it (nothing is
    unpickled); ``model.save("model.zip")`` then exports an ordinary SB3 zip.
    """
    from fieldrl.evaluation.runner import EvalJob, build_policy

    folder, scenario, _ = open_run(run_dir)
    labels = [e.label for e in scenario.policies.learned]
    if policy not in labels:
        raise FieldrlError(
            f"policy = {policy!r}: learned policies of this run: {', '.join(labels) or 'none'}"
        )
    entry = next(e for e in scenario.policies.learned if e.label == policy)
    runs_in = scenario.variants_of(entry)
    variant = variant or runs_in[0]
    if variant not in runs_in:
        raise FieldrlError(f"variant = {variant!r}: {policy} ran in: {', '.join(runs_in)}")
    seed = scenario.seeds.train[0] if seed is None else seed
    if seed not in scenario.seeds.train:
        raise FieldrlError(f"seed = {seed!r}: training seeds of this run: {scenario.seeds.train}")
    domain = get_domain(scenario.domain)
    params = domain.params_model.model_validate(scenario.policy_params(variant, policy))
    loaded = build_policy(
        scenario, domain, params, EvalJob(variant, policy, seed), str(folder.path), folder.hashes()
    )
    return getattr(loaded, "learned", loaded).model


def compare(run_dirs: list[str | Path]) -> pd.DataFrame:
    """KPI means with CIs across runs: one row per (run, variant, policy, KPI).

    Each row names the run's domain and the KPI's label, unit and direction, so runs of different
    domains (different KPIs) can be shown side by side. Runs are labelled by folder name, or by full
    path where two folders share a name.
    """
    unique = list(dict.fromkeys(Path(r).resolve() for r in run_dirs))
    names_clash = len({u.name for u in unique}) < len(unique)
    rows = []
    for run_dir in unique:
        folder, scenario, _ = open_run(run_dir, build=False)
        summary = read_summary(folder, scenario, get_domain(scenario.domain))
        label = str(folder.path) if names_clash else folder.path.name
        for variant, entry in summary.variants.items():
            for policy, values in entry.policies.items():
                for name, stats in values.items():
                    kpi = summary.kpi(name)
                    rows.append(
                        {
                            "run": label,
                            "domain": summary.domain or "",
                            "variant": variant,
                            "policy": policy,
                            "kpi": name,
                            "label": kpi.label,
                            "unit": kpi.unit,
                            "higher_is_better": kpi.higher_is_better,
                            "n_cases": stats.n_eval_seeds,
                            "mean": stats.mean.value,
                            "low": stats.mean.low,
                            "high": stats.mean.high,
                        }
                    )
    return pd.DataFrame(rows)
