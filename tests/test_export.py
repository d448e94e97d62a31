"""`fieldrl export` and the bundle runtime: the bundle acts as the evaluated policy did, without torch.

Parity is measured against the torch policy exactly as evaluation loads and runs it
(:func:`fieldrl.evaluation.runner.build_policy`, :class:`~fieldrl.policies.learned.SB3Policy`, observation
normalisation included) on every decision of the run's held-out episodes.
"""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
import yaml
from conftest import TINY_SCENARIO, one_line_exit_2
from gymnasium import spaces
from typer.testing import CliRunner

import fieldrl
from fieldrl import bundle_replay, export, runtime
from fieldrl.api import create_run, evaluate, open_run
from fieldrl.cli import app
from fieldrl.domains import get_domain
from fieldrl.errors import FieldrlError
from fieldrl.evaluation.runner import EvalJob, build_policy, episode_seed, run_episodes
from fieldrl.policies.base import Policy
from fieldrl.policies.learned import SB3Policy, build_model
from fieldrl.policies.weights import read_record
from fieldrl.scenario import LearnedEntry

runner = CliRunner()

TAXIWAY_PARAMS = {"layout": "small", "density": "high", "max_slots": 4, "horizon_min": 5.0, "drain_min": 2.0}
#: a multi-agent, masked, discrete case without a shield: MaskablePPO shared by every aircraft
TINY_TAXIWAY: dict[str, Any] = {
    "name": "tiny-taxiway",
    "domain": "taxiway",
    "description": "test scenario",
    "params": TAXIWAY_PARAMS,
    "policies": {
        "heuristics": [{"use": "shortest-path", "name": "shortest path"}],
        "learned": [
            {
                "algorithm": "maskable-ppo",
                "name": "MaskablePPO",
                "train_steps": 256,
                "n_envs": 1,
                "hyperparameters": {"n_steps": 64, "batch_size": 64, "n_epochs": 1},
            }
        ],
    },
    "seeds": {"train": [0], "eval": {"start": 100, "count": 2}},
}


def _write(folder: Path, data: dict[str, Any]) -> Path:
    path = folder / "scenario.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


#: the held-out patient whose simulator crashes in ``chemo_run`` (in the evaluation and at every stress point)
CRASHING_CASE = 102
STRESS_POINTS = [0.0, 0.2, 0.8]  # observation noise; s3, the tiny scenario's preset, has 0.2


@pytest.fixture(scope="module")
def chemo_run(tmp_path_factory) -> Path:
    """The tiny chemo scenario trained (PPO, 256 steps), evaluated, stressed along observation noise and
    reported, while held-out patient 102's simulator crashes (in the evaluation and at every stress point):
    the run has failed episodes for the model card to name."""
    from fieldrl.evaluation import runner as eval_runner

    real = eval_runner._run_batch

    def crashing(domain: Any, params: Any, policy: Any, seeds: list[int], cases: Any) -> Any:
        if CRASHING_CASE in seeds:
            raise RuntimeError("simulator died (solver diverged)")
        return real(domain, params, policy, seeds, cases)

    base = tmp_path_factory.mktemp("chemo")
    data = copy.deepcopy(TINY_SCENARIO)
    data["stress"] = {"axes": [{"axis": "obs_noise", "points": STRESS_POINTS}]}
    data["report"] = {"bootstrap_samples": 200}  # a failed case makes every resample's IQM slow
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(eval_runner, "_run_batch", crashing)
        return fieldrl.run(_write(base, data), out=base / "run", show_progress=False).run_dir


@pytest.fixture(scope="module")
def chemo_bundle(chemo_run: Path, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("chemo-bundle") / "bundle"
    result = runner.invoke(app, ["export", str(chemo_run), "--policy", "PPO", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert f"Bundle: {out}" in " ".join(result.output.split())
    assert "Replayed 1 held-out episode (seed 100) through the bundle: the same KPIs" in " ".join(
        result.output.split()
    )
    return out


@pytest.fixture(scope="module")
def taxiway_run(tmp_path_factory) -> Path:
    """The tiny taxiway scenario trained only (not evaluated: the model card has no results)."""
    base = tmp_path_factory.mktemp("taxiway")
    return fieldrl.train(_write(base, copy.deepcopy(TINY_TAXIWAY)), out=base / "run", show_progress=False)


@pytest.fixture(scope="module")
def taxiway_bundle(taxiway_run: Path, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("taxiway-bundle") / "bundle"
    export.export_policy(taxiway_run, "MaskablePPO", out=out)
    return out


# ----------------------------------------------------------------------------- parity on held-out episodes


class _Both(Policy):
    """Plays the torch policy (as evaluation does) and asks the bundle about every same observation."""

    def __init__(self, torch_policy: SB3Policy, bundle: runtime.Bundle) -> None:
        self.name = torch_policy.name
        self.torch_policy, self.bundle = torch_policy, bundle
        #: per decision (a batch of held-out episodes): observation, mask, torch's action, the bundle's
        self.seen: list[tuple[np.ndarray, np.ndarray | None, np.ndarray, np.ndarray]] = []
        self._envs: Any = None

    def reset(self, n_envs: int) -> None:
        self.torch_policy.reset(n_envs)

    def bind_envs(self, envs: Any) -> None:
        self._envs = envs
        self.torch_policy.bind_envs(envs)

    def act(self, obs: np.ndarray, episode_start: np.ndarray) -> np.ndarray:
        mask = np.asarray(self._envs.action_masks()) if self.bundle.mask_size is not None else None
        expected = np.asarray(self.torch_policy.act(obs, episode_start))
        self.seen.append((obs.copy(), mask, expected, self.bundle.act(obs, mask)))  # all episodes at once
        return expected


def _held_out_parity(run_dir: Path, policy: str, bundle_dir: Path) -> _Both:
    """Play the run's held-out episodes with the torch policy as evaluation loads it; ask the bundle too."""
    folder, scenario, _ = open_run(run_dir)
    domain = get_domain(scenario.domain)
    params = domain.params_model.model_validate(scenario.policy_params("default", policy))
    job = EvalJob("default", policy, scenario.seeds.train[0])
    loaded = build_policy(scenario, domain, params, job, str(run_dir), folder.hashes())
    assert (
        isinstance(loaded, SB3Policy) and loaded.norm is not None
    )  # normalisation is part of what is compared
    both = _Both(loaded, runtime.Bundle.load(bundle_dir))
    plan = [(s, e) for s in scenario.seeds.eval for e in range(scenario.episodes_per_seed)]
    run_episodes(
        domain,
        domain.held_out_params(params, scenario.seeds.eval),
        both,
        [episode_seed(s, e) for s, e in plan],
        trace_index=None,
        cases=[s for s, _ in plan],
    )
    return both


def test_chemo_bundle_gives_evaluations_actions_on_every_held_out_decision(chemo_run, chemo_bundle):
    both = _held_out_parity(chemo_run, "PPO", chemo_bundle)
    assert len(both.seen) >= 10
    worst = max(float(np.max(np.abs(got.astype(np.float64) - want))) for _, _, want, got in both.seen)
    print(
        f"\nchemo PPO: {len(both.seen)} decisions x 6 held-out episodes, max |bundle - torch| = {worst:.3g}"
    )
    assert worst <= 1e-5
    doses = np.concatenate([want.ravel() for _, _, want, _ in both.seen])
    assert doses.std() > 0  # the policy really acts differently from state to state


def test_multi_agent_masked_bundle_gives_evaluations_actions_exactly(taxiway_run, taxiway_bundle):
    both = _held_out_parity(taxiway_run, "MaskablePPO", taxiway_bundle)
    assert both.seen[0][2].shape == (2, 4)  # (held-out episodes, agent slots)
    differing = sum(int(np.sum(want != got)) for _, _, want, got in both.seen)
    print(
        f"\ntaxiway MaskablePPO: {len(both.seen)} decisions x 2 episodes x 4 slots, differing = {differing}"
    )
    assert differing == 0
    assert all(got.dtype == np.int64 for _, _, _, got in both.seen)
    # the masks did forbid moves, and the bundle heeds them: with every move allowed it acts otherwise
    assert not np.stack([mask for _, mask, _, _ in both.seen]).all()
    free = [both.bundle.act(obs, np.ones_like(mask)) for obs, mask, _, _ in both.seen]
    assert any((f != got).any() for f, (_, _, _, got) in zip(free, both.seen, strict=True))


# ----------------------------------------------------------------------------- held-out replays


def test_held_out_episodes_replayed_through_the_chemo_bundle_give_the_runs_kpis(chemo_run, chemo_bundle):
    # at export (the default: the first held-out episode), in the card
    card = json.loads((chemo_bundle / "model-card.json").read_text())
    replayed = card["held_out_replay"]
    assert replayed["equal"] and replayed["cases"] == [{"eval_seed": 100, "episode": 0}], replayed
    assert replayed["rule"] == "KPIs must agree within 1e-05 relative, 1e-08 absolute (continuous actions)"
    assert (
        f"- Held-out replay at export: {replayed['sentence']}" in (chemo_bundle / "model-card.md").read_text()
    )

    # every held-out episode, from the bundle folder: patient 102 failed in the run (no KPIs): passed over
    check = export.replay_bundle(chemo_bundle, episodes=None)
    assert check.cases == [(s, 0) for s in (100, 101, 103, 104, 105)] and check.failed_in_run == 1
    assert check.ok and check.continuous, check.mismatches
    assert {"tumour_burden", "normal_cells", "survival", "total_dose", "return"} <= set(check.metrics)
    worst = max(
        abs(b - r) / abs(r)
        for m in check.metrics
        for r, b in zip(check.run[m], check.bundle[m], strict=True)
        if r != 0
    )
    print(f"\nchemo PPO: 5 held-out episodes replayed, KPIs within {worst:.3g} (relative) of the run's")
    assert worst <= bundle_replay.RTOL


def test_replaying_a_multi_agent_masked_bundle_gives_the_runs_kpis_exactly(taxiway_run, tmp_path):
    run_dir = Path(shutil.copytree(taxiway_run, tmp_path / "run"))  # the module's run stays unevaluated
    evaluate(run_dir, show_progress=False)
    result = export.export_policy(run_dir, "MaskablePPO", out=tmp_path / "bundle", replay=None)
    replayed = result.card["held_out_replay"]
    assert replayed["episodes"] == 2 and replayed["equal"] and replayed["max_abs_difference"] == 0.0, replayed
    assert replayed["rule"] == "KPIs must be equal (discrete actions)"
    check = export.replay_bundle(result.folder, run_dir, episodes=None)
    assert check.ok and not check.continuous
    for name in check.metrics:  # equal, NaN where the run's is NaN (no aircraft finished: no taxi time)
        np.testing.assert_array_equal(check.bundle[name], check.run[name], err_msg=name)
    assert "decision_ms" not in check.metrics  # machine timings are not compared
    # the card is strict JSON: the run's NaN (no taxi time) is null, in the file and in the markdown
    text = (result.folder / "model-card.json").read_text()
    card = json.loads(text, parse_constant=lambda word: pytest.fail(f"{word} in model-card.json"))
    assert card == result.card
    taxi = next(k for k in card["held_out"]["kpis"] if k["name"] == "taxi_time_min")
    assert taxi["this_seed"] is None and taxi["policy"]["value"] is None, taxi
    assert "nan" not in (result.folder / "model-card.md").read_text().lower()


def test_an_export_whose_replay_differs_from_the_run_is_refused_writing_nothing(
    chemo_run, tmp_path, monkeypatch
):
    """A bundle of other weights (the model as training starts it) passes the action check against itself
    but not the replay against the run's results."""
    folder, scenario, _ = open_run(chemo_run)
    domain = get_domain(scenario.domain)
    params = domain.params_model.model_validate(scenario.policy_params("default", "PPO"))
    entry = scenario.policies.learned[0]
    untrained = export.untrained_policy(scenario, domain, params, entry, seed=7)
    data, contract, _ = export.build_bundle(domain, params, untrained, 0)
    check = bundle_replay.replay_held_out(
        runtime.Bundle(contract, data), folder, scenario, "default", "PPO", 0, episodes=2
    )
    assert not check.ok and check.mismatches[0]["eval_seed"] == 100, check.mismatches
    assert "differ from the run's evaluation" in check.sentence()

    real = export.build_bundle
    monkeypatch.setattr(export, "build_bundle", lambda d, p, policy, seed: real(d, p, untrained, seed))
    out = tmp_path / "bundle"
    with pytest.raises(
        FieldrlError, match=r"export check: Replayed 1 held-out episode .* differ .*nothing was written"
    ):
        export.export_policy(chemo_run, "PPO", out=out)
    assert not out.exists() and list(tmp_path.iterdir()) == []
    # asked for no replay, the same bundle is written, and its card says it was not replayed
    skipped = export.export_policy(chemo_run, "PPO", out=out, replay=0)
    assert skipped.card["held_out_replay"] == {"skipped": "not asked for: --replay 0"}


def test_a_replay_names_a_run_that_is_not_the_bundles_and_an_unevaluated_one(
    chemo_bundle, taxiway_run, tmp_path
):
    with pytest.raises(FieldrlError, match="not the run this bundle was exported from"):
        export.replay_bundle(chemo_bundle, taxiway_run)
    out = tmp_path / "bundle"
    result = runner.invoke(
        app, ["export", str(taxiway_run), "--policy", "MaskablePPO", "--replay", "3", "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    with pytest.raises(bundle_replay.NothingToReplay, match="the run was not evaluated"):
        export.replay_bundle(out)


# ----------------------------------------------------------------------------- every supported algorithm

CHEMO_PARAMS = {"preset": "s3", "max_t": 60}
UAV_MARL = {
    "n_uavs": 2,
    "n_vehicles": 8,
    "episode_slots": 6,
    "load": 2.0,
    "pipeline": False,
    "agent_ids": True,
}


def scrambled(
    domain_name: str,
    params_data: dict[str, Any],
    algorithm: str,
    hyper: dict[str, Any],
    policy: str = "MlpPolicy",
    scale: float = 3.0,
) -> Any:
    """An SB3Policy of ``algorithm`` on the domain with large random weights (``scale`` times their
    mean size) and random observation statistics: actions reach the bounds (clip, squash), every input
    feature matters and a recurrent policy's memory moves its actions a lot."""
    domain = get_domain(domain_name)
    params = domain.params_model.model_validate(params_data)
    entry = LearnedEntry(algorithm=algorithm, policy=policy, train_steps=100, n_envs=1, hyperparameters=hyper)
    venv = domain.make_train_vec_env(params, 1, 0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = build_model(entry.training_spec(), venv, seed=0)
    venv.close()
    noise = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in model.policy.parameters():
            p.add_(torch.randn(p.shape, generator=noise) * scale * p.abs().mean().clamp(min=0.05))
    shape = model.observation_space.shape
    rng = np.random.default_rng(0)
    norm = {
        "mean": rng.normal(0, 0.3, shape).tolist(),
        "var": rng.uniform(0.01, 2, shape).tolist(),
        "clip_obs": 5.0,
        "epsilon": 1e-8,
    }
    return domain, params, SB3Policy(algorithm, model, norm)


@pytest.mark.parametrize(
    ("domain_name", "params_data", "algorithm", "hyper", "kind"),
    [
        pytest.param("chemo", CHEMO_PARAMS, "a2c", {}, "continuous", id="chemo-a2c"),
        pytest.param("chemo", CHEMO_PARAMS, "sac", {}, "continuous", id="chemo-sac"),
        pytest.param("chemo", CHEMO_PARAMS, "td3", {}, "continuous", id="chemo-td3"),
        pytest.param("chemo", CHEMO_PARAMS, "ppo", {"use_sde": True}, "continuous", id="chemo-ppo-gsde"),
        pytest.param("taxiway", TAXIWAY_PARAMS, "dqn", {}, "discrete", id="taxiway-dqn"),
        pytest.param(
            "taxiway",
            TAXIWAY_PARAMS,
            "qr-dqn",
            {"buffer_size": 1000, "policy_kwargs": {"n_quantiles": 10}},
            "discrete",
            id="taxiway-qr-dqn",
        ),
        pytest.param("wealth", {}, "ppo", {}, "multi-discrete", id="wealth-ppo-multi-discrete"),
        pytest.param("uav", UAV_MARL, "independent-ppo", {}, "discrete", id="uav-independent-ppo"),
    ],
)
def test_each_supported_algorithm_exports_to_the_same_actions(
    domain_name, params_data, algorithm, hyper, kind
):
    from fieldrl.policies.algorithms import BY_NAME

    domain, params, policy = scrambled(domain_name, params_data, algorithm, hyper)
    # the graph written is the one the algorithm table names for the row
    assert export._graph_module()(policy.model.policy, None, False).kind == BY_NAME[algorithm].export
    _, contract, check = export.build_bundle(domain, params, policy, seed=3)
    assert contract["action"]["kind"] == kind and contract["mask"] is None
    print(f"\n{domain_name} {algorithm}: {check}")
    if kind == "continuous":
        assert check["max_abs_difference"] <= 1e-5
        low, high = contract["action"]["low"], contract["action"]["high"]
        assert contract["action"]["rule"].endswith("[low, high]") and low < high
    else:
        assert check["differing_actions"] == 0
    assert check["decisions"] >= 5


class _MaskedToy(gym.Env):
    """A tiny env with a multi-discrete action and masks: what no built-in single-agent domain has."""

    def __init__(self) -> None:
        self.observation_space = spaces.Box(-5.0, 5.0, shape=(4,), dtype=np.float32)
        self.action_space = spaces.MultiDiscrete([3, 4])

    def reset(self, *, seed: int | None = None, options: Any = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        return self.observation_space.sample(), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        return self.observation_space.sample(), 0.0, False, False, {}

    def action_masks(self) -> np.ndarray:
        return np.ones(7, dtype=bool)


def test_masked_multi_discrete_masks_each_dimension_as_sb3_contrib_does():
    from sb3_contrib import MaskablePPO
    from stable_baselines3.common.vec_env import DummyVecEnv

    model = MaskablePPO("MlpPolicy", DummyVecEnv([_MaskedToy]), seed=0, device="cpu", n_steps=8, batch_size=8)
    with torch.no_grad():
        model.policy.action_net.weight.mul_(200.0)  # confident logits: a mask must overrule them
    data, outputs, kind = export.onnx_bytes(model, None, mask_size=7)
    decisions = export.Decisions([], [], [], False, None, None, None)
    bundle = runtime.Bundle(export._contract(model, None, decisions, 7, outputs, kind), data)
    rng = np.random.default_rng(0)
    obs = rng.uniform(-5, 5, size=(300, 4)).astype(np.float32)
    masks = rng.random((300, 7)) < 0.5
    masks[:, 0] = masks[:, 3] = True  # at least one value of each dimension allowed
    want, _ = model.predict(obs, deterministic=True, action_masks=masks)
    got = bundle.act(obs, masks)
    np.testing.assert_array_equal(got, want)
    assert masks[np.arange(300)[:, None], np.c_[got[:, 0], 3 + got[:, 1]]].all()  # only allowed values
    unmasked, _ = model.predict(obs, deterministic=True)
    assert (unmasked != want).any()  # the masks changed decisions, so the test could see a wrong mask


# ----------------------------------------------------------------------------- refusals


def _chemo_with(entry: dict[str, Any]) -> dict[str, Any]:
    chemo = copy.deepcopy(TINY_SCENARIO)
    chemo["policies"]["learned"] = [chemo["policies"]["learned"][0] | entry]  # sized for the tiny budget
    return chemo


def _refused_entries() -> list[Any]:
    taxiway = copy.deepcopy(TINY_TAXIWAY)
    taxiway["policies"]["heuristics"].append({"use": "prioritized", "name": "prioritized planning"})
    taxiway["policies"]["learned"][0] |= {
        "name": "MaskablePPO + shield",
        "shield": {"heuristic": "prioritized planning"},
    }
    return [
        pytest.param(
            taxiway,
            "MaskablePPO + shield",
            ("taxiway runtime shield", "the bundle would not be the policy that was tested"),
            id="shield",
        ),
        pytest.param(
            _chemo_with({"name": "PPO residual", "residual": {"heuristic": "constant 0.5"}}),
            "PPO residual",
            ("residual policy", "constant 0.5"),
            id="residual",
        ),
    ]


@pytest.mark.parametrize(("data", "label", "pieces"), _refused_entries())
def test_policies_the_network_alone_is_not_are_refused_in_one_line_writing_nothing(
    data, label, pieces, tmp_path
):
    run = create_run(_write(tmp_path, data), out=tmp_path / "run").path  # refused before any model
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    out = tmp_path / "bundle"
    one_line_exit_2(["export", str(run), "--policy", label, "--out", str(out)], "refused", *pieces)
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before


def test_export_names_what_is_wrong_with_its_arguments(chemo_run, tmp_path):
    one_line_exit_2(["export", str(chemo_run), "--policy", "nope"], "learned policies of this run: PPO")
    one_line_exit_2(
        ["export", str(chemo_run), "--policy", "constant 0.5"], "only learned policies are exported"
    )
    one_line_exit_2(
        ["export", str(chemo_run), "--policy", "PPO", "--seed", "7"], "training seeds of this run: [0]"
    )
    one_line_exit_2(
        ["export", str(chemo_run), "--policy", "PPO", "--setting", "s9"], "PPO was trained in: default"
    )
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    one_line_exit_2(
        ["export", str(chemo_run), "--policy", "PPO", "--out", str(tmp_path / "full")], "not empty"
    )
    assert [p.name for p in tmp_path.iterdir()] == ["full"]


# ----------------------------------------------------------------------------- the bundle's files


def test_bundle_holds_its_files_a_manifest_and_a_card_from_the_run(chemo_run, chemo_bundle, tmp_path):
    import onnx

    files = sorted(p.name for p in chemo_bundle.iterdir())
    assert files == ["bundle.json", "manifest.json", "model-card.json", "model-card.md", "policy.onnx"]
    manifest = json.loads((chemo_bundle / "manifest.json").read_text())
    assert sorted(manifest["files"]) == [f for f in files if f != "manifest.json"]
    for name, digest in manifest["files"].items():
        assert runtime.sha256_hex((chemo_bundle / name).read_bytes()) == digest
    graph = onnx.load(str(chemo_bundle / "policy.onnx"))
    onnx.checker.check_model(graph)
    assert [i.name for i in graph.graph.input] == ["obs"] and [o.name for o in graph.graph.output] == [
        "action"
    ]
    contract = json.loads((chemo_bundle / "bundle.json").read_text())
    assert contract["observation"]["shape"] == [3] and contract["action"]["kind"] == "continuous"
    assert contract["observation"]["normalization"] == "folded into the graph"

    card = json.loads((chemo_bundle / "model-card.json").read_text())
    record = read_record(chemo_run / "models/default/PPO/seed-0/policy.safetensors")
    assert card["training"] == record and record["num_timesteps"] == 256
    assert card["scenario"]["name"] == "tiny" and card["scenario"]["domain"] == "chemo"
    assert card["policy"]["algorithm"] == "ppo" and card["policy"]["train_seed"] == 0
    summary = json.loads((chemo_run / "summary.json").read_text())["variants"]["default"]
    held = card["held_out"]
    assert held["best_standard_policy"] == summary["best_heuristic"]
    kpi = next(k for k in held["kpis"] if k["name"] == "return")
    assert kpi["policy"] == summary["policies"]["PPO"]["return"]["mean"]
    assert kpi["best_standard"] == summary["policies"][summary["best_heuristic"]]["return"]["mean"]
    text = (chemo_bundle / "model-card.md").read_text()
    for words in ("256 environment steps", "Held-out results", summary["best_heuristic"], "does not promise"):
        assert words in text, words

    again = tmp_path / "again"
    export.export_policy(chemo_run, "PPO", out=again)
    assert (again / "manifest.json").read_bytes() == (
        chemo_bundle / "manifest.json"
    ).read_bytes()  # reproducible


def test_the_card_gives_the_stress_range_the_failures_and_the_intended_use_of_this_policy(
    chemo_run, chemo_bundle
):
    from fieldrl.evaluation.store import RunFolder
    from fieldrl.evaluation.stress import read_stress_summary
    from fieldrl.reports.stress import axis_sentence, point_verdicts

    card = json.loads((chemo_bundle / "model-card.json").read_text())
    text = (chemo_bundle / "model-card.md").read_text()
    stress = read_stress_summary(RunFolder(chemo_run))
    assert stress is not None
    setting = stress.axes["obs_noise"].variants["default"]
    assert setting.best_learned == "PPO"  # the only learned policy: the summary compared it, so can we
    operating = card["operating_range"]
    assert operating["primary_kpi"] == stress.primary_kpi == "return"
    [axis] = operating["axes"]
    assert axis["axis"] == "obs_noise" and axis["tested"] == STRESS_POINTS
    assert axis["trained"] == setting.trained == 0.2
    assert [p["trained"] for p in axis["points"]] == [False, True, False]
    assert axis["best_standard_policy"] == setting.best_heuristic
    # recomputed from stress/results.parquet for this policy, as the summary computes it for the best
    for mine, summary_point in zip(axis["points"], setting.points, strict=True):
        compared = summary_point.compared("return")
        policy, best = (summary_point.described(p, "return") for p in ("PPO", setting.best_heuristic or ""))
        assert compared is not None and policy is not None and best is not None
        assert mine["difference"] == compared.difference.as_dict()
        assert mine["policy"] == policy.mean.as_dict()
        assert mine["best_standard"] == best.mean.as_dict()
        assert mine["cases"] == 6  # as the summary counts them: the failed one is in "failed_episodes"
    verdicts = point_verdicts(stress, "obs_noise", "default")  # the report's judgement
    assert [p["verdict"] for p in axis["points"]] == verdicts
    assert axis["sentence"] == axis_sentence(stress, "obs_noise", "default") and axis["sentence"] in text
    print(f"\nstress verdicts of PPO against {setting.best_heuristic}: {verdicts}")

    failures = card["known_failures"]
    [held] = failures["held_out"]
    assert (held["eval_seed"], held["train_seed"], held["episode"]) == (CRASHING_CASE, 0, 0)
    assert "simulator died" in held["reason"]
    assert [(f["point"], f["eval_seed"]) for f in failures["stress"]] == [
        (p, CRASHING_CASE) for p in STRESS_POINTS
    ]
    assert [p["failed_episodes"] for p in axis["points"]] == [1, 1, 1]
    behind = [p["value"] for p in axis["points"] if p["verdict"] == "behind"]
    assert [(loss["axis"], loss["value"]) for loss in failures["stress_losses"]] == [
        ("obs_noise", v) for v in behind
    ]

    # the words say what the numbers say
    for p in axis["points"]:
        value = format(p["value"], axis["format"]) + (" (trained)" if p["trained"] else "")
        row = f"| {value} | {export._interval(p['policy'])} | {export._interval(p['best_standard'])} | "
        assert row in text and f"| {p['verdict']} | 1 |" in text, row
    assert f"Held-out case {CRASHING_CASE} (episode 0, this bundle's seed) failed: " in text
    assert f"At Observation noise = 0.8 (stress map): held-out case {CRASHING_CASE}" in text
    for v in behind:
        assert f"- Behind {setting.best_heuristic} at Observation noise = {v:g}" in text
    if not behind:
        assert "- Stress points: at none of them is PPO behind the best standard policy." in text
    use = card["intended_use"]
    assert "shadow mode first" in use and "simulated: 6 held-out cases of the chemo simulator" in use
    assert "the stress points below" in use and "## Intended use" in text and use in text


def test_a_run_not_yet_evaluated_exports_with_no_results_in_its_card(taxiway_bundle):
    card = json.loads((taxiway_bundle / "model-card.json").read_text())
    assert card["held_out"] is None and card["operating_range"] is None
    assert card["known_failures"] is None
    text = (taxiway_bundle / "model-card.md").read_text()
    assert "The run was not evaluated when this bundle was exported" in text
    assert "No stress map was run for this run" in text and "no stress map was run" in card["intended_use"]
    assert "Not known: the run was not evaluated when this bundle was exported." in text
    assert card["held_out_replay"] == {"skipped": "the run was not evaluated when this bundle was exported"}
    assert "- Held-out replay through the bundle: none (the run was not evaluated when this bundle" in text
    contract = json.loads((taxiway_bundle / "bundle.json").read_text())
    assert contract["observation"]["per_agent"] and contract["mask"]["size"] == contract["action"]["n"] == 5
    assert contract["action"]["words"][0] == "hold"


# ----------------------------------------------------------------------------- the runtime refuses


@pytest.mark.parametrize("damage", ["byte", "missing", "unlisted"])
def test_a_tampered_or_incomplete_bundle_is_one_clear_error(chemo_bundle, tmp_path, damage):
    bundle = Path(shutil.copytree(chemo_bundle, tmp_path / "bundle"))
    if damage == "byte":
        data = bytearray((bundle / "policy.onnx").read_bytes())
        data[len(data) // 2] ^= 0x01
        (bundle / "policy.onnx").write_bytes(bytes(data))
        words = "policy.onnx: changed since it was exported"
    elif damage == "missing":
        (bundle / "bundle.json").unlink()
        words = "bundle.json (listed in the manifest) is missing"
    else:
        manifest = json.loads((bundle / "manifest.json").read_text())
        del manifest["files"]["bundle.json"]
        (bundle / "manifest.json").write_text(json.dumps(manifest))
        words = "does not list bundle.json"
    with pytest.raises(runtime.BundleError, match=words.replace("(", r"\(").replace(")", r"\)")):
        runtime.Bundle.load(bundle)
    one_line_exit_2(["act", str(bundle)], words)


def test_observations_and_masks_are_checked_before_the_network(chemo_bundle, taxiway_bundle):
    chemo = runtime.Bundle.load(chemo_bundle)
    assert chemo.act([0.3, 0.4, 0.2]).shape == (1,)
    assert chemo.act(np.zeros((5, 3))).shape == (5, 1)
    cases = [
        ([0.3, float("nan"), 0.2], None, "observation: NaN at index [1]; expected finite numbers"),
        ([[0.3, 0.4, 0.2], [0, 0, float("inf")]], None, "observation: infinity at index [1, 2]"),
        (
            [0.3, 0.4],
            None,
            "observation: shape (2,); expected (3,) for one decision, or (batch, 3) for several",
        ),
        (["a", "b", "c"], None, "observation: holds text; expected numbers"),
        ([[0.3], [0.4, 0.2]], None, "observation: rows of different lengths"),
        ([0.3, 0.4, 0.2], [1, 1], "mask: this policy takes no action mask"),
    ]
    for obs, mask, words in cases:
        with pytest.raises(
            runtime.BundleError, match=words.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")
        ):
            chemo.act(obs, mask)
    taxi = runtime.Bundle.load(taxiway_bundle)
    obs = np.zeros((3, 51))
    assert taxi.act(obs, np.ones((3, 5), dtype=bool)).shape == (3,)
    for mask, words in [
        (None, "mask: missing; this policy was trained and tested with action masks"),
        (np.ones((3, 4)), r"mask: shape \(3, 4\); expected \(3, 5\)"),
        (np.full((3, 5), 2), "mask: expected true/false"),
    ]:
        with pytest.raises(runtime.BundleError, match=words):
            taxi.act(obs, mask)
    with pytest.raises(
        runtime.BundleError, match=r"expected \(agents, 51\) for one decision \(a row per agent\)"
    ):
        taxi.act(np.zeros(51), np.ones(5))


# ----------------------------------------------------------------------------- shadow mode


def test_fieldrl_act_answers_json_lines_in_shadow_mode(chemo_bundle, taxiway_bundle):
    chemo = runtime.Bundle.load(chemo_bundle)
    observations = np.random.default_rng(0).uniform(0, 1, size=(4, 3)).round(4).tolist()
    lines = [
        json.dumps({"obs": observations[0]}),
        "",
        json.dumps(observations[1]),
        *map(json.dumps, observations[2:]),
    ]
    result = runner.invoke(app, ["act", str(chemo_bundle)], input="\n".join(lines) + "\n")
    assert result.exit_code == 0, result.output
    answers = [json.loads(line)["action"] for line in result.stdout.splitlines()]
    assert answers == [chemo.act(obs).tolist() for obs in observations]  # one answer per non-blank line

    taxi_line = json.dumps({"obs": np.zeros((2, 51)).tolist(), "mask": [[1, 1, 0, 0, 0], [1, 0, 0, 0, 1]]})
    result = runner.invoke(app, ["act", str(taxiway_bundle)], input=taxi_line + "\n")
    assert result.exit_code == 0, result.output
    action = json.loads(result.stdout)["action"]
    assert len(action) == 2 and action[0] in (0, 1) and action[1] in (0, 4)


@pytest.mark.parametrize(
    ("bad", "words"),
    [
        ("[0.1, NaN, 0.2]", "input line 3: observation: NaN at index [1]"),
        ("[0.1, 0.2]", "input line 3: observation: shape (2,); expected (3,)"),
        ("{not json", "input line 3: not JSON"),
        (
            '{"observation": [1, 2, 3]}',
            'input line 3: expected {"obs": [...], "mask": [...], "episode_start": true}',
        ),
        (
            '{"obs": [0.1, 0.2, 0.3], "episode_start": "yes"}',
            "input line 3: episode_start: expected true/false",
        ),
    ],
)
def test_a_bad_input_line_is_one_line_naming_it_and_exit_2(chemo_bundle, bad, words):
    text = "[0.1, 0.2, 0.3]\n[0.3, 0.2, 0.1]\n" + bad + "\n[0.1, 0.1, 0.1]\n"
    result = runner.invoke(app, ["act", str(chemo_bundle)], input=text)
    assert result.exit_code == 2
    assert len(result.stdout.splitlines()) == 2  # the lines before it were answered, none after
    error = result.stderr.strip()
    assert error.startswith("error:") and "\n" not in error and words in error, error


# ----------------------------------------------------------------------------- no torch at run time


#: what a machine running a bundle need not have: the RL stack, the simulators, fieldrl's own heavy parts
HEAVY = ("torch", "stable_baselines3", "sb3_contrib", "pettingzoo", "flatland", "libsumo", "cvxpy", "pandas")
HEAVY_FIELDRL = ("fieldrl.simulators", "fieldrl.domains", "fieldrl.policies", "fieldrl.api", "fieldrl.export")


def test_the_runtime_imports_no_torch_sb3_or_simulator(chemo_bundle):
    code = textwrap.dedent(
        f"""
        import json, sys
        from fieldrl.runtime import Bundle
        action = Bundle.load(sys.argv[1]).act([0.3, 0.4, 0.2])
        heavy = [m for m in sys.modules if m.split(".")[0] in {HEAVY!r} or m.startswith({HEAVY_FIELDRL!r})]
        print(json.dumps({{"heavy": heavy, "action": action.tolist()}}))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(chemo_bundle)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["heavy"] == []
    assert answer["action"] == runtime.Bundle.load(chemo_bundle).act([0.3, 0.4, 0.2]).tolist()


def test_the_runtime_file_runs_on_its_own_copied_beside_a_bundle(chemo_bundle, tmp_path):
    """runtime.py imports nothing of fieldrl: a copy of the file and the bundle are all a machine needs."""
    (tmp_path / "copied").mkdir()
    shutil.copy(runtime.__file__, tmp_path / "copied" / "runtime.py")
    code = textwrap.dedent(
        """
        import sys
        sys.argv = ["runtime.py", sys.argv[1]]
        import runtime  # the copy in the working folder
        assert runtime.__file__.endswith("copied/runtime.py"), runtime.__file__
        status = runtime.main()
        loaded = [m for m in sys.modules if m.split(".")[0] in ("fieldrl", "torch", "gymnasium", "pandas")]
        sys.stderr.write(repr(loaded))
        sys.exit(status)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(chemo_bundle)],
        input="[0.3, 0.4, 0.2]\n",
        capture_output=True,
        text=True,
        cwd=tmp_path / "copied",
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == "[]"
    assert (
        json.loads(done.stdout)["action"] == runtime.Bundle.load(chemo_bundle).act([0.3, 0.4, 0.2]).tolist()
    )
