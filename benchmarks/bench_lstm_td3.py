"""LSTM-TD3 vs SB3 TD3 on the chemo env: training throughput and per-decision latency.

Run: ``python benchmarks/bench_lstm_td3.py``. Writes ``benchmarks/results/lstm_td3.json``
and prints a table. Both algorithms get the same env (chemo s1, ``N_ENVS`` patients), batch
size, update schedule (one gradient step per vector step), MLP width ``WIDTH`` (TD3's
``net_arch`` and LSTM-TD3's head ``[WIDTH, WIDTH]``) and one torch thread, as fieldrl trains.
LSTM-TD3 is measured twice: ``lstm-td3-equal`` with its memory and feature branches also
``WIDTH`` wide (LSTM hidden size 256), and ``lstm-td3-small`` with them ``SMALL_MEMORY`` wide.
An LSTM pass over ``HISTORY_LENGTH`` steps costs about ``8 * HISTORY_LENGTH * h^2`` flops per
sample, against ``WIDTH^2`` for a hidden MLP layer, so the memory width decides the ratio.
A second pair, ``td3-study`` and ``lstm-td3-study``, is built from the TD3 and LSTM-TD3 entries of
the ``chemo/memory`` scenario exactly as the study trains them (their networks, batch sizes,
``VecNormalize``), only with learning starting after the same warm-up.
"""

from __future__ import annotations

import datetime as dt
import time
from pathlib import Path
from typing import Any

import numpy as np
import stable_baselines3 as sb3
import torch
from _common import machine_info, quick_mode, write_result
from stable_baselines3.common.logger import Logger
from stable_baselines3.common.vec_env import VecNormalize

from fieldrl.domains import get_domain
from fieldrl.policies.lstm_td3 import LSTMTD3
from fieldrl.policies.registry import ALGORITHMS, build_kwargs
from fieldrl.scenario import load_scenario

N_ENVS = 4
BATCH_SIZE = 256
WIDTH = 256
SMALL_MEMORY = 64
HISTORY_LENGTH = 5
WARMUP_STEPS = 1024  # env steps of random actions and first updates before timing
TIMED_STEPS = 400  # env steps timed (TIMED_STEPS / N_ENVS gradient steps)
MODELS = ("td3", "lstm-td3-equal", "lstm-td3-small", "td3-study", "lstm-td3-study")
#: each model's throughput is compared with this TD3
BASELINE = {"lstm-td3-equal": "td3", "lstm-td3-small": "td3", "lstm-td3-study": "td3-study"}
STUDY_ENTRIES = {"td3-study": "TD3", "lstm-td3-study": "LSTM-TD3"}
LATENCY_CALLS = 300
REPEATS = 2
RESULT = Path(__file__).parent / "results" / "lstm_td3.json"


def make_model(name: str, seed: int = 0) -> Any:
    model = _build_model(name, seed)
    model.set_logger(Logger(folder=None, output_formats=[]))  # SB3's default makes a /tmp folder per learn()
    return model


def _build_model(name: str, seed: int) -> Any:
    domain = get_domain("chemo")
    env = domain.make_train_vec_env(domain.params_model(preset="s1"), N_ENVS, seed)
    if name in STUDY_ENTRIES:
        study = load_scenario("chemo/memory")
        entry = next(e for e in study.policies.learned if e.label == STUDY_ENTRIES[name])
        assert entry.n_envs == N_ENVS, "the study trains on N_ENVS envs"
        kwargs = build_kwargs(entry.hyperparameters, 1)
        kwargs["learning_starts"] = WARMUP_STEPS - 64
        venv = VecNormalize(env, norm_obs=entry.normalize_obs, norm_reward=entry.normalize_reward)
        return ALGORITHMS[entry.algorithm](entry.policy, venv, seed=seed, device="cpu", **kwargs)
    common = dict(batch_size=BATCH_SIZE, learning_starts=WARMUP_STEPS - 64, seed=seed, device="cpu")
    if name == "td3":
        return sb3.TD3("MlpPolicy", env, policy_kwargs={"net_arch": [WIDTH, WIDTH]}, **common)
    memory = WIDTH if name == "lstm-td3-equal" else SMALL_MEMORY
    return LSTMTD3(
        "MlpLstmPolicy",
        env,
        history_length=HISTORY_LENGTH,
        lstm_hidden_size=memory,
        policy_kwargs={"net_arch": [WIDTH, WIDTH], "pre_lstm_arch": [memory], "feature_arch": [memory]},
        **common,
    )


def train_rate(name: str) -> float:
    """Env steps/s while training (collection + one gradient step per vector step)."""
    model = make_model(name)
    model.learn(WARMUP_STEPS)
    start = time.perf_counter()
    model.learn(TIMED_STEPS, reset_num_timesteps=False)
    return TIMED_STEPS / (time.perf_counter() - start)


def latency(name: str, batch: int) -> float:
    """Median seconds per ``predict`` call on ``batch`` observations (stateful for LSTM-TD3)."""
    model = make_model(name)
    obs = np.random.default_rng(0).random((batch, 3)).astype(np.float32)
    times = []
    state, start = None, np.ones(batch, dtype=bool)
    for _ in range(LATENCY_CALLS):
        t0 = time.perf_counter()
        if name.startswith("td3"):
            model.predict(obs, deterministic=True)
        else:
            _, state = model.predict(obs, state=state, episode_start=start, deterministic=True)
            start = np.zeros(batch, dtype=bool)
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def main() -> dict:
    global REPEATS, TIMED_STEPS, LATENCY_CALLS
    if quick_mode():
        REPEATS, TIMED_STEPS, LATENCY_CALLS = 1, 200, 100
    torch.set_num_threads(1)
    machine = machine_info(torch=torch.__version__, stable_baselines3=sb3.__version__)
    rates: dict[str, float] = {}
    for _ in range(REPEATS):  # interleaved, best of REPEATS: the machine may be busy
        for name in MODELS:
            rates[name] = max(rates.get(name, 0.0), train_rate(name))
    lat = {name: {b: latency(name, b) for b in (1, 64)} for name in MODELS}
    result = {
        "benchmark": "LSTM-TD3 vs SB3 TD3: training env-steps/s and predict latency on chemo s1",
        "timestamp": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": machine,
        "settings": {
            "env": "chemo preset s1 (ChemoVecEnv)",
            "n_envs": N_ENVS,
            "batch_size": BATCH_SIZE,
            "width": WIDTH,
            "td3_net_arch": [WIDTH, WIDTH],
            "study_pair": "td3-study, lstm-td3-study: chemo/memory's TD3 and LSTM-TD3 entries as written",
            "lstm_td3": {
                "net_arch": [WIDTH, WIDTH],
                "lstm_hidden_size/pre_lstm_arch/feature_arch": {"equal": WIDTH, "small": SMALL_MEMORY},
                "history_length": HISTORY_LENGTH,
            },
            "train_freq": 1,
            "gradient_steps": 1,
            "warmup_steps": WARMUP_STEPS,
            "timed_steps": TIMED_STEPS,
            "repeats": REPEATS,
            "latency_calls": LATENCY_CALLS,
            "torch_threads": 1,
        },
        "train_env_steps_per_s": rates,
        "train_ratio_to_td3": {n: rates[n] / rates[b] for n, b in BASELINE.items()},
        "predict_latency_ms": {n: {str(b): v * 1e3 for b, v in d.items()} for n, d in lat.items()},
        "predict_latency_ratio_to_td3": {
            n: {str(b): lat[n][b] / lat[base][b] for b in (1, 64)} for n, base in BASELINE.items()
        },
        "headline": [
            {
                "label": "LSTM-TD3 (64-unit memory) training throughput vs SB3 TD3 (same run)",
                "value": rates["lstm-td3-small"] / rates["td3"],
                "unit": "x",
                "target": ">= 0.3x",
            },
            {
                "label": "LSTM-TD3 vs TD3 training throughput as chemo/memory trains them (same run)",
                "value": rates["lstm-td3-study"] / rates["td3-study"],
                "unit": "x",
                "target": ">= 0.3x",
            },
            {
                "label": "LSTM-TD3 (64-unit memory) predict latency, batch 1",
                "value": lat["lstm-td3-small"][1] * 1e3,
                "unit": "ms",
            },
        ],
    }
    written = write_result(RESULT, result)
    print(f"{'':15} {'train steps/s':>14} {'x TD3':>6} {'predict 1 (ms)':>15} {'predict 64 (ms)':>16}")
    for name in MODELS:
        ratio = rates[name] / rates[BASELINE.get(name, name)]
        print(
            f"{name:15} {rates[name]:>14,.0f} {ratio:>6.2f} {lat[name][1] * 1e3:>15.3f}"
            f" {lat[name][64] * 1e3:>16.3f}"
        )
    print(f"wrote {written}")
    return result


if __name__ == "__main__":
    main()
