"""``fieldrl`` command line: thin; parses, calls :mod:`fieldrl.api`, prints with rich.

Every user-fixable problem ends as one line on stderr and exit status 2.
"""
# ruff: noqa: E402  (the Ctrl-C guard below must be set before the slow imports)

from __future__ import annotations

import signal
import sys


def _interrupted_while_starting(signum: int, frame: object) -> None:
    sys.stderr.write("interrupted (nothing was written)\n")
    raise SystemExit(130)  # no traceback from half-done imports


# Starting takes a second or two (torch); a Ctrl-C then should not print an import traceback.
# Left alone where SIGINT is ignored (background jobs, fieldrl's own worker processes).
_QUIET_START = signal.getsignal(signal.SIGINT) is signal.default_int_handler
if _QUIET_START:
    signal.signal(signal.SIGINT, _interrupted_while_starting)

import functools
from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from fieldrl import api
from fieldrl.errors import FieldrlError, Terminated

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Train, evaluate and report RL policies against field heuristics on real simulators.",
)
out = Console()
err = Console(stderr=True)
if _QUIET_START:
    signal.signal(signal.SIGINT, signal.default_int_handler)


class BudgetName(StrEnum):
    quick = "quick"
    medium = "medium"
    full = "full"


ScenarioArg = Annotated[str, typer.Argument(help="built-in name (e.g. chemo/quick) or YAML path")]
OutOpt = Annotated[Path | None, typer.Option("--out", help="run folder to create (must not exist)")]
BudgetOpt = Annotated[
    BudgetName, typer.Option("--budget", help="quick, medium (where the scenario has one) or full")
]
JobsOpt = Annotated[int, typer.Option("--jobs", min=1, max=256, help="parallel worker processes")]
RunDirArg = Annotated[Path, typer.Argument(help="a run folder written by fieldrl")]
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
    if address is not None and backend is not BackendName.ray:
        raise FieldrlError(f"--address = {address!r}: only used with --backend ray")
    return api.Backend(jobs=jobs, name=backend.value, address=address)


def user_errors(func: Callable[..., Any]) -> Callable[..., Any]:
    """Turn fieldrl's input errors into one message and exit 2; Ctrl-C into exit 130."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except FieldrlError as exc:
            err.print(f"[bold red]error:[/] {exc}", highlight=False, markup=True, soft_wrap=True)
            raise typer.Exit(2) from None
        except Terminated:
            err.print(
                "terminated (SIGTERM): files already written are complete; nothing half-written was left"
            )
            raise typer.Exit(143) from None
        except KeyboardInterrupt:
            err.print("interrupted: files already written are complete; nothing half-written was left")
            raise typer.Exit(130) from None

    return wrapper


@app.command("list")
@user_errors
def list_command() -> None:
    """Domains, built-in scenarios, heuristics and algorithms."""
    from fieldrl.domains import domain_names, get_domain
    from fieldrl.policies.registry import ALGORITHMS
    from fieldrl.scenario import builtin_scenarios

    table = Table(title="Domains and heuristics")
    table.add_column("domain")
    table.add_column("heuristic")
    table.add_column("what it does")
    for name in domain_names():
        domain = get_domain(name)
        for h, spec in domain.heuristics.items():
            table.add_row(name, h, spec.description)
    out.print(table)
    out.print("[bold]Built-in scenarios:[/] " + ", ".join(builtin_scenarios()))
    out.print("[bold]Algorithms:[/] " + ", ".join(sorted(ALGORITHMS)))


@app.command()
@user_errors
def validate(scenario: ScenarioArg) -> None:
    """Check a scenario file; prints what it would run."""
    s = api.validate(scenario)
    n_learned = len(s.policies.learned)
    out.print(
        f"[green]ok[/] {scenario}: domain {s.domain}, {len(s.policies.heuristics)} heuristic(s), "
        f"{n_learned} learned x {len(s.seeds.train)} train seed(s), "
        f"{len(s.seeds.eval)} eval seed(s) x {s.episodes_per_seed} episode(s), "
        f"variants: {', '.join(s.variant_names)}"
    )


@app.command()
@user_errors
def run(
    scenario: Annotated[
        str | None, typer.Argument(help="built-in name (e.g. chemo/quick) or YAML path")
    ] = None,
    out_dir: OutOpt = None,
    budget: BudgetOpt = BudgetName.full,
    jobs: JobsOpt = 1,
    backend: BackendOpt = BackendName.local,
    address: AddressOpt = None,
    resume: Annotated[
        Path | None, typer.Option("--resume", help="finish an interrupted run folder instead")
    ] = None,
    quiet: QuietOpt = False,
) -> None:
    """Train, evaluate and report: the whole pipeline (or finish an interrupted one with --resume)."""
    where = backend_of(jobs, backend, address)
    if resume is not None:
        if scenario is not None or out_dir is not None:
            raise FieldrlError("--resume RUN_DIR takes no SCENARIO or --out: the run folder holds both")
        result = api.resume(resume, where, show_progress=not quiet)
    elif scenario is None:
        raise FieldrlError("SCENARIO is missing: give a built-in name or YAML path, or --resume RUN_DIR")
    else:
        result = api.run(scenario, out_dir, budget.value, where, show_progress=not quiet)
    print_summary(result.summary)
    out.print(f"Run folder: {result.run_dir}")
    out.print(f"Report: {result.report}")
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
    """Create a run folder and train the learned policies (no evaluation)."""
    where = backend_of(jobs, backend, address)
    path = api.train(scenario, out_dir, budget.value, where, show_progress=not quiet)
    out.print(f"Trained models in: {path}  (next: fieldrl evaluate {path})")


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
            help="load model files that are missing from or differ from the run's manifest "
            "(they contain pickles: only for files you are sure of)",
        ),
    ] = False,
    quiet: QuietOpt = False,
) -> None:
    """Evaluate every policy of a trained run on its held-out seeds."""
    api.evaluate(run_dir, backend_of(jobs, backend, address), show_progress=not quiet, trust=trust)
    from fieldrl.evaluation.store import RunFolder

    summary = RunFolder(run_dir).read_json("summary.json")
    print_summary(summary)
    out.print(f"Results: {run_dir / 'results.parquet'}  (next: fieldrl report {run_dir})")
    exit_if_episodes_failed(summary)


@app.command()
@user_errors
def tune(
    scenario: Annotated[
        str | None, typer.Argument(help="built-in name (e.g. chemo/full) or YAML path")
    ] = None,
    trials: Annotated[
        int, typer.Option("--trials", min=1, max=10_000, help="trials per learned entry (equal for all)")
    ] = 20,
    out_dir: Annotated[
        Path | None, typer.Option("--out", help="tuning folder to create (must not exist)")
    ] = None,
    budget: BudgetOpt = BudgetName.full,
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
        Path | None, typer.Option("--resume", help="finish an interrupted tuning folder instead")
    ] = None,
    quiet: QuietOpt = False,
) -> None:
    """Tune every learned entry's hyperparameters on the validation seeds, with equal trials each."""
    from fieldrl.evaluation import tuning

    where = backend_of(jobs, backend, address)
    if resume is not None:
        if scenario is not None or out_dir is not None:
            raise FieldrlError("--resume DIR takes no SCENARIO or --out: the tuning folder holds both")
        result = tuning.resume_tuning(resume, where, show_progress=not quiet)
    elif scenario is None:
        raise FieldrlError("SCENARIO is missing: give a built-in name or YAML path, or --resume DIR")
    else:
        result = tuning.tune(
            scenario,
            trials,
            out_dir,
            budget.value,
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
    out.print(table)
    out.print(f"Tuning folder: {result.folder}  (reference a tuned file with `tuned:` in the scenario entry)")


@app.command()
@user_errors
def report(run_dir: RunDirArg) -> None:
    """Re-render the PDF report of an evaluated run (no training, no simulation)."""
    path = api.report(run_dir)
    out.print(f"Report: {path}")


@app.command()
@user_errors
def compare(run_dirs: Annotated[list[Path], typer.Argument(help="evaluated run folders")]) -> None:
    """KPI means (± 95 % CI half-width) of every policy across runs, one row per run and policy."""
    from fieldrl.reports.findings import fmt

    frame = api.compare(run_dirs)
    kpis = list(dict.fromkeys(frame["kpi"]))
    table = Table(title="KPI means across runs (± 95 % CI half-width)")
    for col in ("run", "variant", "policy", *kpis):
        table.add_column(col, justify="right" if col in kpis else "left")
    for (run_name, variant, policy), rows in frame.groupby(["run", "variant", "policy"], sort=False):
        by_kpi = rows.set_index("kpi")
        cells = []
        for k in kpis:
            r = by_kpi.loc[k]
            half = max(r["high"] - r["mean"], r["mean"] - r["low"])
            cells.append(f"{fmt(r['mean'])} [dim]±{fmt(half)}[/]")
        table.add_row(run_name, variant, policy, *cells)
    out.print(table)


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
    """Run the benchmark suite; write benchmarks/results/suite.json and benchmarks.pdf."""
    from fieldrl import bench as suite_runner

    folder = suite_runner.find_bench_dir(bench_dir)
    suite = suite_runner.run_suite(folder, only, quick, echo=out.print)
    table = Table(title="Benchmark headlines (each ratio measured in the same run)")
    for col in ("benchmark", "figure", "value"):
        table.add_column(col)
    for name, h in suite_runner.headlines(suite):
        value = h.get("value")
        shown = f"{value:,.3g}" if isinstance(value, int | float) else str(value)
        table.add_row(name, str(h.get("label", "")), f"{shown} {h.get('unit', '')}")
    out.print(table)
    results = folder / "results" / ("quick" if quick else "")
    out.print(f"Results: {results / suite_runner.SUITE_JSON}")
    out.print(f"Report: {results / suite_runner.SUITE_PDF}")
    if any(r.get("exit_status") for r in suite["runs"].values()):
        raise typer.Exit(1)


#: exit status of a run or evaluation that finished but has failed episodes (simulator errors)
EXIT_FAILED_EPISODES = 3


def exit_if_episodes_failed(summary: dict[str, Any]) -> None:
    """A finished run with failed held-out episodes says how many and exits with status 3."""
    failed = summary.get("failed_episodes") or []
    if failed:
        err.print(
            f"[bold red]failed:[/] {len(failed)} held-out episode(s) ended in a simulator error "
            f"(first: {escape(str(failed[0]['reason']))}); they are left out of the numbers and listed "
            "in the report",
            highlight=False,
            markup=True,
            soft_wrap=True,
        )
        raise typer.Exit(EXIT_FAILED_EPISODES)


def print_summary(summary: dict[str, Any]) -> None:
    """One table per variant: KPI means with their 95 % CIs; * marks the best of each kind.

    KPIs with no value for any policy in a variant (one that does not apply there) are left out.
    """
    from fieldrl.reports.figures import measured_kpis
    from fieldrl.reports.findings import fmt

    for variant, entry in summary["variants"].items():
        kpis = measured_kpis(summary, variant) or summary["kpis"]
        where = "" if variant == "default" else f" [{variant}]"
        table = Table(title=f"{summary['scenario']}{where}: mean ± 95 % CI half-width over held-out episodes")
        table.add_column("policy")
        for k in kpis:
            arrow = "↑" if k["higher_is_better"] else "↓"
            table.add_column(f"{k['name']} {arrow}", justify="right")
        best = (entry.get("best_learned"), entry.get("best_heuristic"))
        for policy, values in entry["policies"].items():
            cells = []
            for k in kpis:
                m = values[k["name"]]["mean"]
                half = max(m["high"] - m["value"], m["value"] - m["low"])
                cells.append(f"{fmt(m['value'])} [dim]±{fmt(half)}[/]")
            table.add_row(policy + (" *" if policy in best else ""), *cells)
        out.print(table)


def _terminate(signum: int, frame: object) -> None:
    raise Terminated  # handled like Ctrl-C: workers stopped, one line, exit 143


def main() -> None:
    # SIGTERM (kill, systemd, a batch scheduler) stops a run like Ctrl-C. Only here, in the command's
    # own process: fieldrl's worker processes import this module too, and the pool stops them with it.
    if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _terminate)
    try:
        app()
    except Terminated:  # pragma: no cover - user_errors normally handles this
        sys.exit(143)
    except KeyboardInterrupt:  # pragma: no cover - typer normally handles this
        sys.exit(130)


if __name__ == "__main__":
    main()
