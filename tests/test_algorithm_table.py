"""The algorithm table: each row agrees with its class, every list is derived from it, and what a
constructor accepts is read from source without importing torch."""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from fieldrl.policies import algorithms, signatures
from fieldrl.policies.algorithms import TABLE, Algorithm


def test_each_row_agrees_with_its_class():
    from sb3_contrib import RecurrentPPO
    from stable_baselines3.common.on_policy_algorithm import OnPolicyAlgorithm

    from fieldrl.policies.registry import algorithm_class

    for row in TABLE:
        cls = algorithm_class(row.name)
        assert cls.__name__ == row.class_name, row
        assert row.policy == ("on" if issubclass(cls, OnPolicyAlgorithm) else "off"), row
        recurrent = issubclass(cls, RecurrentPPO) or bool(getattr(cls, "is_recurrent", False))
        assert row.recurrent == recurrent, row
        assert row.masked == ("action_masks" in inspect.signature(cls.predict).parameters), row
        assert row.search_space in algorithms.SEARCH_SPACES, row
        # the search space is one for the row's kind of learner (on-policy spaces sample n_steps)
        from fieldrl.policies.search_spaces import search_space

        assert ("n_steps" in search_space(row.name, 4)) == (row.policy == "on"), row


def test_the_lists_are_derived_from_the_table_in_its_order():
    from fieldrl import estimates, terminal
    from fieldrl.policies import imitation, registry, search_spaces

    assert registry.ALGORITHM_NAMES == algorithms.NAMES == tuple(r.name for r in TABLE)
    assert tuple(sorted(algorithms.NAMES)) == terminal.ALGORITHM_NAMES
    # the scenario's messages quote these orders ("imitation warm starts ppo, maskable-ppo, ...")
    assert signatures.IMITABLE == imitation.IMITABLE == algorithms.IMITABLE
    imitable = ("ppo", "maskable-ppo", "independent-ppo", "a2c", "trpo", "sac", "td3", "ddpg", "tqc")
    assert imitable == algorithms.IMITABLE
    assert algorithms.FINE_TUNABLE == (
        "ppo",
        "maskable-ppo",
        "independent-ppo",
        "a2c",
        "recurrent-ppo",
        "sac",
        "td3",
        "ddpg",
        "tqc",
    )
    assert algorithms.PULLABLE == ("ppo", "maskable-ppo", "independent-ppo", "a2c")
    assert algorithms.EXPORTABLE == algorithms.NAMES  # every network has a graph (QR-DQN's: quantile-q)
    assert {r.export for r in TABLE} <= set(algorithms.EXPORT_GRAPHS)
    assert {r.name for r in TABLE if r.policy == "on"} == search_spaces.ON_POLICY
    assert {r.name for r in TABLE if r.policy == "off"} == estimates.OFF_POLICY
    assert estimates.RECURRENT_COST == {"recurrent-ppo": 10.0, "lstm-td3": 2.0}


def test_behaviour_cloning_takes_the_clone_families_of_the_table():
    from fieldrl.policies import imitation
    from fieldrl.policies.registry import algorithm_class

    families = imitation._clone_families()
    assert {cls.__name__ for cls in families} == {
        "PPO",
        "MaskablePPO",
        "IndependentPPO",
        "A2C",
        "TRPO",
        "SAC",
        "TQC",
        "TD3",
        "DDPG",
    }
    for row in TABLE:
        assert families.get(algorithm_class(row.name)) == row.clone, row


def test_reading_every_signature_imports_no_torch():
    code = textwrap.dedent(
        """
        import json, sys
        from fieldrl.policies.signatures import SIGNATURES, whole_number_parameters
        read = {name: len(sig.parameters) for name, sig in SIGNATURES.items()}
        whole_number_parameters()
        heavy = sorted({m.split(".")[0] for m in sys.modules} & {"torch", "stable_baselines3", "sb3_contrib"})
        print(json.dumps({"read": read, "heavy": heavy}))
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["heavy"] == [] and set(answer["read"]) == set(algorithms.NAMES)
    assert all(n > 5 for n in answer["read"].values())


# ----------------------------------------------------------------------------- reading source


_TOY = {
    "toypkg/__init__.py": "from .algo import Toy, Plain, Forwarding\n",
    "toypkg/base.py": textwrap.dedent(
        """
        from typing import Any

        class Base:
            def __init__(
                self,
                policy: Any,
                env: Any,
                learning_rate: float | None = 3e-4,
                n_steps: int = 16,
                train_freq: int | tuple[int, str] = (2, "step"),
                policy_kwargs: dict[str, Any] | None = None,
                seed: int | None = None,
            ):
                import torch  # never run: only read
        """
    ),
    "toypkg/algo.py": textwrap.dedent(
        """
        from collections.abc import Sequence

        from toypkg.base import Base as Renamed

        WEIGHTS = (1.0, 2.0)

        class Plain(Renamed):
            '''No __init__: the base's.'''

        class Forwarding(Renamed):
            def __init__(self, policy, env, weights: Sequence[float] = WEIGHTS, depth=3, **kwargs):
                super().__init__(policy, env, **kwargs)

        class Toy(Renamed):
            def __init__(self, policy, env, *, strange: object = None):
                pass
        """
    ),
}


@pytest.fixture
def toy_rows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A package of made-up algorithm classes, and rows of the table naming them."""
    for name, text in _TOY.items():
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(text)
    monkeypatch.syspath_prepend(str(tmp_path))
    rows = {
        "plain": Algorithm("plain", "toypkg:Plain", "on", "ppo"),
        "forwarding": Algorithm("forwarding", "toypkg:Forwarding", "on", "ppo"),
        "toy": Algorithm("toy", "toypkg.algo:Toy", "on", "ppo"),
        "missing": Algorithm("missing", "toypkg:Missing", "on", "ppo"),
    }
    monkeypatch.setattr(signatures, "BY_NAME", {**signatures.BY_NAME, **rows})
    signatures.signature.cache_clear()
    signatures._parsed.cache_clear()
    yield rows
    signatures.signature.cache_clear()
    signatures._parsed.cache_clear()
    assert "toypkg" not in sys.modules  # read, never imported


def test_a_class_without_init_takes_its_base_constructor_through_re_exports(toy_rows):
    plain = signatures.signature("plain")
    assert plain.parameters == ("learning_rate", "n_steps", "train_freq", "policy_kwargs")
    assert plain.kind == "on"
    assert plain.kinds == {
        "learning_rate": "float?",
        "n_steps": "int",
        "train_freq": "train_freq",
        "policy_kwargs": "mapping?",
    }
    assert plain.defaults == {"n_steps": 16, "train_freq": (2, "step")}


def test_a_constructor_passing_kwargs_on_adds_its_own_after_the_base(toy_rows):
    forwarding = signatures.signature("forwarding")
    assert forwarding.parameters == (
        "learning_rate",
        "n_steps",
        "train_freq",
        "policy_kwargs",
        "weights",
        "depth",
    )
    assert forwarding.kinds["weights"] == "floats" and forwarding.kinds["depth"] == "int"


def test_what_cannot_be_read_is_said_plainly(toy_rows):
    with pytest.raises(signatures.AlgorithmSourceError, match="strange of toy"):
        signatures.signature("toy")
    with pytest.raises(signatures.AlgorithmSourceError, match="cannot find class Missing"):
        signatures.signature("missing")
    with pytest.raises(KeyError):
        signatures.signature("not-in-the-table")


# ----------------------------------------------------------------------------- QR-DQN, added as one row


def test_qr_dqn_is_checked_without_torch_and_refuses_what_it_does_not_take(scenario_data, write_scenario):
    from fieldrl.policies.registry import check_hyperparameters

    assert check_hyperparameters("qr-dqn", {"exploration_fraction": 0.2, "max_grad_norm": None}) is None
    key, allowed = check_hyperparameters("qr-dqn", {"ent_coef": 0.1})
    assert key == "ent_coef" and allowed.startswith("not a parameter of qr-dqn; allowed: learning_rate,")


def test_qr_dqn_is_tuned_in_dqn_s_space_and_every_corner_fits_the_budget():
    from fieldrl.policies.feasibility import training_problem
    from fieldrl.policies.registry import check_hyperparameters
    from fieldrl.policies.search_spaces import describe, search_space, to_hyperparameters

    space = search_space("qr-dqn", 4)
    assert describe(space) == describe(search_space("dqn", 4))
    for pick in (0, -1):  # the smallest and the largest choice of every parameter
        sample = {
            k: (d.choices[pick] if hasattr(d, "choices") else (d.low, d.high)[pick]) for k, d in space.items()
        }
        hp, n_envs = to_hyperparameters("qr-dqn", sample, 5000, 1)
        assert check_hyperparameters("qr-dqn", hp) is None
        assert training_problem("qr-dqn", hp, n_envs, 1, 5000) is None, hp
    # DQN's family copies its target network every target_update_interval steps: one that never comes
    problem = training_problem(
        "qr-dqn", {"learning_starts": 1000, "target_update_interval": 1000}, 1, 1, 1500
    )
    assert problem is not None and problem[0] == "target_update_interval"


@pytest.mark.slow
def test_qr_dqn_trains_and_is_evaluated_on_a_discrete_domain(tmp_path: Path):
    """sb3-contrib's QR-DQN, added as one row of the table: trained on taxiway's discrete moves,
    selected on validation, saved as tensors, loaded back and evaluated."""
    from fieldrl import api

    scenario = {
        "name": "tiny-qr-dqn",
        "domain": "taxiway",
        "description": "test scenario",
        "params": {
            "layout": "small",
            "density": "high",
            "max_slots": 4,
            "horizon_min": 5.0,
            "drain_min": 2.0,
        },
        "policies": {
            "heuristics": [{"use": "shortest-path", "name": "shortest path"}],
            "learned": [
                {
                    "algorithm": "qr-dqn",
                    "name": "QR-DQN",
                    "train_steps": 256,
                    "n_envs": 1,
                    "hyperparameters": {
                        "learning_starts": 64,
                        "buffer_size": 2000,
                        "target_update_interval": 100,
                        "batch_size": 32,
                        "policy_kwargs": {"n_quantiles": 10, "net_arch": [32]},
                    },
                }
            ],
        },
        "seeds": {"train": [0], "eval": {"start": 100, "count": 2}, "validation": {"start": 50, "count": 1}},
    }
    file = tmp_path / "qr.yaml"
    file.write_text(yaml.safe_dump(scenario, sort_keys=False))
    folder = api.train(file, tmp_path / "run", show_progress=False)
    assert (folder / "models" / "default" / "QR-DQN" / "seed-0" / "policy.safetensors").is_file()
    results = api.evaluate(folder, show_progress=False)
    returns = results[(results["policy"] == "QR-DQN") & (results["metric"] == "return")]["value"]
    assert len(returns) == 2 and returns.notna().all()


def test_export_refuses_what_the_table_gives_no_graph_in_one_line(monkeypatch):
    """A row without ``export`` is refused before anything is built, with the table's list."""
    import dataclasses

    from fieldrl import export
    from fieldrl.scenario import LearnedEntry

    entry = LearnedEntry(algorithm="qr-dqn", name="QR", train_steps=100)
    assert export.refusal(entry, "taxiway") is None
    without = dataclasses.replace(algorithms.BY_NAME["qr-dqn"], export=None)
    monkeypatch.setitem(algorithms.BY_NAME, "qr-dqn", without)
    text = export.refusal(entry, "taxiway")
    assert text is not None and "\n" not in text
    assert text.startswith("QR (qr-dqn): export has no graph for its policy network; export supports ppo, ")
