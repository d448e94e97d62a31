"""The runtime install for real (issue 42): ``pip install 'fieldrl[runtime]'`` in a fresh venv installs
neither torch nor SB3, and ``fieldrl act`` runs a bundle from it.

1. A bundle is exported with this (training) environment: chemo/quick trained at the demo budget
   (``fieldrl train``), its PPO exported (or ``--bundle DIR``, one exported before).
2. A fresh venv (``python -m venv``) gets ``pip install 'REPO[runtime]'``, not editable: the packages it
   installed, the venv's size on disk, the install's wall time.
3. From that venv: ``fieldrl --version``, ``import fieldrl.runtime``, ``fieldrl act`` with 1 and with
   1,000 observations (wall time, median of repeats, interpreter start included), beside the same
   commands of this environment; its actions against this environment's ``Bundle.act`` on the same
   observations; and ``fieldrl run chemo/quick`` there, which must end in one line and exit status 2.
4. The training install: a second fresh venv resolves ``REPO[train]`` (``pip install --dry-run``); with
   ``--train`` it installs it and runs ``fieldrl run chemo/quick --budget demo`` (several minutes).

Not a ``bench_*`` script: it installs from the package index, so ``fieldrl bench`` leaves it out.
Run: ``python benchmarks/runtime_install.py [--bundle DIR] [--train]`` from the main venv. Writes
``benchmarks/results/runtime_install.json``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from _common import machine_info, write_result

from fieldrl import runtime

REPO = Path(__file__).resolve().parents[1]
RESULT = Path(__file__).resolve().parent / "results" / "runtime_install.json"
#: distributions the runtime install must not have
HEAVY = ("torch", "stable-baselines3", "sb3-contrib", "gymnasium", "pettingzoo", "pandas", "scipy")
REPEATS = 5
OBSERVATIONS = 1_000


def timed(args: list[str | Path], **kwargs: Any) -> tuple[float, subprocess.CompletedProcess[str]]:
    start = time.perf_counter()
    done = subprocess.run([str(a) for a in args], capture_output=True, text=True, **kwargs)
    return time.perf_counter() - start, done


def checked(args: list[str | Path], **kwargs: Any) -> tuple[float, subprocess.CompletedProcess[str]]:
    seconds, done = timed(args, **kwargs)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(map(str, args))} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return seconds, done


def median_wall(args: list[str | Path], stdin: str = "") -> float:
    """Median wall seconds of ``REPEATS`` runs (the first, which warms the file cache, is dropped)."""
    checked(args, input=stdin)
    return statistics.median(checked(args, input=stdin)[0] for _ in range(REPEATS))


def du_mb(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink()) / 1e6


def fresh_venv(where: Path) -> Path:
    """A new venv at ``where`` from the interpreter this venv was made from; returns its ``bin``."""
    checked([sys._base_executable, "-m", "venv", where])  # type: ignore[attr-defined]
    return where / "bin"


def installed(bin_dir: Path) -> dict[str, str]:
    _, done = checked([bin_dir / "pip", "list", "--format", "json"])
    return {p["name"].lower().replace("_", "-"): p["version"] for p in json.loads(done.stdout)}


def largest(site: Path, count: int = 6) -> dict[str, float]:
    sizes = {p.name: du_mb(p) if p.is_dir() else p.stat().st_size / 1e6 for p in site.iterdir()}
    return {name: round(mb, 1) for name, mb in sorted(sizes.items(), key=lambda kv: -kv[1])[:count]}


def make_bundle(work: Path) -> tuple[Path, dict[str, float]]:
    fieldrl = Path(sys.executable).parent / "fieldrl"
    run_dir, bundle = work / "chemo-quick-run", work / "bundle"
    train_s, _ = checked([fieldrl, "train", "chemo/quick", "--budget", "demo", "--out", run_dir, "--quiet"])
    export_s, _ = checked([fieldrl, "export", run_dir, "--policy", "PPO", "--out", bundle])
    return bundle, {"train_seconds": round(train_s, 1), "export_seconds": round(export_s, 1)}


def observations(bundle: Path, count: int) -> np.ndarray:
    """Observations about the training distribution: the bundle's normalisation mean ± 2 std."""
    contract = json.loads((bundle / "bundle.json").read_text())
    norm = contract.get("normalization") or {}
    shape = contract["observation"]["shape"]
    mean = np.asarray(norm.get("mean", np.zeros(shape)), dtype=np.float64)
    std = np.sqrt(np.asarray(norm.get("var", np.ones(shape)), dtype=np.float64))
    rng = np.random.default_rng(0)
    return np.clip(mean + std * rng.uniform(-2, 2, size=(count, *shape)), 0, None)


def act_lines(obs: np.ndarray) -> str:
    return "".join(json.dumps(o.tolist()) + "\n" for o in obs)


def runtime_install(bundle: Path, work: Path) -> dict[str, Any]:
    bin_dir = fresh_venv(work / "runtime-venv")
    base_mb = du_mb(work / "runtime-venv")
    base_packages = installed(bin_dir)
    install_s, _ = checked([bin_dir / "pip", "install", "--quiet", f"{REPO}[runtime]"])
    packages = installed(bin_dir)
    site = next((work / "runtime-venv" / "lib").glob("python*/site-packages"))

    obs = observations(bundle, OBSERVATIONS)
    one, many = act_lines(obs[:1]), act_lines(obs)
    _, answered = checked([bin_dir / "fieldrl", "act", bundle], input=many)
    theirs = np.array([json.loads(line)["action"] for line in answered.stdout.splitlines()], dtype=np.float64)
    loaded = runtime.Bundle.load(bundle)
    ours = np.array([loaded.act(o) for o in obs], dtype=np.float64)

    here = Path(sys.executable).parent
    timings: dict[str, dict[str, float]] = {}
    for name, where in (("runtime_venv", bin_dir), ("training_venv", here)):
        timings[name] = {
            "fieldrl_version_s": median_wall([where / "fieldrl", "--version"]),
            "import_fieldrl_runtime_s": median_wall([where / "python", "-c", "import fieldrl.runtime"]),
            "act_1_observation_s": median_wall([where / "fieldrl", "act", bundle], one),
            f"act_{OBSERVATIONS}_observations_s": median_wall([where / "fieldrl", "act", bundle], many),
        }
        timings[name] = {k: round(v, 3) for k, v in timings[name].items()}

    refused_s, refused = timed([bin_dir / "fieldrl", "run", "chemo/quick", "--budget", "demo"])
    return {
        "pip_install": f"pip install '{REPO}[runtime]' (not editable)",
        "install_seconds": round(install_s, 1),
        "packages_added": {k: v for k, v in sorted(packages.items()) if k not in base_packages},
        "package_count_added": len(set(packages) - set(base_packages)),
        "heavy_present": [name for name in HEAVY if name in packages],
        "torch_present": "torch" in packages,
        "venv_mb": round(du_mb(work / "runtime-venv"), 1),
        "empty_venv_mb": round(base_mb, 1),
        "largest_in_site_packages_mb": largest(site),
        "wall_seconds_median_of_5": timings,
        "act_observations": OBSERVATIONS,
        "act_max_abs_difference_vs_training_venv": float(np.max(np.abs(theirs - ours))),
        "fieldrl_run_refused": {
            "exit_status": refused.returncode,
            "stderr": refused.stderr,
            "stdout": refused.stdout,
            "seconds": round(refused_s, 3),
        },
    }


def training_install(work: Path, full: bool) -> dict[str, Any]:
    bin_dir = fresh_venv(work / "train-venv")
    base_packages = installed(bin_dir)
    report = work / "train-dry-run.json"
    resolve_s, _ = checked(
        [bin_dir / "pip", "install", "--quiet", "--dry-run", "--report", report, f"{REPO}[train]"]
    )
    planned = {
        i["metadata"]["name"].lower(): i["metadata"]["version"]
        for i in json.loads(report.read_text())["install"]
    }
    result: dict[str, Any] = {
        "dry_run": f"pip install --dry-run '{REPO}[train]'",
        "dry_run_seconds": round(resolve_s, 1),
        "dry_run_package_count": len(planned),
        "dry_run_torch": planned.get("torch"),
    }
    if not full:
        return result
    install_s, _ = checked([bin_dir / "pip", "install", "--quiet", f"{REPO}[train]"])
    packages = installed(bin_dir)
    run_s, ran = timed(
        [
            bin_dir / "fieldrl",
            "run",
            "chemo/quick",
            "--budget",
            "demo",
            "--out",
            work / "train-run",
            "--quiet",
        ]
    )
    return {
        **result,
        "pip_install": f"pip install '{REPO}[train]' (not editable)",
        "install_seconds": round(install_s, 1),
        "package_count_added": len(set(packages) - set(base_packages)),
        "torch": packages.get("torch"),
        "onnx": packages.get("onnx"),
        "onnxruntime": packages.get("onnxruntime"),
        "venv_mb": round(du_mb(work / "train-venv"), 1),
        "fieldrl_run_chemo_quick_demo": {
            "exit_status": ran.returncode,
            "seconds": round(run_s, 1),
            "stderr_tail": ran.stderr[-500:],
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bundle", type=Path, help="a bundle exported before (default: export one)")
    parser.add_argument("--train", action="store_true", help="also install [train] and run chemo/quick")
    args = parser.parse_args()
    started = time.time()
    work = Path(tempfile.mkdtemp(prefix="fieldrl-runtime-install-"))
    try:
        made: dict[str, float] = {}
        bundle = args.bundle
        if bundle is None:
            bundle, made = make_bundle(work)
        result = runtime_install(bundle.resolve(), work)
        training = training_install(work, args.train)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    rt = result["wall_seconds_median_of_5"]
    data = {
        "benchmark": "runtime_install",
        "date": dt.date.today().isoformat(),
        "machine": machine_info(
            pip=subprocess.run(
                [sys._base_executable, "-m", "pip", "--version"],  # type: ignore[attr-defined]
                capture_output=True,
                text=True,
            ).stdout.split(" from ")[0]
        ),
        "bundle": "chemo/quick PPO, demo budget" if args.bundle is None else str(args.bundle),
        "bundle_made": made,
        "runtime": result,
        "train": training,
        "headline": [
            {"label": "runtime venv size", "value": result["venv_mb"], "unit": "MB"},
            {"label": "runtime install (pip, fresh venv)", "value": result["install_seconds"], "unit": "s"},
            {
                "label": "`fieldrl act`, 1 observation, runtime venv (process start to answer)",
                "value": rt["runtime_venv"]["act_1_observation_s"],
                "unit": "s",
            },
            {
                "label": "`fieldrl act`, 1 observation, training venv",
                "value": rt["training_venv"]["act_1_observation_s"],
                "unit": "s",
            },
        ],
        "seconds": round(time.time() - started, 1),
    }
    print(json.dumps(data, indent=2))
    write_result(RESULT, data)


if __name__ == "__main__":
    main()
