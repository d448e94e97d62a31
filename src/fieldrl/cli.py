"""``fieldrl`` command line: thin; parses, calls :mod:`fieldrl.api`, prints with rich.

Every user-fixable problem ends as one line on stderr and exit status 2. Heavy modules (torch,
SB3, the simulators, :mod:`fieldrl.api`) are imported inside the commands that need them, so
``--help``, ``--version`` and ``list`` answer at once.
"""

# ruff: noqa: E402  (the Ctrl-C guard below must be set before the imports)

from __future__ import annotations

import os
import signal
import sys


def _interrupted_while_starting(signum: int, frame: object) -> None:
    sys.stderr.write("interrupted (nothing was written)\n")
    sys.stderr.flush()
    # out at once: an exception raised here would unwind through half-done (native) imports
    os._exit(130)


# A Ctrl-C while Python is still importing should not print an import traceback.
# Left alone where SIGINT is ignored (background jobs, fieldrl's own worker processes).
_QUIET_START = signal.getsignal(signal.SIGINT) is signal.default_int_handler
if _QUIET_START:
    signal.signal(signal.SIGINT, _interrupted_while_starting)

import functools
import importlib.util
import math
from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

try:  # typer >= 0.20 carries its own copy of click
    from typer._click.exceptions import UsageError
except ImportError:  # pragma: no cover - older typer on the installed click
    from click.exceptions import UsageError

from fieldrl.errors import FieldrlError, Terminated

if TYPE_CHECKING:
    from rich.console import Console

    from fieldrl import api
    from fieldrl.results import Summary

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # click's help layout: flags without a "<bool>" type, 80 columns
    help="Train, evaluate and report RL policies against field heuristics on real simulators.",
)


if _QUIET_START:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def _console(stderr: bool = False) -> Console:
    """A console for this call: rich fixes a console's width (COLUMNS) when it is made."""
    from rich.console import Console

    return Console(stderr=stderr)


def say(*objects: Any, **kwargs: Any) -> None:
    """Print to stdout with rich."""
    _console().print(*objects, **kwargs)


def complain(*objects: Any, **kwargs: Any) -> None:
    """Print to stderr with rich."""
    _console(stderr=True).print(*objects, **kwargs)


def _print_version(value: bool) -> None:
    if value:
        from fieldrl import __version__

        typer.echo(f"fieldrl {__version__}")
        raise typer.Exit()


@app.callback()
def _main_options(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_print_version, is_eager=True, help="print the version and exit"),
    ] = False,
) -> None:
    """Train, evaluate and report RL policies against field heuristics on real simulators."""


class BudgetName(StrEnum):
    demo = "demo"
    medium = "medium"
    full = "full"
    quick = "quick"  # demo's old name, still understood


ScenarioArg = Annotated[str, typer.Argument(help="built-in name (e.g. chemo/quick) or YAML path")]
OutOpt = Annotated[Path | None, typer.Option("--out", help="run folder to create (must not exist)")]
BudgetOpt = Annotated[
    BudgetName,
    typer.Option(
        "--budget", help="demo, medium (where the scenario has one) or full ('quick': demo's old name)"
    ),
]
#: --budget where a command must tell "not given" from "full" (--resume refuses one that was given)
UnsetBudgetOpt = Annotated[
    BudgetName | None,
    typer.Option(
        "--budget",
        help="demo, medium (where the scenario has one) or full ('quick': demo's old name) [default: full]",
        show_default=False,
    ),
]
JobsOpt = Annotated[int, typer.Option("--jobs", min=1, max=256, help="parallel worker processes")]
RunDirArg = Annotated[Path, typer.Argument(help="a run folder written by fieldrl")]
PartOpt = Annotated[
    str | None,
    typer.Option(
        "--part",
        metavar="I/K",
        help="train only part I of K of the training seeds (consecutive blocks, the same held-out "
        "seeds); `fieldrl merge` joins the parts' run folders into one",
    ),
]


def parse_part(text: str | None) -> tuple[int, int] | None:
    """``"2/3"`` as ``(2, 3)``; anything else is one line naming --part."""
    if text is None:
        return None
    index, sep, of = text.partition("/")
    if not (sep and index.strip().isdigit() and of.strip().isdigit()):
        raise FieldrlError(f"--part = {text!r}: allowed: I/K, e.g. 1/2 (part I of K, from 1)")
    return int(index), int(of)


QuietOpt = Annotated[bool, typer.Option("--quiet", help="no progress bars")]


class BackendName(StrEnum):
    local = "local"
    ray = "ray"


BackendOpt = Annotated[
    BackendName, typer.Option("--backend", help="local process pool (default) or ray tasks")
]
AddressOpt = Annotated[
    str | None, typer.Option("--address", help="Ray cluster address (with --backend ray); none: local Ray")
]


def backend_of(jobs: int, backend: BackendName, address: str | None) -> api.Backend:
    from fieldrl import api

    if address is not None and backend is not BackendName.ray:
        raise FieldrlError(f"--address = {address!r}: only used with --backend ray")
    return api.Backend(jobs=jobs, name=backend.value, address=address)


def _note(line: str) -> None:
    """A line the user should read before a long run starts (on stderr: stdout stays the results)."""
    complain(f"[bold yellow]note:[/] {escape(line)}", markup=True, soft_wrap=True, highlight=False)


#: the ``train`` extra as import name -> distribution, less onnx and onnxruntime (only ``export`` needs
#: them): every command but ``act`` checks that these are installed before it starts
TRAINING_STACK = {
    "torch": "torch",
    "stable_baselines3": "stable-baselines3",
    "sb3_contrib": "sb3-contrib",
    "gymnasium": "gymnasium",
    "pettingzoo": "pettingzoo",
    "pydantic": "pydantic",
    "yaml": "pyyaml",
    "scipy": "scipy",
    "pandas": "pandas",
    "pyarrow": "pyarrow",
    "matplotlib": "matplotlib",
    "reportlab": "reportlab",
    "tensorboard": "tensorboard",
    "safetensors": "safetensors",
    "optuna": "optuna",
    "sklearn": "scikit-learn",
    "imageio": "imageio",
    "imageio_ffmpeg": "imageio-ffmpeg",
}
#: what ``fieldrl export`` checks: torch writes ONNX through onnx, the bundle is checked with onnxruntime
#: (tests/test_runtime_install.py holds this to pyproject.toml's ``train`` list)
EXPORT_STACK = {**TRAINING_STACK, "onnx": "onnx", "onnxruntime": "onnxruntime"}


def missing_training_stack(needs: dict[str, str] = TRAINING_STACK) -> list[str]:
    """Distributions of ``needs`` (import name -> distribution) that cannot be imported here ([] where
    ``fieldrl[train]`` is installed). Looked up without importing any of them."""
    missing = []
    for module, distribution in needs.items():
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            missing.append(distribution)
    return missing


def require_training_stack(command: str, needs: dict[str, str] = TRAINING_STACK) -> None:
    """Refuse ``fieldrl COMMAND`` in one line where a package of ``needs`` is missing (an install of
    ``fieldrl[runtime]`` runs only ``fieldrl act``)."""
    missing = missing_training_stack(needs)
    if missing:
        named = missing if len(missing) <= 5 else [*missing[:4], f"{len(missing) - 4} more"]
        raise FieldrlError(
            f"fieldrl {command} needs packages of the training stack that are not installed "
            f"({', '.join(named)}): pip install 'fieldrl[train]'"
        )


def user_errors(func: Callable[..., Any] | None = None, /, *, needs: dict[str, str] = TRAINING_STACK) -> Any:
    """Turn fieldrl's input errors into one message and exit 2; Ctrl-C into exit 130.

    :param needs: the packages the command needs (import name -> distribution; the training stack
        unless said otherwise); where one is missing, the command is refused in one line that names
        the install, before it imports anything.
    """
    if func is None:
        return functools.partial(user_errors, needs=needs)
    command = func.__name__.removesuffix("_command")

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            require_training_stack(command, needs)
            return func(*args, **kwargs)
        except FieldrlError as exc:
            # the message is escaped: values such as 'fieldrl[rail]' or [1, 2] are not rich markup
            complain(f"[bold red]error:[/] {escape(str(exc))}", highlight=False, markup=True, soft_wrap=True)
            raise typer.Exit(2) from None
        except Terminated:
            complain(
                "terminated (SIGTERM): files already written are complete; nothing half-written was left",
                soft_wrap=True,
            )
            raise typer.Exit(143) from None
        except KeyboardInterrupt:
            complain(
                "interrupted: files already written are complete; nothing half-written was left",
                soft_wrap=True,
            )
            raise typer.Exit(130) from None

    return wrapper


@app.command("list")
@user_errors
def list_command(
    domain: Annotated[
        str | None, typer.Argument(help="a domain: also its heuristics and KPIs (imports the domain)")
    ] = None,
) -> None:
    """Built-in scenarios with expected times; a domain's heuristics.

    Without DOMAIN: every built-in scenario (what it runs, its file, roughly how long each budget
    takes), the domains and the algorithms. With DOMAIN: its heuristics and KPIs.
    """
    from fieldrl import terminal

    if domain is not None:
        for table in terminal.domain_tables(domain):
            say(table)
        return
    say(terminal.scenarios_table())
    say(terminal.domains_table())


@app.command()
@user_errors
def validate(
    scenario: ScenarioArg,
    budget: BudgetOpt = BudgetName.full,
    build: Annotated[
        bool,
        typer.Option(
            "--build",
            help="also build each learned model on its environment and start the simulator on "
            "custom networks, as `run` does before writing anything (seconds: imports torch)",
        ),
    ] = False,
) -> None:
    """Check a scenario; say what it would run and how long.

    Prints the settings, policies, environment steps to train, held-out episodes and a rough time
    for the chosen budget. Checks everything that needs no simulator or torch in about a second;
    --build also constructs every heuristic and learned model, as `run` does before it starts.
    """
    from fieldrl.scenario import budget_name, load_scenario
    from fieldrl.terminal import validation_text

    name = budget_name(budget.value)
    checked = load_scenario(scenario, build=build).with_budget(name)
    say(validation_text(scenario, name, checked), highlight=False)
    if not build:
        say(
            "  not built: learned models and simulators (`--build` builds them, as `run` does first)",
            highlight=False,
        )


@app.command()
@user_errors
def run(
    scenario: Annotated[
        str | None, typer.Argument(help="built-in name (e.g. chemo/quick) or YAML path")
    ] = None,
    out_dir: OutOpt = None,
    budget: UnsetBudgetOpt = None,
    jobs: JobsOpt = 1,
    backend: BackendOpt = BackendName.local,
    address: AddressOpt = None,
    resume: Annotated[
        Path | None, typer.Option("--resume", help="finish an interrupted run folder instead")
    ] = None,
    part: PartOpt = None,
    quiet: QuietOpt = False,
) -> None:
    """Train, evaluate and report (or --resume an interrupted run)."""
    from fieldrl import api

    where = backend_of(jobs, backend, address)
    parts = parse_part(part)
    if resume is not None:
        if scenario is not None or out_dir is not None or budget is not None or part is not None:
            raise FieldrlError(
                "--resume RUN_DIR takes no SCENARIO, --out, --budget or --part: the run folder holds them "
                "(it finishes at the budget it was started with)"
            )
        result = api.resume(resume, where, show_progress=not quiet)
    elif scenario is None:
        raise FieldrlError("SCENARIO is missing: give a built-in name or YAML path, or --resume RUN_DIR")
    else:
        chosen = (budget or BudgetName.full).value
        result = api.run(
            scenario, out_dir, chosen, where, show_progress=not quiet, announce=_note, part=parts
        )
    print_summary(result.summary)
    say(f"Run folder: {result.run_dir}")
    say(f"Report: {result.report}")
    exit_if_episodes_failed(result.summary)


@app.command()
@user_errors
def train(
    scenario: ScenarioArg,
    out_dir: OutOpt = None,
    budget: BudgetOpt = BudgetName.full,
    jobs: JobsOpt = 1,
    backend: BackendOpt = BackendName.local,
    address: AddressOpt = None,
    quiet: QuietOpt = False,
) -> None:
    """Create a run folder and train only (no evaluation)."""
    from fieldrl import api

    where = backend_of(jobs, backend, address)
    path = api.train(scenario, out_dir, budget.value, where, show_progress=not quiet, announce=_note)
    say(f"Trained models in: {path}  (next: fieldrl evaluate {path})")


@app.command()
@user_errors
def evaluate(
    run_dir: RunDirArg,
    jobs: JobsOpt = 1,
    backend: BackendOpt = BackendName.local,
    address: AddressOpt = None,
    trust: Annotated[
        bool,
        typer.Option(
            "--trust",
            help="load weight files missing from or differing from the run's manifest (they are "
            "still read as tensors only; for weights you put there yourself)",
        ),
    ] = False,
    quiet: QuietOpt = False,
) -> None:
    """Evaluate every policy of a trained run on held-out seeds."""
    from fieldrl import api

    if trust:
        complain(
            "[bold yellow]warning:[/] --trust: weight files this run's manifest does not vouch for are "
            "loaded (as tensors: nothing in them can run code, but their numbers are whatever the "
            "folder holds)",
            markup=True,
            soft_wrap=True,
            highlight=False,
        )
    api.evaluate(run_dir, backend_of(jobs, backend, address), show_progress=not quiet, trust=trust)
    summary = api.summary_of(run_dir)
    print_summary(summary)
    say(f"Results: {run_dir / 'results.parquet'}  (next: fieldrl report {run_dir})")
    exit_if_episodes_failed(summary)


#: trials per learned entry of `fieldrl tune` without --trials
DEFAULT_TRIALS = 20


@app.command()
@user_errors
def tune(
    scenario: Annotated[
        str | None, typer.Argument(help="built-in name (e.g. chemo/full) or YAML path")
    ] = None,
    trials: Annotated[
        int | None,
        typer.Option(
            "--trials",
            min=1,
            max=10_000,
            help=f"trials per learned entry (equal for all) [default: {DEFAULT_TRIALS}]",
            show_default=False,
        ),
    ] = None,
    out_dir: Annotated[
        Path | None, typer.Option("--out", help="tuning folder to create (must not exist)")
    ] = None,
    budget: UnsetBudgetOpt = None,
    jobs: JobsOpt = 1,
    backend: BackendOpt = BackendName.local,
    address: AddressOpt = None,
    policy: Annotated[
        list[str] | None, typer.Option("--policy", help="tune only this learned entry (repeatable)")
    ] = None,
    variant: Annotated[
        str | None, typer.Option("--variant", help="setting to tune on (default: the first)")
    ] = None,
    train_steps: Annotated[
        int | None, typer.Option("--train-steps", min=1, help="steps per trial (default: the entry's)")
    ] = None,
    keep: Annotated[
        list[str] | None,
        typer.Option("--keep", help="hyperparameter kept at the scenario's value, not tuned (repeatable)"),
    ] = None,
    resume: Annotated[
        Path | None,
        typer.Option(
            "--resume",
            help="finish an interrupted tuning folder instead, with the settings it was started with",
        ),
    ] = None,
    quiet: QuietOpt = False,
) -> None:
    """Tune learned entries on validation seeds, equal trials each."""
    from rich.table import Table

    from fieldrl.evaluation import tuning

    where = backend_of(jobs, backend, address)
    if resume is not None:
        given = {
            "SCENARIO": scenario,
            "--out": out_dir,
            "--trials": trials,
            "--budget": budget,
            "--policy": policy,
            "--variant": variant,
            "--train-steps": train_steps,
            "--keep": keep,
        }
        named = [name for name, value in given.items() if value is not None and value != []]
        if named:
            raise FieldrlError(
                f"--resume DIR takes no {', '.join(named)}: the tuning folder holds them (a study "
                "finishes as it was started; for other settings start a new tuning folder)"
            )
        result = tuning.resume_tuning(resume, where, show_progress=not quiet)
    elif scenario is None:
        raise FieldrlError("SCENARIO is missing: give a built-in name or YAML path, or --resume DIR")
    else:
        result = tuning.tune(
            scenario,
            DEFAULT_TRIALS if trials is None else trials,
            out_dir,
            (budget or BudgetName.full).value,
            where,
            policies=policy,
            variant=variant,
            train_steps=train_steps,
            keep=tuple(keep or ()),
            show_progress=not quiet,
        )
    table = Table(title="Tuning studies (best validation score per learned entry)")
    for col in ("policy", "trials", "best trial", "best value", "tuned file"):
        table.add_column(col)
    for label, study in result.studies.items():
        best = study.get("best_value")
        table.add_row(
            label,
            str(study.get("trials")),
            str(study.get("best_trial", "-")),
            "-" if best is None else f"{best:.4g}",
            str(result.folder / study["file"]) if study.get("file") else "none (no trial finished)",
        )
    say(table)
    say(f"Tuning folder: {result.folder}  (reference a tuned file with `tuned:` in the scenario entry)")


def parse_axis(text: str) -> tuple[str, list[float] | None]:
    """``NAME`` or ``NAME=V1,V2,...`` of ``--axis`` as ``(name, points or None)``."""
    name, _, values = text.partition("=")
    if not name.strip():
        raise FieldrlError(
            f"--axis = {text!r}: allowed: NAME or NAME=V1,V2,... (`fieldrl list DOMAIN` names them)"
        )
    if not values:
        return name.strip(), None
    try:
        points = [float(v) for v in values.split(",")]
    except ValueError:
        raise FieldrlError(f"--axis = {text!r}: the values must be numbers, e.g. {name}=0,0.1,0.2") from None
    if len(points) < 2 or any(b <= a for a, b in zip(points, points[1:], strict=False)):
        raise FieldrlError(f"--axis = {text!r}: give at least two values, increasing, each once")
    if not all(math.isfinite(v) for v in points):
        raise FieldrlError(f"--axis = {text!r}: the values must be finite numbers")
    return name.strip(), points


@app.command()
@user_errors
def stress(
    run_dir: RunDirArg,
    axis: Annotated[
        list[str] | None,
        typer.Option(
            "--axis",
            help="NAME or NAME=V1,V2,... (repeatable); default: the scenario's stress section, else every "
            "axis of the domain at its default points",
        ),
    ] = None,
    jobs: JobsOpt = 1,
    backend: BackendOpt = BackendName.local,
    address: AddressOpt = None,
    quiet: QuietOpt = False,
) -> None:
    """Re-evaluate a run's trained policies while one condition of the world moves away from training.

    Plays the run's held-out episodes again at each point of each stress axis (nothing is retrained),
    writes stress/results.parquet and stress/summary.json and re-renders the report with its stress map.
    """
    from fieldrl import api
    from fieldrl.terminal import stress_table

    wanted = [parse_axis(a) for a in axis] if axis else None
    summary = api.stress(run_dir, wanted, backend_of(jobs, backend, address), show_progress=not quiet)
    for table in stress_table(summary):
        say(table)
    say(f"Stress results: {run_dir / 'stress' / 'results.parquet'}")
    say(f"Report: {api.report(run_dir)}")


@app.command()
@user_errors
def replay(
    run_dir: RunDirArg,
    seed: Annotated[
        int | None, typer.Option("--seed", help="a held-out seed of the run (default: the first)")
    ] = None,
    policies: Annotated[
        str | None,
        typer.Option(
            "--policies",
            help="A,B: two policies, left then right (default: the best standard and best learned policy)",
        ),
    ] = None,
    variant: Annotated[
        str | None, typer.Option("--variant", help="the setting (default: the scenario's first)")
    ] = None,
    quiet: QuietOpt = False,
) -> None:
    """Replay two policies side by side on one held-out case (nothing is retrained).

    Plays the same held-out episode with both policies, writes an animated GIF (and an MP4 where ffmpeg
    is available) and a storyboard of the moments they differ most under replay/<setting>/seed-<S>/,
    and re-renders the report with the storyboard.
    """
    from fieldrl import api

    chosen = policies.split(",") if policies is not None else None
    record = api.replay(run_dir, seed, chosen, variant, show_progress=not quiet)
    where = run_dir / record.folder
    left, right = record.sides
    say(
        f"Replayed {left.policy} (left, return {left.episode_return:.4g}) and {right.policy} "
        f"(right, return {right.episode_return:.4g}) on held-out seed {record.seed}",
        highlight=False,
        soft_wrap=True,
    )
    say(f"GIF: {where / record.gif}", highlight=False, soft_wrap=True)
    say(f"MP4: {where / record.mp4}" if record.mp4 else record.mp4_note, highlight=False, soft_wrap=True)
    say(f"Storyboard: {len(record.storyboard)} frames in {where}", highlight=False, soft_wrap=True)
    say(f"Report: {api.report(run_dir)}")


@app.command("export")
@user_errors(needs=EXPORT_STACK)
def export_command(
    run_dir: RunDirArg,
    policy: Annotated[str, typer.Option("--policy", help="the learned policy to export (its name)")],
    setting: Annotated[
        str | None,
        typer.Option("--setting", "--variant", help="the setting it was trained in (default: its first)"),
    ] = None,
    seed: Annotated[
        int | None, typer.Option("--seed", help="the training seed (default: the scenario's first)")
    ] = None,
    out_dir: Annotated[
        Path | None, typer.Option("--out", help="bundle folder to create (must not exist or be empty)")
    ] = None,
    replay: Annotated[
        int,
        typer.Option(
            "--replay",
            min=0,
            help="held-out episodes replayed through the bundle, KPIs compared "
            "with the run's evaluation (0: none)",
        ),
    ] = 1,
) -> None:
    """Export a trained policy as an ONNX bundle that runs without torch or the simulator.

    Writes policy.onnx (observation normalisation folded in, the output is the environment's action),
    bundle.json (inputs, outputs, action mask), model-card.md/.json and manifest.json (SHA-256 of every
    file). Checked against the torch policy on one episode before anything is written. Recurrent
    policies carry their memory as explicit state inputs and outputs; shielded and residual policies
    are refused. See docs/deploying.md.
    """
    from fieldrl import export

    result = export.export_policy(run_dir, policy, setting, seed, out_dir, replay)
    check = result.card["export_check"]
    difference = (
        f"max |difference| {check['max_abs_difference']:.3g}"
        if "max_abs_difference" in check
        else f"{check['differing_actions']} different actions"
    )
    say(
        f"Checked against the torch policy on {check['decisions']} decisions: {difference}",
        highlight=False,
        soft_wrap=True,
    )
    say(export.replay_line(result.card["held_out_replay"]), highlight=False, soft_wrap=True)
    say(f"Bundle: {result.folder}  (try: fieldrl act {result.folder} < observations.jsonl)", soft_wrap=True)


@app.command("act")
@user_errors(needs={})  # a runtime-only install (numpy, onnxruntime) runs this command alone
def act_command(
    bundle: Annotated[Path, typer.Argument(help="a bundle folder written by `fieldrl export`")],
) -> None:
    """Shadow mode: answer observations on stdin with a bundle's actions on stdout.

    Each input line is JSON: {"obs": [...], "mask": [...]} (mask only for policies trained with action
    masks) or a bare list of numbers; each answer is one line {"action": ...}. Blank lines are skipped.
    The lines are one stream: a recurrent bundle keeps its memory from line to line, and
    {"episode_start": true} on a line starts a new episode.
    A bad line ends the command with one line on stderr naming its line number, exit status 2.
    """
    from fieldrl import runtime

    def write(line: str) -> None:
        sys.stdout.write(line)
        sys.stdout.flush()  # each answer as soon as it is known

    try:
        loaded = runtime.Bundle.load(bundle)
        runtime.serve(loaded, iter(sys.stdin.readline, ""), write)
    except runtime.BundleError as exc:
        raise FieldrlError(str(exc)) from None


@app.command()
@user_errors
def report(run_dir: RunDirArg) -> None:
    """Re-render a run's PDF report (no training, no simulation)."""
    from fieldrl import api

    path = api.report(run_dir)
    say(f"Report: {path}")


@app.command()
@user_errors
def compare(run_dirs: Annotated[list[Path], typer.Argument(help="evaluated run folders")]) -> None:
    """KPI means across runs, one table per domain.

    Every policy's mean (± 95 % CI half-width where there are enough held-out cases) in each run
    and setting; runs of different domains get one table each, with that domain's KPIs.
    """
    from fieldrl import api
    from fieldrl.terminal import compare_tables

    for table in compare_tables(api.compare(run_dirs), _console().width):
        say(table)


@app.command()
@user_errors
def merge(
    run_dirs: Annotated[list[Path], typer.Argument(help="the evaluated part folders of one study")],
    out_dir: OutOpt = None,
    jobs: JobsOpt = 1,
    quiet: QuietOpt = False,
) -> None:
    """Join the parts of a study run with --part I/K into one run folder and report.

    The parts must be every part of one scenario at one budget, each evaluated. The merged folder
    holds every training seed's models and results, the heuristics once, and a summary and report
    made as `run` makes them (the same pairing on the same held-out seeds).
    """
    from fieldrl import api

    result = api.merge_runs(list(run_dirs), out_dir, jobs, show_progress=not quiet)
    print_summary(result.summary)
    say(f"Run folder: {result.run_dir}")
    say(f"Report: {result.report}")


@app.command()
@user_errors
def bench(
    only: Annotated[
        list[str] | None, typer.Option("--only", help="run just this benchmark (repeatable)")
    ] = None,
    quick: Annotated[bool, typer.Option("--quick", help="smaller, faster versions")] = False,
    bench_dir: Annotated[
        Path | None, typer.Option("--dir", help="benchmarks folder (default: ./benchmarks)")
    ] = None,
) -> None:
    """Run the benchmark suite (suite.json and benchmarks.pdf)."""
    from rich.table import Table

    from fieldrl import bench as suite_runner

    folder = suite_runner.find_bench_dir(bench_dir)
    suite = suite_runner.run_suite(folder, only, quick, echo=say)
    table = Table(title="Benchmark headlines (each ratio measured in the same run)")
    for col in ("benchmark", "figure", "value"):
        table.add_column(col)
    for name, h in suite_runner.headlines(suite):
        value = h.get("value")
        shown = f"{value:,.3g}" if isinstance(value, int | float) else str(value)
        table.add_row(name, str(h.get("label", "")), f"{shown} {h.get('unit', '')}")
    say(table)
    results = folder / "results" / ("quick" if quick else "")
    say(f"Results: {results / suite_runner.SUITE_JSON}")
    say(f"Report: {results / suite_runner.SUITE_PDF}")
    if any(r.get("exit_status") for r in suite["runs"].values()):
        raise typer.Exit(1)


#: exit status of a run or evaluation that finished but has failed episodes (simulator errors, or a
#: policy's non-finite actions)
EXIT_FAILED_EPISODES = 3


def exit_if_episodes_failed(summary: Summary) -> None:
    """A finished run with failed held-out episodes says how many, what ended them (a simulator
    error, or a policy's non-finite actions) and exits with status 3."""
    from fieldrl.results import failures_ended

    failed = summary.failed_episodes
    if failed:
        first, ended = failed[0], failures_ended(failed)
        where = "" if first.variant == "default" else f" [{first.variant}]"
        reason = first.reason
        said = "" if reason in ended else f": {reason}"  # not twice what every one of them said
        complain(
            f"[bold red]failed:[/] {len(failed)} held-out episode(s) ended {ended} (first: "
            f"{escape(first.policy + where)}, eval seed {first.eval_seed}{escape(said)}); they "
            "are left out of the numbers and listed in the report",
            highlight=False,
            markup=True,
            soft_wrap=True,
        )
        raise typer.Exit(EXIT_FAILED_EPISODES)


def print_summary(summary: Summary) -> None:
    """One table per setting (split to fit the terminal): KPI means with their 95 % CIs.

    KPIs with no value for any policy in a setting (one that does not apply there) are left out.
    """
    from fieldrl.terminal import summary_tables

    for table in summary_tables(summary, _console().width):
        say(table)


def _terminate(signum: int, frame: object) -> None:
    raise Terminated  # handled like Ctrl-C: workers stopped, one line, exit 143


def main() -> None:
    # SIGTERM (kill, systemd, a batch scheduler) stops a run like Ctrl-C. Only here, in the command's
    # own process: fieldrl's worker processes import this module too, and the pool stops them with it.
    if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _terminate)
    try:
        code = app(standalone_mode=False)
    except UsageError as exc:  # a bad option value, a missing argument, an unknown command
        if type(exc).__name__ == "NoArgsIsHelpError" and exc.ctx is not None:  # `fieldrl` alone
            say(exc.ctx.get_help(), markup=False, highlight=False)
            sys.exit(2)
        line = escape(_usage_line(exc))
        complain(f"[bold red]error:[/] {line}", markup=True, soft_wrap=True, highlight=False)
        sys.exit(2)
    except typer.Abort:  # Ctrl-C while click itself had control
        complain("interrupted", soft_wrap=True)
        sys.exit(130)
    except Terminated:  # pragma: no cover - user_errors normally handles this
        sys.exit(143)
    except KeyboardInterrupt:  # pragma: no cover - typer normally handles this
        _interrupted_exit(130)
    if code in (130, 143):
        _interrupted_exit(code)
    sys.exit(code if isinstance(code, int) else 0)


def _interrupted_exit(code: int) -> None:
    """Leave at once with ``code`` after an interruption that was reported and cleaned up.

    An interrupt that landed inside a native import (torch's) can leave CPython's "unhandled
    KeyboardInterrupt" flag set although fieldrl handled it: the interpreter then ends by killing
    itself with SIGINT (status -2) after the one line was printed. Nothing is left to finalise here
    (files are complete, workers gone, the folder lock is released with the process), so the exit
    status the line promised is given directly.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _usage_line(exc: UsageError) -> str:
    """Click's usage error as one line: what is wrong, and where the command's help is."""
    command = exc.ctx.command_path if exc.ctx is not None else "fieldrl"
    return f"{' '.join(exc.format_message().split())} (see `{command} --help`)"


if __name__ == "__main__":
    main()
