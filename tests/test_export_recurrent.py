"""Recurrent policies exported with their memory (issue 42): RecurrentPPO's actor LSTM state and LSTM-TD3's
window of past (observation, action) pairs are explicit inputs and outputs of the bundle, reset where an
episode starts, and the runtime keeps them per stream.

Parity is measured against the torch policy as evaluation loads and runs it
(:func:`fieldrl.evaluation.runner.build_policy`, :class:`~fieldrl.policies.learned.SB3Policy`, observation
normalisation included), on whole held-out episodes and across episode boundaries within one stream.
"""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from conftest import TINY_SCENARIO
from test_export import scrambled
from typer.testing import CliRunner

import fieldrl
from fieldrl import export, runtime
from fieldrl.api import evaluate, open_run
from fieldrl.cli import app
from fieldrl.domains import get_domain
from fieldrl.evaluation.runner import EvalJob, build_policy, episode_seed, run_episodes
from fieldrl.policies.base import Policy
from fieldrl.policies.learned import SB3Policy

runner = CliRunner()

#: RecurrentPPO at the smallest budget that trains one update of every part (64 steps, one epoch), with
#: a small LSTM; LSTM-TD3 with a short window, a few gradient steps after 32 random ones
TINY_RECURRENT: dict[str, Any] = copy.deepcopy(TINY_SCENARIO) | {
    "name": "tiny-recurrent",
    "policies": {
        "heuristics": TINY_SCENARIO["policies"]["heuristics"],
        "learned": [
            {
                "algorithm": "recurrent-ppo",
                "name": "RecurrentPPO",
                "policy": "MlpLstmPolicy",
                "train_steps": 64,
                "n_envs": 2,
                "hyperparameters": {
                    "n_steps": 32,
                    "batch_size": 64,
                    "n_epochs": 1,
                    "policy_kwargs": {"lstm_hidden_size": 16},
                },
            },
            {
                "algorithm": "lstm-td3",
                "name": "LSTM-TD3",
                "policy": "MlpLstmPolicy",
                "train_steps": 64,
                "n_envs": 2,
                "hyperparameters": {
                    "learning_starts": 32,
                    "batch_size": 16,
                    "history_length": 3,
                    "lstm_hidden_size": 8,
                    "policy_kwargs": {"net_arch": [32, 32], "pre_lstm_arch": [16], "feature_arch": [16]},
                },
            },
        ],
    },
}
LABELS = ["RecurrentPPO", "LSTM-TD3"]
CHEMO_PARAMS = {"preset": "s3", "max_t": 60}


@pytest.fixture(scope="module")
def recurrent_run(tmp_path_factory) -> Path:
    """The tiny chemo scenario with RecurrentPPO and LSTM-TD3, trained (not evaluated)."""
    base = tmp_path_factory.mktemp("recurrent")
    (base / "scenario.yaml").write_text(yaml.safe_dump(TINY_RECURRENT, sort_keys=False))
    return fieldrl.train(base / "scenario.yaml", out=base / "run", show_progress=False)


@pytest.fixture(scope="module")
def bundles(recurrent_run: Path, tmp_path_factory) -> dict[str, Path]:
    """Each recurrent policy exported by the CLI."""
    found = {}
    for label in LABELS:
        out = tmp_path_factory.mktemp("bundle") / label
        result = runner.invoke(app, ["export", str(recurrent_run), "--policy", label, "--out", str(out)])
        assert result.exit_code == 0, result.output
        assert "Checked against the torch policy on" in result.output
        found[label] = out
    return found


def _evaluated_policy(run_dir: Path, label: str) -> tuple[SB3Policy, Any, Any, Any]:
    """The torch policy as evaluation loads it, with the run's scenario, domain and held-out params."""
    folder, scenario, _ = open_run(run_dir)
    domain = get_domain(scenario.domain)
    params = domain.params_model.model_validate(scenario.policy_params("default", label))
    job = EvalJob("default", label, scenario.seeds.train[0])
    loaded = build_policy(scenario, domain, params, job, str(run_dir), folder.hashes())
    assert isinstance(loaded, SB3Policy) and loaded.recurrent and loaded.norm is not None
    return loaded, scenario, domain, domain.held_out_params(params, scenario.seeds.eval)


def _worst(pairs: list[tuple[np.ndarray, np.ndarray]]) -> float:
    return max(float(np.max(np.abs(np.asarray(got, np.float64) - want))) for want, got in pairs)


# ----------------------------------------------------------------------------- parity on held-out episodes


class _Both(Policy):
    """Plays the torch policy as evaluation does, and a bundle stream on every same observation."""

    def __init__(self, torch_policy: SB3Policy, bundle: runtime.Bundle) -> None:
        self.name = torch_policy.name
        self.torch_policy, self.bundle = torch_policy, bundle
        self.stream = bundle.stream()
        self.seen: list[tuple[np.ndarray, np.ndarray]] = []  # per decision: torch's actions, the bundle's

    def reset(self, n_envs: int) -> None:
        self.torch_policy.reset(n_envs)
        self.stream.reset()

    def bind_envs(self, envs: Any) -> None:
        self.torch_policy.bind_envs(envs)

    def act(self, obs: np.ndarray, episode_start: np.ndarray) -> np.ndarray:
        expected = np.asarray(self.torch_policy.act(obs, episode_start))
        self.seen.append((expected, self.stream.act(obs, episode_start=episode_start)))  # a row per episode
        return expected


@pytest.mark.parametrize("label", LABELS)
def test_recurrent_bundle_gives_evaluations_actions_on_every_held_out_decision(recurrent_run, bundles, label):
    torch_policy, scenario, domain, params = _evaluated_policy(recurrent_run, label)
    both = _Both(torch_policy, runtime.Bundle.load(bundles[label]))
    plan = [(s, e) for s in scenario.seeds.eval for e in range(scenario.episodes_per_seed)]
    run_episodes(
        domain, params, both, [episode_seed(s, e) for s, e in plan], None, cases=[s for s, _ in plan]
    )
    worst = _worst(both.seen)
    print(f"\n{label}: {len(both.seen)} decisions x {len(plan)} held-out episodes, max |diff| {worst:.3g}")
    assert len(both.seen) >= 10 and both.seen[0][0].shape == (len(plan), 1)
    assert worst <= 1e-5
    doses = np.concatenate([want.ravel() for want, _ in both.seen])
    assert doses.std() > 0  # the policy acts differently from state to state


@pytest.mark.parametrize("label", LABELS)
def test_one_stream_across_episode_boundaries_matches_and_its_memory_matters(recurrent_run, bundles, label):
    """The held-out patients one after another in one stream (the torch policy is not reset between them,
    as the bundle's stream is not): ``episode_start`` at each first decision resets both."""
    torch_policy, scenario, domain, params = _evaluated_policy(recurrent_run, label)
    bundle = runtime.Bundle.load(bundles[label])
    stream = bundle.stream()
    torch_policy.reset(1)
    decisions: list[tuple[np.ndarray, bool, np.ndarray, np.ndarray]] = []  # obs, start, torch, bundle
    for case in scenario.seeds.eval:
        envs = domain.make_eval_envs(params, [episode_seed(case, 0)], [case])
        try:
            obs, start, done = np.asarray(envs.reset()), True, False
            torch_policy.bind_envs(envs)
            while not done:
                want = np.asarray(torch_policy.act(obs, np.array([start])))
                decisions.append((obs[0].copy(), start, want[0], stream.act(obs[0], episode_start=start)))
                obs, _, terminated, truncated, _ = envs.step(want)
                obs, start = np.asarray(obs), False
                done = bool(np.asarray(terminated)[0] or np.asarray(truncated)[0])
        finally:
            envs.close()
    boundaries = sum(start for _, start, _, _ in decisions) - 1
    worst = _worst([(want, got) for _, _, want, got in decisions])
    print(
        f"\n{label}: one stream, {len(decisions)} decisions, {boundaries} boundaries, max |diff| {worst:.3g}"
    )
    assert boundaries == len(scenario.seeds.eval) - 1 and worst <= 1e-5

    # the test can see a bundle that forgot its memory, or one that ignored the episode boundaries
    forgetful, unbounded = bundle.stream(), bundle.stream()
    without_memory = [(want, forgetful.act(obs, episode_start=True)) for obs, _, want, _ in decisions]
    without_resets = [(want, unbounded.act(obs)) for obs, _, want, _ in decisions]
    print(f"without memory: {_worst(without_memory):.3g}; without resets: {_worst(without_resets):.3g}")
    assert _worst(without_memory) > 1e-4 and _worst(without_resets) > 1e-4


TAXIWAY_PARAMS = {"layout": "small", "density": "high", "max_slots": 4, "horizon_min": 5.0, "drain_min": 2.0}
SCRAMBLED = [
    pytest.param(
        "chemo",
        CHEMO_PARAMS,
        "recurrent-ppo",
        {"policy_kwargs": {"lstm_hidden_size": 16, "n_lstm_layers": 2}},
        id="chemo-rppo-2-layers",
    ),
    pytest.param(
        "taxiway",
        TAXIWAY_PARAMS,
        "recurrent-ppo",
        {"policy_kwargs": {"lstm_hidden_size": 16}},
        id="taxiway-rppo-per-agent-discrete",
    ),
    pytest.param(
        "chemo",
        CHEMO_PARAMS,
        "lstm-td3",
        {
            "history_length": 3,
            "lstm_hidden_size": 8,
            "policy_kwargs": TINY_RECURRENT["policies"]["learned"][1]["hyperparameters"]["policy_kwargs"],
        },
        id="chemo-lstm-td3",
    ),
]


def test_held_out_episodes_replayed_through_recurrent_bundles_give_the_runs_kpis(
    recurrent_run, bundles, tmp_path
):
    """The evaluation's batch of six patients, one state row each, played by the bundle alone."""
    run_dir = Path(shutil.copytree(recurrent_run, tmp_path / "run"))  # the module's run stays unevaluated
    evaluate(run_dir, show_progress=False)
    for label in LABELS:
        check = export.replay_bundle(bundles[label], run_dir, episodes=None)
        assert check.cases == [(s, 0) for s in range(100, 106)] and check.continuous
        worst = max(
            abs(b - r) / abs(r)
            for m in check.metrics
            for r, b in zip(check.run[m], check.bundle[m], strict=True)
            if r != 0
        )
        print(f"\n{label}: 6 held-out episodes replayed, KPIs within {worst:.3g} (relative) of the run's")
        assert check.ok, check.mismatches


@pytest.mark.parametrize(("domain_name", "params_data", "algorithm", "hyper"), SCRAMBLED)
def test_the_export_check_plays_an_episode_twice_in_one_stream_and_rows_reset_on_their_own(
    domain_name, params_data, algorithm, hyper
):
    domain, params, policy = scrambled(domain_name, params_data, algorithm, hyper, policy="MlpLstmPolicy")
    data, contract, check = export.build_bundle(domain, params, policy, seed=3)
    continuous = contract["action"]["kind"] == "continuous"
    assert check["episodes"] == 2 and check["decisions"] >= 10 and contract["format"] == runtime.FORMAT_STATE
    assert check["max_abs_difference"] <= 1e-5 if continuous else check["differing_actions"] == 0
    # a batch of four streams whose episodes start at different decisions, as evaluation's batch never does
    bundle = runtime.Bundle(contract, data)
    rng = np.random.default_rng(5)
    policy.reset(4)
    stream = bundle.stream()
    seen = [np.asarray(o) for o in export.play_one_episode(domain, params, policy, seed=4).observations]
    policy.reset(4)
    pairs, restarts, forgetful = [], 0, bundle.stream()
    for step in range(40):
        if domain_name == "chemo":  # three relative sizes: random ones reach states one episode does not
            obs = rng.uniform(0, 1.5, size=(4, 3))
        else:  # (4, agents, features), as the episode met them
            obs = np.stack([seen[i] for i in rng.integers(0, len(seen), size=4)])
        starts = np.ones(4, dtype=bool) if step == 0 else rng.random(4) < 0.15
        restarts += int(starts.sum()) if step else 0
        want = np.asarray(policy.act(obs, starts))
        pairs.append((want, stream.act(obs, episode_start=starts), forgetful.act(obs, episode_start=True)))
    worst = _worst([(want, got) for want, got, _ in pairs])
    memory = _worst([(want, without) for want, _, without in pairs])  # what a bundle without memory misses
    print(f"\n{domain_name} {algorithm}: {check}")
    print(f"4 rows x 40 steps, {restarts} restarts: max |diff| {worst:.3g}; without memory {memory:.3g}")
    assert restarts >= 3 and (worst <= 1e-5 if continuous else worst == 0)
    assert memory > 1e-3  # the state moves the actions: a wrong state or reset would show


# ----------------------------------------------------------------------------- the bundle's files


def test_a_recurrent_bundle_names_its_state_in_the_graph_the_contract_and_the_card(bundles):
    import onnx

    expected = {
        "RecurrentPPO": (["h", "c"], [[1, 16], [1, 16]]),
        "LSTM-TD3": (["history_obs", "history_actions", "history_length"], [[3, 3], [3, 1], []]),
    }
    for label, folder in bundles.items():
        names, shapes = expected[label]
        graph = onnx.load(str(folder / "policy.onnx"))
        onnx.checker.check_model(graph)
        assert [i.name for i in graph.graph.input] == ["obs", "episode_start", *names]
        assert [o.name for o in graph.graph.output] == ["action", *(f"{n}_out" for n in names)]
        contract = json.loads((folder / "bundle.json").read_text())
        assert (
            contract["format"] == "fieldrl-bundle/2" and contract["onnx"]["episode_start"] == "episode_start"
        )
        assert [t["name"] for t in contract["state"]["tensors"]] == names
        assert [t["shape"] for t in contract["state"]["tensors"]] == shapes
        assert json.loads((folder / "manifest.json").read_text())["format"] == "fieldrl-bundle/2"
        card = json.loads((folder / "model-card.json").read_text())
        assert card["export_check"]["episodes"] == 2 and card["export_check"]["max_abs_difference"] <= 1e-5
        assert not any(line.startswith("No memory") for line in card["not_promised"])
        assert export.MEMORY_KEPT_BY_CALLER in card["not_promised"]
        text = (folder / "model-card.md").read_text()
        assert f"`{names[0]}` -> `{names[0]}_out`" in text and "played 2 times in one stream" in text
        assert "Memory is the caller's to keep" in text


# ----------------------------------------------------------------------------- the runtime keeps the state


def test_the_runtime_refuses_a_recurrent_policy_without_its_state_and_names_bad_state(bundles):
    bundle = runtime.Bundle.load(bundles["RecurrentPPO"])
    assert bundle.recurrent and [t.name for t in bundle.state_spec] == ["h", "c"]
    obs = [0.3, 0.4, 0.2]
    with pytest.raises(runtime.BundleError, match=r"act\(\): this policy is recurrent .* use step"):
        bundle.act(obs)
    action, state = bundle.step(obs)  # None: a new stream
    assert action.shape == (1,) and state["h"].shape == (1, 1, 16) and state["c"].dtype == np.float32
    again, _ = bundle.step(obs, bundle.initial_state(1), episode_start=True)
    np.testing.assert_array_equal(action, again)
    batch, rows = bundle.step(np.zeros((5, 3)), None, episode_start=[1, 0, 0, 1, 0])
    assert batch.shape == (5, 1) and rows["h"].shape == (5, 1, 16)
    nan = {"h": state["h"].copy(), "c": state["c"]}
    nan["h"][0, 0, 3] = np.nan
    cases = [
        ({"h": state["h"]}, True, r"state: \['h'\]; expected \{h, c\} as step\(\) returned it"),
        (
            {"h": state["h"], "c": state["c"][:, :, :8]},
            False,
            r"state: c has shape \(1, 1, 8\); expected \(1, 1, 16\)",
        ),
        (
            rows,
            False,
            r"state: h has shape \(5, 1, 16\); expected \(1, 1, 16\) \(one row per observation row",
        ),
        (nan, False, r"state: h holds NaN at index \[0, 0, 3\]; expected finite numbers"),
        (
            state,
            [True, False],
            r"episode_start: shape \(2,\); expected true/false, or one per observation row",
        ),
        (state, "yes", "episode_start: expected true/false"),
    ]
    for bad_state, start, words in cases:
        with pytest.raises(runtime.BundleError, match=words):
            bundle.step(obs, bad_state, start)
    with pytest.raises(runtime.BundleError, match="rows = 0: expected a whole number of observation rows"):
        bundle.initial_state(0)
    stream = bundle.stream()
    stream.act(np.zeros((2, 3)), episode_start=True)
    with pytest.raises(runtime.BundleError, match=r"state: h has shape \(2, 1, 16\); expected \(3, 1, 16\)"):
        stream.act(np.zeros((3, 3)))
    assert stream.act(np.zeros((3, 3)), episode_start=True).shape == (3, 1)  # every row starts: may resize


def test_fieldrl_act_keeps_the_state_across_the_lines_of_a_stream(bundles):
    folder = bundles["RecurrentPPO"]
    rng = np.random.default_rng(0)
    observations = rng.uniform(0, 1.5, size=(8, 3)).round(4).tolist()
    starts = [True, False, False, False, True, False, False, False]
    lines = [
        json.dumps({"obs": o, "episode_start": True} if s else ({"obs": o} if i % 2 else o))
        for i, (o, s) in enumerate(zip(observations, starts, strict=True))
    ]
    result = runner.invoke(app, ["act", str(folder)], input="\n".join(lines) + "\n")
    assert result.exit_code == 0, result.output
    answers = [json.loads(line)["action"] for line in result.stdout.splitlines()]
    bundle = runtime.Bundle.load(folder)
    stream = bundle.stream()
    assert answers == [
        stream.act(o, episode_start=s).tolist() for o, s in zip(observations, starts, strict=True)
    ]
    fresh = [bundle.step(o)[0].tolist() for o in observations]  # every line on its own: no memory
    assert answers[0] == fresh[0] and answers[4] == fresh[4]  # an episode's first decision needs no memory
    assert answers != fresh  # the others do: the stream kept the state from line to line
    ignoring = bundle.stream()
    assert answers != [ignoring.act(o).tolist() for o in observations]  # and reset it at line 5

    bad = lines[:2] + [json.dumps({"obs": [observations[2], observations[3]]})]
    result = runner.invoke(app, ["act", str(folder)], input="\n".join(bad) + "\n")
    error = result.stderr.strip()
    assert result.exit_code == 2 and len(result.stdout.splitlines()) == 2
    assert error.startswith("error: input line 3: state: h has shape (1, 1, 16); expected (2, 1, 16)"), error
    assert "\n" not in error
