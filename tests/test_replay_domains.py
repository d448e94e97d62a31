"""Replay renderers of the map domains (rail, taxiway, traffic, UAV): a standard controller plays a few
steps of a built-in scenario's held-out case; every snapshot is plain data, every sampled step renders
one frame, and the divergence tells equal states from different ones."""

from __future__ import annotations

import functools
import io
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import yaml  # noqa: E402

from fieldrl.domains import get_domain  # noqa: E402
from fieldrl.scenario import scenario_text  # noqa: E402

#: domain -> (built-in scenario, params made short where they allow it, heuristic, steps played)
CASES: dict[str, tuple[str, dict[str, Any], str, int]] = {
    "rail": ("rail/quick", {"mode": "semi", "shield": True}, "priority-reroute", 8),
    "taxiway": ("taxiway/quick", {}, "fcfs", 12),
    "traffic": (
        "traffic/quick",
        {
            "periods": [
                {
                    "name": "peak",
                    "duration_s": 60,
                    "vehicles_main": 900,
                    "vehicles_side": 500,
                    "pedestrians": 900,
                }
            ]
        },
        "max-pressure",
        8,
    ),
    "uav": ("uav/quick", {"episode_slots": 6}, "greedy", 6),
}
PLAIN = (str, int, float, bool, type(None), np.generic)


def _assert_plain(value: Any, where: str = "snapshot") -> None:
    """Numbers, strings, lists, tuples, dicts and numeric numpy arrays only: nothing holding a simulator."""
    if isinstance(value, dict):
        for key, item in value.items():
            assert isinstance(key, str), f"{where}: key {key!r} is not a string"
            _assert_plain(item, f"{where}[{key!r}]")
    elif isinstance(value, list | tuple):
        for k, item in enumerate(value):
            _assert_plain(item, f"{where}[{k}]")
    elif isinstance(value, np.ndarray):
        assert value.dtype != object, f"{where}: an object array"
    else:
        assert isinstance(value, PLAIN), f"{where}: {type(value).__name__} is not plain data"


@functools.cache
def _play(name: str) -> tuple[Any, list[dict[str, Any]]]:
    """The domain and its snapshots after reset and after every step (as ``fieldrl replay`` takes them);
    played once per process for both tests."""
    ref, overrides, heuristic, steps = CASES[name]
    domain = get_domain(name)
    params = domain.params_model(**{**yaml.safe_load(scenario_text(ref)[1])["params"], **overrides})
    spec = domain.heuristics[heuristic]
    policy = spec.build(spec.settings_model(), params, heuristic)
    envs = domain.make_eval_envs(params, [10_000])
    try:
        obs = envs.reset()
        policy.reset(1)
        policy.bind_envs(envs)
        start = np.ones(1, dtype=bool)
        total = 0.0
        snaps = [{**domain.replay_snapshot(envs, 0), "step": 0, "reward": 0.0, "return": 0.0}]
        for step in range(1, steps + 1):
            obs, reward, terminated, truncated, _ = envs.step(policy.act(obs, start))
            start[:] = False
            total += float(reward[0])
            snap = domain.replay_snapshot(envs, 0)
            snaps.append({**snap, "step": step, "reward": float(reward[0]), "return": total})
            if terminated[0] or truncated[0]:
                break
    finally:
        envs.close()
    return domain, snaps


def _frames(domain: Any, snaps: list[dict[str, Any]]) -> list[bytes]:
    """One PNG per snapshot, each drawn from the history up to it on the same (cleared) axes."""
    fig, ax = plt.subplots(figsize=(4.0, 4.2))
    frames = []
    try:
        for k in range(len(snaps)):
            ax.clear()
            domain.draw_replay(ax, snaps[: k + 1], f"{domain.name} replay")
            assert ax.collections, f"frame {k} drew no map"
            buffer = io.BytesIO()
            fig.savefig(buffer, format="png", dpi=50)
            frames.append(buffer.getvalue())
    finally:
        plt.close(fig)
    return frames


@pytest.mark.parametrize("name", list(CASES))
def test_each_sampled_step_renders_one_frame_from_plain_snapshots(name):
    domain, snaps = _play(name)
    assert len(snaps) >= 4
    for k, snap in enumerate(snaps):
        _assert_plain(snap, f"{name} snapshot {k}")
    frames = _frames(domain, snaps)
    assert len(frames) == len(snaps)
    assert all(frame.startswith(b"\x89PNG") for frame in frames)
    for k in range(1, len(snaps)):
        if domain.replay_divergence(snaps[k - 1], snaps[k]) > 0:  # the state moved: so does the picture
            assert frames[k] != frames[k - 1], f"{name}: frame {k} looks like frame {k - 1}"


@pytest.mark.parametrize("name", list(CASES))
def test_divergence_is_zero_for_a_state_and_positive_between_different_states(name):
    domain, snaps = _play(name)
    first, last = snaps[0], snaps[-1]
    for snap in snaps:
        assert domain.replay_divergence(snap, snap) == 0.0
    gap = domain.replay_divergence(first, last)
    assert gap > 0.0
    assert domain.replay_divergence(last, first) == pytest.approx(gap)
