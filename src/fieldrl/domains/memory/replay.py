"""The cue-memory replay (``fieldrl replay``): the cue, what the policy observed, and what it did.

One column per decision: the signal the policy saw at that step (the cue at step 0, coloured by its
sign; noise only afterwards) and the action it then took (-1 to 1). The last decision must have the
cue's sign; the frame says whether it had.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

CUE_COLORS = {1.0: "#2ca02c", -1.0: "#9467bd"}
SIGNAL_COLOR = "#8c8c8c"
ACTION_COLOR = "#1f77b4"


def snapshot(envs: Any, index: int) -> dict[str, Any]:
    """Episode ``index`` of the :class:`~fieldrl.domains.base.LockstepEnvs` over
    :class:`~fieldrl.domains.memory.env.MemoryEnv` now: the step, the wait, the cue and the observed
    signal (its value at the deciding step's end is the env's closing observation, not drawn)."""
    env = envs.envs[index].unwrapped
    obs = np.asarray(envs._last_obs[index], dtype=float).reshape(-1)  # what the policy was just shown
    return {"t": int(env._t), "delay": int(env.delay), "cue": float(env._cue), "signal": float(obs[0])}


def _action(snap: dict[str, Any]) -> float:
    return float(np.asarray(snap["action"], dtype=float).reshape(-1)[0])


def draw(ax: Any, history: Sequence[dict[str, Any]], title: str) -> None:
    """Signals seen and actions taken so far on ``ax``, titled ``title``."""
    first = history[0]
    delay, cue = int(first["delay"]), float(first["cue"])
    # snapshot j (j <= delay) holds the signal seen before decision j; snapshot j + 1 the action taken
    seen = [h["signal"] for h in history[: delay + 1]]
    acted = [_action(h) for h in history[1:]]
    colors = [CUE_COLORS.get(cue, SIGNAL_COLOR)] + [SIGNAL_COLOR] * (len(seen) - 1)
    ax.bar(range(len(seen)), seen, width=0.5, color=colors, alpha=0.6)
    if acted:
        ax.plot(range(len(acted)), acted, "o-", color=ACTION_COLOR, lw=1.3, ms=4)
    ax.axhline(0.0, color="#555555", lw=0.6)
    ax.axvspan(delay - 0.4, delay + 0.4, color="#f0f0f0", zorder=0)
    ax.text(delay, 1.25, "deciding\nstep", ha="center", va="bottom", fontsize=6, color="#555555")
    ax.text(0, 1.25, f"cue {cue:+.0f}", ha="center", va="bottom", fontsize=7, color=colors[0])
    if len(acted) > delay:
        right = acted[delay] * cue > 0
        ax.text(
            0.98, 0.04, "right sign" if right else "wrong sign", transform=ax.transAxes, ha="right",
            fontsize=8, fontweight="bold", color="#2ca02c" if right else "#d62728",
        )  # fmt: skip
    extent = max(1.6, 0.2 + max((abs(v) for v in seen), default=0.0))
    ax.set_ylim(-extent, extent)
    ax.set_xlim(-0.6, delay + 0.6)
    ax.set_xticks(range(delay + 1))
    ax.set_xlabel("decision (step)", fontsize=7)
    ax.set_ylabel("signal / action", fontsize=7)
    ax.tick_params(labelsize=6)
    ax.text(0.01, 0.02, "signal seen", color=SIGNAL_COLOR, fontsize=6, transform=ax.transAxes)
    ax.text(0.2, 0.02, "action", color=ACTION_COLOR, fontsize=6, transform=ax.transAxes)
    ax.set_title(title, fontsize=9, y=1.0)  # a fixed place: placing it anew costs more than the plot


def divergence(a: dict[str, Any], b: dict[str, Any]) -> float:
    """How far apart the two episodes are now: see ``MemoryDomain.replay_divergence``."""
    acted = 0.0 if a.get("action") is None or b.get("action") is None else abs(_action(a) - _action(b))
    return acted + abs(float(a["return"]) - float(b["return"]))
