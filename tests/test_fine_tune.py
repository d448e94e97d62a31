"""Fine-tuning that keeps a warm start (issue 41): critic warm-up, actor ramp, a fading pull."""

from __future__ import annotations

import copy
import csv
import io
import json

import gymnasium as gym
import numpy as np
import pandas as pd
import pytest
import torch
import yaml
from stable_baselines3 import PPO, SAC
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.logger import Logger

import fieldrl
from fieldrl.errors import FieldrlError
from fieldrl.policies import fine_tune
from fieldrl.policies.spec import FineTuneSchedule
from fieldrl.policies.weights import read_record
from fieldrl.reports.pdf import moved_past_start
from fieldrl.scenario import load_scenario


def _quiet(model):
    model.set_logger(Logger(folder=None, output_formats=[]))
    return model


def _ppo(seed: int = 0, **kwargs):
    torch.manual_seed(seed)
    settings = {"n_steps": 64, "batch_size": 64, "n_epochs": 2, **kwargs}
    return _quiet(PPO("MlpPolicy", gym.make("CartPole-v1"), seed=seed, device="cpu", **settings))


def _split(model):
    actor, _ = fine_tune.actor_parameters(model)
    ids = {id(p) for p in actor}
    critic = [p for p in model.policy.parameters() if id(p) not in ids]
    return [p.detach().clone() for p in actor], [p.detach().clone() for p in critic]


def _same(a, b) -> bool:
    return all(torch.equal(x, y) for x, y in zip(a, b, strict=True))


def test_the_schedules():
    assert [fine_tune.actor_scale(s, 100, 200) for s in (0, 99, 100, 200, 300, 1000)] == [
        0.0,
        0.0,
        0.0,
        0.5,
        1.0,
        1.0,
    ]
    assert fine_tune.actor_scale(5, 0, 0) == 1.0 and fine_tune.actor_scale(50, 100, 0) == 0.0
    assert [fine_tune.pull_weight(s, 2.0, 100) for s in (0, 25, 100, 500)] == [2.0, 1.5, 0.0, 0.0]


def test_the_warm_up_fits_the_critic_before_any_actor_update():
    model = _ppo()
    actor0, critic0 = _split(model)
    log = fine_tune.FineTuneLog()
    undo = fine_tune.install(model, FineTuneSchedule(warmup=256, ramp=256), None, log)
    model.learn(256)
    actor1, critic1 = _split(model)
    assert _same(actor0, actor1), "the actor moved in the critic's warm-up"
    assert not _same(critic0, critic1), "the critic did not learn in its warm-up"
    model.learn(512, reset_num_timesteps=False)
    actor2, _ = _split(model)
    assert not _same(actor1, actor2), "the actor never moved after the warm-up"
    undo()
    # one row per update, the actor's scale as scheduled: 0, 0, 0, 0 (warm-up), then rising to 1
    steps = [row[0] for row in log.rows]
    assert steps == list(range(64, 769, 64))
    assert [row[1] for row in log.rows] == [fine_tune.actor_scale(s, 256, 256) for s in steps]
    assert "train" not in vars(model)  # undone: the class's own method again


def test_the_ramp_scales_the_actors_step():
    """Half-way up the ramp the actor moves exactly half as far as Adam would move it."""
    full, half = _ppo(seed=3, n_epochs=1), _ppo(seed=3, n_epochs=1)  # one optimiser step each
    fine_tune.install(half, FineTuneSchedule(warmup=0, ramp=128), None, fine_tune.FineTuneLog())
    actor_full0, _ = _split(full)
    torch.manual_seed(11)
    full.learn(64)
    torch.manual_seed(11)  # the same actions sampled: the same rollout, the same gradients
    half.learn(64)  # trained at step 64: scale 0.5
    actor_full1, _ = _split(full)
    actor_half1, _ = _split(half)
    for before, after_full, after_half in zip(actor_full0, actor_full1, actor_half1, strict=True):
        torch.testing.assert_close(after_half - before, 0.5 * (after_full - before), atol=2e-6, rtol=1e-4)


def test_off_policy_warm_up_trains_the_critic_only():
    torch.manual_seed(0)
    model = _quiet(
        SAC("MlpPolicy", gym.make("Pendulum-v1"), learning_starts=50, batch_size=32, seed=0, device="cpu")
    )
    actor0 = [p.detach().clone() for p in model.actor.parameters()]
    critic0 = [p.detach().clone() for p in model.critic.parameters()]
    fine_tune.install(model, FineTuneSchedule(warmup=200, ramp=0), None, fine_tune.FineTuneLog())
    model.learn(150)
    assert _same(actor0, [p.detach() for p in model.actor.parameters()])
    assert not _same(critic0, [p.detach() for p in model.critic.parameters()])
    model.learn(120, reset_num_timesteps=False)
    assert not _same(actor0, [p.detach() for p in model.actor.parameters()])


def test_the_pull_follows_its_schedule_and_draws_the_actor_to_the_clone():
    teacher_model = _ppo(seed=7)
    teacher = fine_tune.frozen_copy(teacher_model.policy)
    model = _ppo(seed=1, learning_rate=1e-5, batch_size=16)  # PPO barely moves: the pull does
    log = fine_tune.FineTuneLog()
    fine_tune.install(model, FineTuneSchedule(pull_weight=100.0, pull_fade=1024), teacher, log)
    env, states = gym.make("CartPole-v1"), []  # states like those the rollouts visit
    obs, _ = env.reset(seed=5)
    env.action_space.seed(5)
    for _ in range(256):
        states.append(obs)
        obs, _, end, cut, _ = env.step(int(env.action_space.sample()))
        if end or cut:
            obs, _ = env.reset()
    probe = torch.as_tensor(np.array(states), dtype=torch.float32)

    def cross_entropy(student) -> float:  # of the clone's actions under the student, on those states
        with torch.no_grad():
            wanted = teacher.get_distribution(probe).mode()
            return float(-student.get_distribution(probe).log_prob(wanted).mean())

    before = cross_entropy(model.policy)
    torch.manual_seed(0)
    model.learn(1280)
    steps = [row[0] for row in log.rows]
    assert [row[2] for row in log.rows] == [fine_tune.pull_weight(s, 100.0, 1024) for s in steps]
    pulled = [row[3] for row in log.rows if row[2] > 0]
    faded = [row[3] for row in log.rows if row[2] == 0]
    assert pulled and all(np.isfinite(pulled)) and faded and all(np.isnan(faded))
    assert pulled[-1] < pulled[0]  # the cross-entropy to the clone's action falls
    # on states like the rollouts', the student now gives the clone's actions more weight; without the
    # pull (the same PPO, the same seed) it does not
    unpulled = _ppo(seed=1, learning_rate=1e-5, batch_size=16)
    torch.manual_seed(0)
    unpulled.learn(1280)
    pulled_ce, unpulled_ce = cross_entropy(model.policy), cross_entropy(unpulled.policy)
    assert pulled_ce < 0.85 * before and unpulled_ce > 0.97 * before, (before, pulled_ce, unpulled_ce)
    # the teacher never moves
    assert all(not p.requires_grad for p in teacher.parameters())


def test_the_jump_starts_horizon_falls_only_when_validation_reaches_the_clones_score():
    model = _ppo()
    jump = fine_tune.JumpStart(
        model, fine_tune.frozen_copy(model.policy), FineTuneSchedule(guide_horizon=20, guide_stages=4), True
    )
    seen = []
    for value in (10.0, 9.0, 10.0, 9.9, 12.0, float("nan"), 11.0, 30.0, 40.0):  # the first: the clone's
        jump.on_validation(value)
        seen.append(jump.horizon)
    assert seen == [20, 20, 15, 15, 10, 10, 5, 0, 0]
    lower = fine_tune.JumpStart(
        _ppo(),
        fine_tune.frozen_copy(model.policy),
        FineTuneSchedule(guide_horizon=10, guide_stages=2),
        False,
    )
    for value in (5.0, 6.0, 4.0):  # lower is better: 6 does not reach 5, 4 does
        lower.on_validation(value)
    assert lower.horizon == 5
    resumed = fine_tune.JumpStart(
        _ppo(), jump.teacher, FineTuneSchedule(guide_horizon=20, guide_stages=4), True, [10.0, 9.0, 10.0]
    )
    assert resumed.horizon == 15  # a resumed training replays its validations


def test_the_clone_drives_the_first_decisions_of_every_episode():
    teacher_model = _ppo(seed=7)
    with torch.no_grad():  # a decisive clone: its actions are not the learner's by chance
        teacher_model.policy.action_net.weight.mul_(200.0)
    teacher = fine_tune.frozen_copy(teacher_model.policy)
    model = _ppo(seed=1)
    horizon = 4  # a decisive clone ends CartPole episodes within about ten steps
    fine_tune.install(
        model,
        FineTuneSchedule(guide_horizon=horizon, guide_stages=2),
        teacher,
        fine_tune.FineTuneLog(),
        _Never(),
    )
    seen = {}

    class Keep(BaseCallback):
        def _on_rollout_end(self) -> None:
            buffer = self.model.rollout_buffer
            obs = torch.as_tensor(buffer.observations[:, 0])
            actions = torch.as_tensor(buffer.actions[:, 0, 0]).long()
            with torch.no_grad():  # the learner as it was in the rollout (it updates after this)
                _, own, _ = self.model.policy.evaluate_actions(obs, actions)
            seen.update(
                obs=buffer.observations[:, 0].copy(),
                actions=buffer.actions[:, 0, 0].astype(int),
                starts=buffer.episode_starts[:, 0].astype(bool),
                stored=buffer.log_probs[:, 0].copy(),
                own=own.numpy(),
            )

        def _on_step(self) -> bool:
            return True

    model.learn(64, callback=Keep())
    steps, count = [], 0
    for start in seen["starts"]:
        count = 0 if start else count + 1
        steps.append(count)
    guided = np.array(steps) < horizon
    assert guided.any() and (~guided).any()
    obs = torch.as_tensor(seen["obs"])
    with torch.no_grad():
        clone = teacher.get_distribution(obs).mode().numpy()
    assert np.array_equal(seen["actions"][guided], clone[guided])
    assert (seen["actions"][~guided] != clone[~guided]).any()  # the learner's own samples after
    # what PPO stores is the learner's own probability of what was done, guided or not
    np.testing.assert_allclose(seen["stored"], seen["own"], atol=1e-5)


class _Never:
    """A validation selector that never scores (its listeners and rows, as the jump-start reads them)."""

    def __init__(self):
        from types import SimpleNamespace

        self.state = SimpleNamespace(rows=[])
        self.validation = SimpleNamespace(higher_is_better=True)
        self.listeners = []


def test_moved_past_the_start_is_the_first_better_validation_checkpoint():
    rows = [(0, 0.0, 10.0), (100, 1.5, 9.0), (200, 3.0, 10.5), (300, 4.5, 1.0)]
    assert moved_past_start(rows, higher_is_better=True) == (200, 3.0)
    assert moved_past_start(rows, higher_is_better=False) == (100, 1.5)
    assert moved_past_start(rows[:2], higher_is_better=True) is None
    assert moved_past_start([], higher_is_better=True) is None


def _fine_tuned(scenario_data, **fine):
    data = copy.deepcopy(scenario_data)
    entry = data["policies"]["learned"][0]
    entry["imitate"] = {"heuristic": "constant 0.5", "episodes": 2, "epochs": 2}
    entry["fine_tune"] = fine
    entry["validate_every"] = 128
    data["seeds"]["validation"] = [50, 51]
    return data


def test_a_fine_tuned_entry_trains_and_says_when_it_moved_past_its_clone(scenario_data, tmp_path):
    pull, jump = {"weight": 1.0, "fade": 0.75}, {"horizon": 10, "stages": 2}
    data = _fine_tuned(scenario_data, critic_warmup=0.125, actor_ramp=0.25, pull=pull, jump_start=jump)
    data["policies"]["learned"][0]["train_steps"] = 1024  # 4 updates of 4 envs x 64 steps
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(data))
    run = fieldrl.train(tmp_path / "s.yaml", out=tmp_path / "run", show_progress=False)
    seed_dir = run / "models/default/PPO/seed-0"
    record = read_record(seed_dir / "policy.safetensors")
    schedule = {
        "critic_warmup": 128,
        "actor_ramp": 256,
        "pull_weight": 1.0,
        "pull_fade": 768,
        "guide_horizon": 10,
        "guide_stages": 2,
    }
    rows = list(csv.DictReader(io.StringIO((seed_dir / "fine_tune.csv").read_text())))
    pull_steps = [int(r["pull_steps"]) for r in rows]  # the pull's optimiser steps, while it pulls
    assert pull_steps[0] > 0 and pull_steps[2:] == [0, 0]
    assert record["fine_tune"] == {**schedule, "pull_updates": sum(pull_steps)}
    assert [int(r["timesteps"]) for r in rows] == [256, 512, 768, 1024]
    assert [float(r["actor_scale"]) for r in rows] == [0.5, 1.0, 1.0, 1.0]
    assert [float(r["pull_weight"]) for r in rows] == pytest.approx([2 / 3, 1 / 3, 0.0, 0.0], abs=1e-5)
    losses = [float(r["pull_loss"]) for r in rows]
    assert np.isfinite(losses[:2]).all() and np.isnan(losses[2:]).all()
    # the clone drove the first ten decisions of the 4 envs' episodes in the first rollout at least
    assert int(rows[0]["guided_steps"]) >= 4 * 10
    horizons = [int(r["guide_horizon"]) for r in rows]
    assert set(horizons) <= {10, 5, 0} and horizons == sorted(horizons, reverse=True)
    # the report says how it was fine-tuned, and whether and when it moved past its clone
    from pypdf import PdfReader

    from fieldrl import api

    api.evaluate(run, show_progress=False)
    report = api.report(run)
    text = " ".join(" ".join((p.extract_text() or "") for p in PdfReader(report).pages).split())
    assert "the critic alone learned for the first 128 steps" in text
    assert "the clone drove the first 10 decisions of each training episode" in text
    curve = pd.read_csv(seed_dir / "validation_curve.csv")
    moved = moved_past_start(list(zip(curve.timesteps, curve.cpu_seconds, curve.value, strict=True)), True)
    said = "never moved past its clone" if moved is None else f"first moved past its clone at {moved[0]:,}"
    assert said in text


@pytest.mark.parametrize(
    ("fine", "imitate", "algorithm", "field", "words"),
    [
        ({"critic_warmup": 0.1}, False, "ppo", "fine_tune", "keeps a warm start"),
        ({"pull": {"fade": 0.5}}, True, "sac", "fine_tune.pull", "on-policy"),
        ({"critic_warmup": 0.5, "actor_ramp": 0.6}, True, "ppo", "critic_warmup", "sum < 1"),
        ({"critic_warmup": 0.7}, True, "ppo", "critic_warmup", "0.5"),
    ],
)
def test_bad_fine_tuning_is_one_clear_line(scenario_data, tmp_path, fine, imitate, algorithm, field, words):
    data = _fine_tuned(scenario_data, **fine)
    entry = data["policies"]["learned"][0]
    entry["algorithm"] = algorithm
    if algorithm == "sac":
        entry["hyperparameters"] = {}
    if not imitate:
        del entry["imitate"]
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(data))
    with pytest.raises(FieldrlError) as caught:
        load_scenario(tmp_path / "s.yaml")
    text = str(caught.value)
    assert field in text and words in text and "\n" not in text.strip()


def test_a_jump_start_without_validation_seeds_is_one_clear_line(scenario_data, tmp_path):
    data = _fine_tuned(scenario_data, jump_start={"horizon": 10})
    del data["seeds"]["validation"]
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(data))
    with pytest.raises(FieldrlError) as caught:
        load_scenario(tmp_path / "s.yaml")
    text = str(caught.value)
    assert "fine_tune.jump_start" in text and "seeds.validation" in text and "\n" not in text.strip()


def test_a_study_tunes_how_a_warm_start_is_fine_tuned_in_the_same_trials(scenario_data, tmp_path):
    """The fine-tuning options join the hyperparameters in one equal-trial study; the tuned file
    carries the winner's choice, and a scenario using it runs with that choice."""
    from fieldrl.evaluation import tuning
    from fieldrl.policies.search_spaces import to_fine_tune

    data = _fine_tuned(scenario_data, jump_start={"horizon": 5, "stages": 2})
    data["policies"]["learned"][0]["train_steps"] = 512
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(data))
    result = tuning.tune(tmp_path / "s.yaml", trials=4, out=tmp_path / "t", show_progress=False)
    study = result.studies["PPO"]
    assert study["trials"] == 4
    space = study["search_space"]
    assert {"fine_tune.critic_warmup", "fine_tune.pull_weight", "fine_tune.jump_start"} <= set(space)
    frame = tuning.trials_frame(tmp_path / "t").sort_values("number")
    rows = frame.to_dict("records")
    assert rows[0]["handset"]  # the scenario's own fine-tuning (its jump-start alone) runs first
    assert json.loads(rows[0]["fine_tune"]) == {"jump_start": {"horizon": 5, "stages": 2}}
    for row in rows[1:]:  # each later trial runs what the sampler drew
        drew = json.loads(row["params"])
        assert json.loads(row["fine_tune"]) == to_fine_tune(drew, {"jump_start": {"horizon": 5, "stages": 2}})
    tuned = yaml.safe_load((tmp_path / "t" / study["file"]).read_text())
    assert "fine_tune" in tuned  # {} where the winner fine-tunes nothing
    data["policies"]["learned"][0]["tuned"] = str(tmp_path / "t" / study["file"])
    (tmp_path / "uses.yaml").write_text(yaml.safe_dump(data))
    entry = load_scenario(tmp_path / "uses.yaml").policies.learned[0]
    assert entry.fine_tune is not None
    assert entry.fine_tune.model_dump(exclude_defaults=True) == tuned["fine_tune"]


def test_an_interrupted_fine_tuning_resumes_from_its_checkpoint_and_continues_its_schedules(
    scenario_data, tmp_path, monkeypatch
):
    from fieldrl import api
    from fieldrl.policies import checkpoint

    pull, jump = {"weight": 1.0, "fade": 1.0}, {"horizon": 10, "stages": 2}
    data = _fine_tuned(scenario_data, critic_warmup=0.125, actor_ramp=0.25, pull=pull, jump_start=jump)
    entry = data["policies"]["learned"][0]
    entry["train_steps"], entry["checkpoint_every"] = 1024, 256
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(data))
    saves, real_save = [], checkpoint.save_checkpoint

    def interrupt_after_second(folder, *args, **kwargs):
        real_save(folder, *args, **kwargs)
        saves.append(folder)
        if len(saves) == 2:
            raise KeyboardInterrupt

    monkeypatch.setattr(checkpoint, "save_checkpoint", interrupt_after_second)
    folder = api.create_run(tmp_path / "s.yaml", tmp_path / "run")
    with pytest.raises(KeyboardInterrupt):
        api.resume(folder.path, show_progress=False)
    kept = list((folder.path / "checkpoints").rglob("clone.safetensors"))
    assert len(kept) == 1  # the clone as cloned, for the resumed pull and jump-start
    monkeypatch.setattr(checkpoint, "save_checkpoint", real_save)
    api.resume(folder.path, show_progress=False)
    rows = list(
        csv.DictReader(io.StringIO((folder.path / "models/default/PPO/seed-0/fine_tune.csv").read_text()))
    )
    # one row per update across the interruption, the schedules where they would have been
    assert [int(r["timesteps"]) for r in rows] == [256, 512, 768, 1024]
    assert [float(r["actor_scale"]) for r in rows] == [0.5, 1.0, 1.0, 1.0]
    assert [float(r["pull_weight"]) for r in rows] == pytest.approx([0.75, 0.5, 0.25, 0.0], abs=1e-5)
    # the pull's own optimiser steps are counted beside the learner's updates, across the interruption
    pulled = sum(int(r["pull_steps"]) for r in rows)
    record = read_record(folder.path / "models/default/PPO/seed-0/policy.safetensors")
    assert pulled > 0 and record["fine_tune"]["pull_updates"] == pulled
    # and the resumed training is the uninterrupted one, the pull with the Adam moments it had (kept in
    # the checkpoint): every logged loss the same (the kept weights are validation's choice, which may
    # be from before the interruption, so the log is the stronger witness)
    once = api.run(tmp_path / "s.yaml", tmp_path / "once", show_progress=False).run_dir
    log = "models/default/PPO/seed-0/fine_tune.csv"
    assert (folder.path / log).read_text() == (once / log).read_text()
