"""The per-environment window of past (observation, action) pairs that LSTM-TD3 acts on.

A window holds, for each of ``n`` environments, the last ``l`` pairs ``(o_k, a_k)`` of its
current episode, oldest first and left-aligned: rows ``0 .. length-1`` are real, the rest
are zeros. ``a_k`` is the action taken after seeing ``o_k``, scaled to ``[-1, 1]`` (what the
replay buffer stores), and ``o_k`` is the observation as the policy saw it.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np


class HistoryWindow(NamedTuple):
    """Past pairs for a batch of environments (the ``state`` of ``LSTMTD3.predict``).

    :param observations: ``(n, l, obs_dim)`` float32, zero-padded.
    :param actions: ``(n, l, action_dim)`` float32, zero-padded.
    :param lengths: ``(n,)`` int64, number of real pairs (0 at an episode's first step).
    """

    observations: np.ndarray
    actions: np.ndarray
    lengths: np.ndarray


def empty_window(n_envs: int, history_length: int, obs_dim: int, action_dim: int) -> HistoryWindow:
    return HistoryWindow(
        np.zeros((n_envs, history_length, obs_dim), dtype=np.float32),
        np.zeros((n_envs, history_length, action_dim), dtype=np.float32),
        np.zeros(n_envs, dtype=np.int64),
    )


def clear_rows(window: HistoryWindow, rows: np.ndarray) -> HistoryWindow:
    """A copy of ``window`` with the environments where ``rows`` is True emptied."""
    rows = np.asarray(rows, dtype=bool).reshape(-1)
    obs, actions, lengths = (np.array(a, copy=True) for a in window)
    obs[rows] = 0.0
    actions[rows] = 0.0
    lengths[rows] = 0
    return HistoryWindow(obs, actions, lengths)


def push(window: HistoryWindow, obs: np.ndarray, actions: np.ndarray) -> HistoryWindow:
    """A copy of ``window`` with ``(obs[i], actions[i])`` appended for every environment ``i``.

    A full window drops its oldest pair.
    """
    hist_obs, hist_actions, lengths = (np.array(a, copy=True) for a in window)
    n, history_length = hist_obs.shape[:2]
    full = lengths >= history_length
    if full.any():
        hist_obs[full] = np.roll(hist_obs[full], -1, axis=1)
        hist_actions[full] = np.roll(hist_actions[full], -1, axis=1)
    slot = np.minimum(lengths, history_length - 1)
    rows = np.arange(n)
    hist_obs[rows, slot] = np.asarray(obs, dtype=np.float32).reshape(n, -1)
    hist_actions[rows, slot] = np.asarray(actions, dtype=np.float32).reshape(n, -1)
    return HistoryWindow(hist_obs, hist_actions, np.minimum(lengths + 1, history_length))
