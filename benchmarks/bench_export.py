"""What a decision costs from an exported bundle (``fieldrl export``, issue 42): ``Bundle.act`` on
onnxruntime against the torch policy as evaluation runs it (``SB3Policy.act``), measured in the same
run, at batch 1 and batch 1,000, and what importing the runtime costs.

Policies (the networks of the shipped scenarios' entries, built from the scenario as export builds them;
latency and size depend on the architecture, not on the weights, so nothing is trained):

- chemo/quick's PPO (MLP 256-256, ReLU, observation normalisation folded in);
- taxiway/quick's MaskablePPO (MLP 64-64, with action masks; a decision is one row per aircraft slot;
  its runtime shield is not part of a bundle and is not timed);
- chemo/memory's RecurrentPPO (LSTM 64 + MLP; its state carried from decision to decision).

Observations and masks are the ones the policy met on one episode of its environment (the export check's
episode). Per case and batch size, the torch policy, ``Bundle.act`` (``Stream.act`` for the recurrent
policy, which also checks and carries the state) and onnxruntime's ``session.run`` alone (inputs
prepared, nothing checked) are timed in turn, ``REPEATS`` times; the figure is the median over repeats
of milliseconds per decision. Both sides use one thread (``torch.set_num_threads(1)``, onnxruntime's
intra-op threads 1), as export and evaluation do. The import time is the wall time of a fresh
``python -c "import fieldrl.runtime"`` minus that of ``python -c pass``, medians of ``REPEATS``
alternating runs; ``+ onnxruntime`` adds the import a first ``Bundle.load`` makes.

Target (issue 42): at most 0.2 ms per decision at batch 1 for the MLP policies, ``Bundle.act``.
``--quick``: fewer repeats and calls.

Run: ``python benchmarks/bench_export.py``. Writes ``benchmarks/results/export.json``.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from functools import partial
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import torch
from _common import machine_info, quick_mode, write_result

from fieldrl import __version__, export, runtime
from fieldrl.domains import get_domain
from fieldrl.policies.learned import SB3Policy, build_model
from fieldrl.scenario import load_scenario

#: (scenario, its learned entry, setting, what the case is called)
CASES = [
    ("chemo/quick", "PPO", "default", "MLP PPO (chemo)"),
    ("taxiway/quick", "MaskablePPO + shield", "default", "MaskablePPO with masks (taxiway)"),
    ("chemo/memory", "RecurrentPPO", "s1", "RecurrentPPO (chemo)"),
]
BATCHES = (1, 1000)
TARGET_MS = 0.2  # issue 42: a bundle answers in at most 0.2 ms per decision at batch 1 (MLP policies)
RESULT = Path(__file__).parent / "results" / "export.json"


class _Masks:
    """What ``SB3Policy.act`` reads a batch's action masks from (the bound envs)."""

    def __init__(self, masks: np.ndarray | None) -> None:
        self.masks = masks

    def action_masks(self) -> np.ndarray | None:
        return self.masks


def _policy(ref: str, label: str, setting: str) -> tuple[Any, Any, SB3Policy, dict[str, Any]]:
    """The entry's network on one env of its domain, as export rebuilds it, with observation statistics
    where the entry normalises (zero mean, unit variance: the arithmetic is what is timed)."""
    scenario = load_scenario(ref)
    entry = next(e for e in scenario.policies.learned if e.label == label)
    domain = get_domain(scenario.domain)
    params = domain.params_model.model_validate(scenario.policy_params(setting, label))
    venv = domain.make_train_vec_env(params, 1, 0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = build_model(entry.training_spec(), venv, seed=0)
    venv.close()
    shape = model.observation_space.shape
    norm = None
    if entry.normalize_obs:
        norm = {
            "mean": np.zeros(shape).tolist(),
            "var": np.ones(shape).tolist(),
            "clip_obs": 10.0,
            "epsilon": 1e-8,
        }
    about = {
        "algorithm": entry.algorithm,
        "policy_kwargs": {k: str(v) for k, v in entry.hyperparameters.get("policy_kwargs", {}).items()},
        "parameters": int(sum(p.numel() for p in model.policy.parameters())),
        "normalize_obs": entry.normalize_obs,
    }
    return domain, params, SB3Policy(label, model, norm), about


def _per_decision_ms(call: Callable[[], Any], calls: int, decisions: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        call()
    return 1000.0 * (time.perf_counter() - start) / (calls * decisions)


def _time_case(ref: str, label: str, setting: str, name: str, repeats: int, calls: dict[int, int]) -> dict:
    domain, params, policy, about = _policy(ref, label, setting)
    data, contract, check = export.build_bundle(domain, params, policy, seed=0)
    bundle = runtime.Bundle(contract, data, name)
    played = export.play_one_episode(domain, params, policy, seed=0)
    rng = np.random.default_rng(0)
    measured: dict[str, Any] = {}
    for batch in BATCHES:
        pick = rng.integers(0, len(played.observations), size=batch)
        obs = np.stack([played.observations[i] for i in pick])  # (batch, [agents,] features)
        masks = None if played.masks[0] is None else np.stack([played.masks[i] for i in pick])
        one = batch == 1
        bundle_obs, bundle_mask = (obs[0], None if masks is None else masks[0]) if one else (obs, masks)
        rows = int(np.prod(obs.shape[: obs.ndim - len(bundle.obs_shape)]))
        starts = np.zeros(batch, dtype=bool)
        policy.reset(batch)
        policy.bind_envs(_Masks(masks))
        stream = bundle.stream()
        stream.act(bundle_obs, bundle_mask, episode_start=True)
        policy.act(obs, np.ones(batch, dtype=bool))  # the first decisions set up the state

        feed = {bundle._obs_input: obs.reshape(rows, *bundle.obs_shape).astype(np.float64)}
        if masks is not None:
            feed[bundle._mask_input] = masks.reshape(rows, -1)
        if bundle.recurrent:
            feed[bundle._start_input] = np.zeros(rows, dtype=bool)
            feed.update(bundle.initial_state(rows))
        wanted = [bundle._outputs[0], *(t.output for t in bundle.state_spec)]

        act = stream.act if bundle.recurrent else bundle.act
        timed: dict[str, Callable[[], Any]] = {
            "torch": partial(policy.act, obs, starts),
            "bundle": partial(act, bundle_obs, bundle_mask),
            "onnx_run": partial(bundle.session.run, wanted, feed),
        }
        n = calls[batch]
        for call in timed.values():  # warm up
            _per_decision_ms(call, max(1, n // 10), batch)
        times: dict[str, list[float]] = {k: [] for k in timed}
        for _ in range(repeats):  # in turn, so a busy moment of the machine hits all three alike
            for key, call in timed.items():
                times[key].append(_per_decision_ms(call, n, batch))
        med = {k: statistics.median(v) for k, v in times.items()}
        measured[str(batch)] = {
            "rows_per_call": rows,
            "calls_per_repeat": n,
            "torch_ms": round(med["torch"], 5),
            "bundle_ms": round(med["bundle"], 5),
            "onnx_run_ms": round(med["onnx_run"], 5),
            "torch_over_bundle": round(med["torch"] / med["bundle"], 2),
            "all_ms": {k: [round(x, 5) for x in v] for k, v in times.items()},
        }
    contract_bytes = len((json.dumps(contract, indent=1) + "\n").encode())
    mlp = not bundle.recurrent
    return {
        "case": name,
        "scenario": ref,
        "policy": label,
        "setting": setting,
        **about,
        "recurrent": bundle.recurrent,
        "observation_shape": list(bundle.obs_shape),
        "rows_per_decision": measured["1"]["rows_per_call"],
        "mask": bundle.mask_size,
        "onnx_bytes": len(data),
        "bundle_json_bytes": contract_bytes,
        "export_check": check,
        "batch": measured,
        "target_ms_batch_1": TARGET_MS if mlp else None,
        "target_met": (measured["1"]["bundle_ms"] <= TARGET_MS) if mlp else None,
    }


def _wall(code: str) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, env={**os.environ, "PYTHONWARNINGS": "ignore"})
    return time.perf_counter() - start


def _import_times(repeats: int, copy_dir: Path) -> dict[str, Any]:
    """Wall times of fresh interpreters importing the runtime, and references to read them by: the
    package import (``fieldrl/__init__`` imports gymnasium), a copy of ``runtime.py`` on its own, numpy."""
    alone = f"import sys; sys.path.insert(0, {str(copy_dir)!r}); import runtime"
    codes = {
        "python_pass_s": "pass",
        "import_fieldrl_runtime_s": "import fieldrl.runtime",
        "import_fieldrl_runtime_and_onnxruntime_s": "import fieldrl.runtime, onnxruntime",
        "import_runtime_py_copy_s": alone,
        "import_runtime_py_copy_and_onnxruntime_s": alone + ", onnxruntime",
        "import_numpy_s": "import numpy",
    }
    times: dict[str, list[float]] = {k: [] for k in codes}
    _wall("pass")  # the interpreter's files into the page cache
    for _ in range(repeats):
        for key, code in codes.items():
            times[key].append(_wall(code))
    med = {k: statistics.median(v) for k, v in times.items()}
    return {
        **{k: round(v, 4) for k, v in med.items()},
        "runtime_minus_pass_s": round(med["import_fieldrl_runtime_s"] - med["python_pass_s"], 4),
        "runtime_and_onnxruntime_minus_pass_s": round(
            med["import_fieldrl_runtime_and_onnxruntime_s"] - med["python_pass_s"], 4
        ),
        "runtime_py_copy_minus_pass_s": round(med["import_runtime_py_copy_s"] - med["python_pass_s"], 4),
        "numpy_minus_pass_s": round(med["import_numpy_s"] - med["python_pass_s"], 4),
        "repeats": repeats,
        "all_s": {k: [round(x, 4) for x in v] for k, v in times.items()},
    }


def main() -> None:
    quick = quick_mode()
    repeats = 3 if quick else 9
    calls = {1: 100, 1000: 2} if quick else {1: 1000, 1000: 10}
    torch.set_num_threads(1)
    started = machine_info(
        fieldrl=__version__,
        torch=torch.__version__,
        onnxruntime=metadata.version("onnxruntime"),
        stable_baselines3=metadata.version("stable-baselines3"),
        sb3_contrib=metadata.version("sb3-contrib"),
    )
    cases = [_time_case(*case, repeats, calls) for case in CASES]
    with tempfile.TemporaryDirectory(prefix="fieldrl-bench-export-") as tmp:
        shutil.copy(runtime.__file__, Path(tmp) / "runtime.py")
        imports = _import_times(repeats, Path(tmp))
    met = [c["target_met"] for c in cases if c["target_met"] is not None]
    result = {
        "benchmark": "decision latency of an exported bundle (onnxruntime, Bundle.act) against the torch "
        "policy (SB3Policy.act), batch 1 and 1,000; bundle sizes; import time of fieldrl.runtime",
        "date": dt.date.today().isoformat(),
        "machine": started,
        "load_average_1min_at_end": os.getloadavg()[0],
        "repeats": repeats,
        "calls_per_repeat": {str(k): v for k, v in calls.items()},
        "unit": "ms per decision, median over repeats (a decision of taxiway is every aircraft slot's move)",
        "weights": "untrained, the shipped entry's architecture (latency and size do not depend on weights)",
        "target": f"bundle <= {TARGET_MS:g} ms per decision at batch 1 for the MLP policies",
        "target_met": all(met),
        "cases": cases,
        "import": imports,
        "headline": [
            *(
                {
                    "label": f"bundle, {c['case']}, batch 1",
                    "value": c["batch"]["1"]["bundle_ms"],
                    "unit": "ms/decision",
                    **({"target": f"<= {TARGET_MS:g}"} if c["target_met"] is not None else {}),
                }
                for c in cases
            ),
            {
                "label": "import fieldrl.runtime (minus python -c pass)",
                "value": imports["runtime_minus_pass_s"],
                "unit": "s",
            },
        ],
    }
    path = write_result(RESULT, result)
    print(
        f"{'case':36} {'batch':>5} {'torch ms':>9} {'bundle ms':>9} {'ort.run ms':>10} {'torch/bundle':>12}"
    )
    for c in cases:
        for batch, m in c["batch"].items():
            times = f"{m['torch_ms']:9.4f} {m['bundle_ms']:9.4f} {m['onnx_run_ms']:10.4f}"
            print(f"{c['case']:36} {batch:>5} {times} {m['torch_over_bundle']:12.1f}")
    for c in cases:
        target = (
            ""
            if c["target_met"] is None
            else f"; target <= {TARGET_MS:g} ms at batch 1: " + ("met" if c["target_met"] else "NOT met")
        )
        sizes = f"policy.onnx {c['onnx_bytes']:,} B, bundle.json {c['bundle_json_bytes']:,} B"
        print(f"{c['case']}: {sizes}{target}")
    ms = {k: round(v * 1000) for k, v in imports.items() if isinstance(v, float)}
    print(
        f"import fieldrl.runtime: +{ms['runtime_minus_pass_s']} ms over python -c pass "
        f"({ms['python_pass_s']} ms); with onnxruntime +{ms['runtime_and_onnxruntime_minus_pass_s']} ms; "
        f"runtime.py copied alone +{ms['runtime_py_copy_minus_pass_s']} ms; "
        f"numpy alone +{ms['numpy_minus_pass_s']} ms"
    )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
