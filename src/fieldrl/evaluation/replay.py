"""Side-by-side replays (``fieldrl replay``): two policies on the same held-out case, as an animation.

A replay plays one held-out episode twice, once per policy, exactly as evaluation plays it (the same
params, env seed and case, the policy built from the manifest's files: weights load as tensors, nothing
is unpickled), and records the domain's picture of the episode after the reset and after every step
(:meth:`~fieldrl.domains.base.Domain.replay_snapshot`). At most :data:`MAX_FRAMES` of those moments are
drawn, evenly spread (the first and last always), each as one figure with the two policies side by side
(:meth:`~fieldrl.domains.base.Domain.draw_replay`): a GIF always, an MP4 where imageio-ffmpeg's ffmpeg
is there. The storyboard is four to six of those frames, spread apart, at the moments where the two
episodes differ most by :meth:`~fieldrl.domains.base.Domain.replay_divergence`; the report shows them.

Everything goes under ``replay/<setting>/seed-<S>/`` in the run folder, in the manifest, with
``replay.json`` (:class:`ReplayRecord`) saying what was played. What the divergence means, in words, is
the first paragraph of the domain's ``replay_divergence`` docstring (the return gap for a domain that
keeps the default), so the report can say it without importing the domain's drawing code.

Besides ``step``, ``reward`` and ``return``, every snapshot gets ``action``: the action the policy took
on the step that led to it (a list; None after the reset), which some domains draw (a dose, a portfolio).
"""

from __future__ import annotations

import datetime as dt
import io
import math
import os
import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from fieldrl.domains.base import Domain
from fieldrl.errors import FieldrlError
from fieldrl.evaluation import runner
from fieldrl.evaluation.store import RunFolder
from fieldrl.evaluation.summary import oracle_labels
from fieldrl.names import slug
from fieldrl.policies.base import Policy
from fieldrl.results import Summary
from fieldrl.scenario import Scenario

REPLAY_ROOT = "replay"
RECORD_FILE = "replay.json"
GIF_FILE = "replay.gif"
MP4_FILE = "replay.mp4"
#: frames drawn at most: a 600-step episode is drawn every fifth step, so that a replay stays fast
MAX_FRAMES = 120
#: storyboard frames: as many as fit spread apart, at least STORYBOARD_MIN where the episode has them
STORYBOARD_MAX = 6
STORYBOARD_MIN = 4
#: size of a frame: two panels side by side; pixels divisible by 16 (ffmpeg's macro blocks)
FRAME_INCHES = (8.0, 3.4)
FRAME_DPI = 80
STORYBOARD_DPI = 150
#: the animation lasts about this long, at 2 to 12 frames a second; its last frame is held longer
ANIMATION_SECONDS = 10.0
HOLD_LAST_MS = 2000
#: what the divergence is where a domain keeps the default measure
DEFAULT_DIVERGENCE = "the gap between the two policies' returns so far"
#: words for a policy's kind
KIND_WORDS = {"heuristic": "standard", "learned": "learned"}


class ReplayUnavailable(FieldrlError):
    """This replay cannot be made (fewer than two evaluated policies, or the episode itself fails):
    ``fieldrl run`` then reports without a storyboard instead of failing after its evaluation."""


# ----------------------------------------------------------------------------- what to play


@dataclass(frozen=True)
class Side:
    """One of the two policies of a replay: its label, kind (heuristic or learned), training seed, and its
    role in words where the run chose it (``the best learned policy``; "" where the user did)."""

    policy: str
    kind: str
    train_seed: int
    role: str


@dataclass(frozen=True)
class ReplayPlan:
    """What a replay plays: setting, held-out seed (the case), its episode 0's env seed, two policies."""

    variant: str
    seed: int
    env_seed: int
    sides: tuple[Side, Side]

    @property
    def folder(self) -> str:
        return replay_folder(self.variant, self.seed)


def replay_folder(variant: str, seed: int) -> str:
    """Where the replay of held-out seed ``seed`` in setting ``variant`` is kept, in the run folder."""
    return f"{REPLAY_ROOT}/{slug(variant)}/seed-{seed}"


def _seeds_in_words(seeds: Sequence[int]) -> str:
    if len(seeds) <= 10:
        return ", ".join(str(s) for s in seeds)
    return f"{seeds[0]}, {seeds[1]}, ..., {seeds[-1]} ({len(seeds)} held-out seeds)"


def _mean(summary: Summary, variant: str, policy: str) -> float:
    """``policy``'s mean primary KPI in ``variant``, signed so that higher is better (NaN: none)."""
    primary = summary.primary
    value = summary.variant(variant).value(policy, primary.name)
    return value if primary.higher_is_better else -value


def default_pair(scenario: Scenario, domain: Domain, summary: Summary, variant: str) -> list[tuple[str, str]]:
    """``(policy, role in words)`` of the best standard and the best learned policy of ``variant`` on the
    primary KPI, as the summary names them (an exact optimiser is never the best standard policy); where
    the run lacks one of the two kinds, the best other evaluated policies on the primary KPI instead.
    Fewer than two where the setting has fewer evaluated policies."""
    entry = summary.variants[variant]
    evaluated = entry.evaluated
    oracles = set(summary.oracles or oracle_labels(scenario, domain))
    kinds = {p.name: p.kind for p in summary.policies}

    def best(names: list[str]) -> str | None:
        scored = [n for n in names if not math.isnan(_mean(summary, variant, n))] or names
        return max(scored, key=lambda n: _mean(summary, variant, n)) if scored else None

    heuristic = entry.best_heuristic
    if heuristic is None or heuristic in oracles:  # a summary written before oracles were set apart
        heuristic = best([n for n in evaluated if kinds.get(n) == "heuristic" and n not in oracles])
    learned = entry.best_learned or best([n for n in evaluated if kinds.get(n) == "learned"])
    pair = [(n, f"the best {KIND_WORDS[kinds[n]]} policy") for n in (heuristic, learned) if n is not None]
    for name in sorted(evaluated, key=lambda n: (n in oracles, -_mean(summary, variant, n))):
        if len(pair) == 2:
            break
        if name not in [p for p, _ in pair]:
            pair.append((name, ""))
    return pair


def plan_replay(
    scenario: Scenario,
    domain: Domain,
    summary: Summary,
    seed: int | None = None,
    policies: Sequence[str] | None = None,
    variant: str | None = None,
) -> ReplayPlan:
    """Check what the user asked for and say what will be played; a bad value is one FieldrlError naming
    the option, the value and what is allowed.

    :param seed: a held-out seed (default: the first on which neither policy's episode failed).
    :param policies: two policy labels, left then right (default: :func:`default_pair`).
    :param variant: a setting (default: the scenario's first).
    """
    variants = scenario.variant_names
    variant = variants[0] if variant is None else variant
    if variant not in variants:
        raise FieldrlError(f"--variant = {variant!r}: settings of this run: {', '.join(variants)}")
    evaluated = summary.variants[variant].evaluated
    kinds = {p.name: p.kind for p in summary.policies}
    if policies is None:
        chosen = default_pair(scenario, domain, summary, variant)
        if len(chosen) < 2:
            raise ReplayUnavailable(
                f"--policies: setting {variant!r} has {len(evaluated)} evaluated "
                f"polic{'y' if len(evaluated) == 1 else 'ies'} ({', '.join(evaluated) or 'none'}); "
                "a replay needs two"
            )
        pair, roles = (chosen[0][0], chosen[1][0]), [chosen[0][1], chosen[1][1]]
    else:
        given = [p.strip() for p in policies]
        shown = ",".join(policies)
        if len(given) != 2 or given[0] == given[1]:
            example = f"{evaluated[0]},{evaluated[-1]}" if len(evaluated) > 1 else "A,B"
            raise FieldrlError(
                f"--policies = {shown!r}: give two different policies, left then right "
                f"(e.g. {example!r}); allowed: {', '.join(evaluated)}"
            )
        unknown = [p for p in given if p not in evaluated]
        if unknown:
            where = "" if variant == "default" else f" in setting {variant!r}"
            raise FieldrlError(
                f"--policies = {shown!r}: {unknown[0]!r} is not an evaluated policy of this run{where}; "
                f"allowed: {', '.join(evaluated)}"
            )
        pair = (given[0], given[1])
        roles = ["", ""]
    eval_seeds = list(scenario.seeds.eval)
    first_train = scenario.seeds.train[0]
    train_seeds = [runner.HEURISTIC_TRAIN_SEED if kinds[n] == "heuristic" else first_train for n in pair]
    if seed is None:
        failed = {
            (f.policy, f.train_seed, f.eval_seed) for f in summary.failures_in(variant) if f.episode == 0
        }
        whose = list(zip(pair, train_seeds, strict=True))
        fine = [s for s in eval_seeds if not any((n, t, s) in failed for n, t in whose)]
        if not fine:
            raise ReplayUnavailable(
                f"--seed: the episodes of {pair[0]} or {pair[1]} failed on every held-out seed: "
                "nothing to replay"
            )
        seed = fine[0]
    elif seed not in eval_seeds:
        raise FieldrlError(
            f"--seed = {seed!r}: not a held-out seed of this run; allowed: {_seeds_in_words(eval_seeds)}"
        )
    left, right = (Side(n, kinds[n], t, r) for n, t, r in zip(pair, train_seeds, roles, strict=True))
    return ReplayPlan(variant, int(seed), runner.episode_seed(int(seed), 0), (left, right))


# ----------------------------------------------------------------------------- playing


def play(
    scenario: Scenario,
    domain: Domain,
    plan: ReplayPlan,
    side: Side,
    run_dir: str,
    hashes: dict[str, str],
) -> list[dict[str, Any]]:
    """Play the plan's episode with ``side``'s policy as the held-out evaluation plays it
    (:func:`play_episode`; the policy built from the run folder as evaluation builds it). An episode that
    fails in the simulator or the policy is a :class:`ReplayUnavailable` naming why (a damaged or missing
    model file stays the run folder's own one-line error)."""
    import torch

    torch.set_num_threads(1)  # as evaluation plays it (runner.run_eval_job)
    params = domain.params_model.model_validate(scenario.policy_params(plan.variant, side.policy))
    job = runner.EvalJob(plan.variant, side.policy, side.train_seed)
    policy = runner.build_policy(scenario, domain, params, job, run_dir, hashes)
    held_out = domain.held_out_params(params, scenario.seeds.eval)
    try:
        return play_episode(domain, held_out, policy, plan.env_seed, plan.seed)
    except (FieldrlError, KeyboardInterrupt):
        raise
    except Exception as exc:
        raise ReplayUnavailable(
            f"--seed = {plan.seed}: the episode of {side.policy} on this held-out seed failed "
            f"({runner.failure_reason(exc)}); choose another seed"
        ) from None


def play_episode(
    domain: Domain, params: Any, policy: Policy, env_seed: int, case: int
) -> list[dict[str, Any]]:
    """One episode (env seed ``env_seed`` of held-out case ``case``, ``params`` as the held-out
    evaluation uses them) played with ``policy`` in the runner's loop: the domain's snapshots after the
    reset and after every step, with ``step``, ``reward``, ``return`` and ``action`` added."""
    envs = domain.make_eval_envs(params, [env_seed], [case])
    with runner._closed_after(envs):
        obs = envs.reset()
        policy.reset(1)
        policy.bind_envs(envs)
        history = [_snapshot(domain, envs, 0, 0.0, 0.0, None)]
        episode_start = np.ones(1, dtype=bool)
        total = 0.0
        while True:
            action = runner._act(policy, obs, episode_start)
            obs, reward, terminated, truncated, _ = envs.step(action)
            episode_start = np.zeros(1, dtype=bool)
            gained = float(np.asarray(reward, dtype=float).reshape(-1)[0])
            total += gained
            history.append(_snapshot(domain, envs, len(history), gained, total, action))
            if bool(np.asarray(terminated).reshape(-1)[0] or np.asarray(truncated).reshape(-1)[0]):
                return history


def _snapshot(
    domain: Domain, envs: Any, step: int, reward: float, total: float, action: np.ndarray | None
) -> dict[str, Any]:
    snapshot = dict(domain.replay_snapshot(envs, 0))
    taken = None if action is None else np.asarray(action)[0].tolist()
    snapshot.update(step=step, reward=reward, action=taken)
    snapshot["return"] = total
    return snapshot


def timeline(histories: Sequence[list[dict[str, Any]]]) -> tuple[list[tuple[int, ...]], list[float] | None]:
    """The replay's moments: per moment, the snapshot each episode shows then, and (where both episodes'
    snapshots carry a ``clock``, the simulator's time) the time of each moment.

    By step where there is no clock: moment ``k`` is step ``k`` of both (an episode that ended shows its
    last). By clock where there is: every time either episode has a snapshot at, each episode showing
    its latest snapshot at or before it, so that a policy deciding every 10 s and one deciding every
    5 s (or one whose idle steps the simulator skips) are seen at the same moment, not the same step.
    """
    clocks = [[h.get("clock") for h in history] for history in histories]
    if all(all(isinstance(c, (int, float)) for c in side) for side in clocks):
        import bisect

        times = sorted({float(c) for side in clocks for c in side})
        index = [
            tuple(max(bisect.bisect_right(side, t) - 1, 0) for side in clocks)  # type: ignore[arg-type]
            for t in times
        ]
        return index, times
    n = max(len(h) for h in histories)
    return [tuple(min(k, len(h) - 1) for h in histories) for k in range(n)], None


def sample_steps(n_snapshots: int, max_frames: int = MAX_FRAMES) -> list[int]:
    """At most ``max_frames`` snapshot indices, evenly spread, the first and the last always."""
    if n_snapshots <= max_frames:
        return list(range(n_snapshots))
    return sorted({int(round(x)) for x in np.linspace(0, n_snapshots - 1, max_frames)})


def storyboard_positions(divergences: Sequence[float]) -> list[int]:
    """Positions (in the sampled frames) of the storyboard: the moment the two episodes first part, then
    the most divergent moments, each at least a twelfth of the episode from the others, up to
    :data:`STORYBOARD_MAX`; at least :data:`STORYBOARD_MIN` where there are that many frames. Episodes
    that never part get evenly spread frames."""
    n = len(divergences)
    want = min(STORYBOARD_MAX, n)
    if n <= want:
        return list(range(n))
    values = [0.0 if not math.isfinite(v) else float(v) for v in divergences]
    if max(values) <= 0:
        return sorted({int(round(x)) for x in np.linspace(0, n - 1, want)})
    gap = max(1, n // (2 * want))
    order = sorted(range(n), key=lambda i: (-values[i], i))
    chosen = [next(i for i in range(n) if values[i] > 0)]
    for i in order:
        if len(chosen) == want:
            break
        if all(abs(i - j) > gap for j in chosen):
            chosen.append(i)
    for i in order:  # too few spread apart: the next most divergent, even if close
        if len(chosen) >= min(STORYBOARD_MIN, n):
            break
        if i not in chosen:
            chosen.append(i)
    return sorted(chosen)


def divergence_meaning(domain: Domain) -> str:
    """What the domain's divergence measures, in words: the first paragraph of its ``replay_divergence``
    docstring, or :data:`DEFAULT_DIVERGENCE` for the default measure."""
    method = type(domain).replay_divergence
    if method is Domain.replay_divergence or not method.__doc__:
        return DEFAULT_DIVERGENCE
    said = " ".join(method.__doc__.strip().split("\n\n")[0].split()).rstrip(".")
    return said[:1].lower() + said[1:]


# ----------------------------------------------------------------------------- drawing


def _at(history: list[dict[str, Any]], k: int) -> tuple[list[dict[str, Any]], bool]:
    """The snapshots up to step ``k`` (all of them, and ended=True, for an episode that ended before)."""
    return history[: k + 1], k >= len(history) - 1


def _title(side: Side, latest: dict[str, Any], ended: bool) -> str:
    when = f"ended at step {latest['step']}" if ended else f"step {latest['step']}"
    return f"{KIND_WORDS[side.kind]}: {side.policy}\n{when}, return {latest['return']:.4g}"


class FrameCanvas:
    """One figure with the two policies' axes side by side, drawn again for every frame.

    Making axes and their ticks costs far more than drawing a few lines on them, so between frames the
    axes are kept (also any the domain added inside them, such as an inset panel it finds again on the
    next call) and only what was drawn on them is removed. A domain whose drawing adds axes on every call
    instead is noticed after its second frame and drawn on a cleared figure from then on.

    :param fig: the matplotlib figure to draw on.
    """

    def __init__(self, fig: Any):
        self.fig = fig
        self.axes: list[Any] = []
        self.reuse = True
        self._shape: tuple[int, ...] | None = None

    def draw(
        self,
        domain: Domain,
        sides: Sequence[Side],
        histories: Sequence[list[dict[str, Any]]],
        at: tuple[int, ...],
        header: str,
        dpi: int,
    ) -> np.ndarray:
        """Snapshot ``at[i]`` of episode ``i``, side by side under ``header``, as an RGB array."""
        fig = self.fig
        if self.reuse and self.axes:
            for ax in self.axes:
                _wipe(ax)
            for text in list(fig.texts):
                text.remove()
        else:
            fig.clear()
            self.axes = list(fig.subplots(1, 2))
            fig.subplots_adjust(left=0.08, right=0.98, bottom=0.15, top=0.8, wspace=0.3)
        fig.set_dpi(dpi)
        for ax, side, history, k in zip(self.axes, sides, histories, at, strict=True):
            shown, ended = _at(history, k)
            domain.draw_replay(ax, shown, _title(side, shown[-1], ended))
        shape = (len(fig.axes), *(len(ax.child_axes) for ax in self.axes))
        if self.reuse and self._shape is not None and shape != self._shape:
            self.reuse = False  # the domain adds axes at every call: start each frame afresh
            return self.draw(domain, sides, histories, at, header, dpi)
        self._shape = shape
        fig.text(0.5, 0.99, header, fontsize=9, ha="center", va="top")
        fig.canvas.draw()
        return np.asarray(fig.canvas.buffer_rgba())[..., :3].copy()


def _wipe(ax: Any) -> None:
    """Remove what was drawn on ``ax`` and the axes inside it, keeping the axes, ticks and scales."""
    for each in (ax, *ax.child_axes):
        for artist in (
            *each.lines,
            *each.collections,
            *each.patches,
            *each.texts,
            *each.images,
            *each.artists,
        ):
            artist.remove()
        if each.legend_ is not None:
            each.legend_.remove()
        each.set_title("")
        each.relim()
        each.set_autoscale_on(True)


@dataclass
class Rendered:
    """A replay drawn: the sampled steps, the divergence at each, the storyboard's steps, one frame per
    sampled step, the storyboard's PNGs and the animation (GIF; MP4 or why not)."""

    steps: list[int]
    divergences: list[float]
    storyboard: list[int]
    #: per sampled moment: the snapshot each episode shows, and its time where the episodes have a clock
    shown: list[tuple[int, ...]]
    clocks: list[float] | None
    frames: list[np.ndarray]
    stills: dict[int, bytes]
    fps: float
    gif: bytes
    mp4: bytes | None
    mp4_note: str | None


def render(
    domain: Domain,
    sides: Sequence[Side],
    histories: Sequence[list[dict[str, Any]]],
    header: str,
    on_event: Callable[[tuple[str, str, Any]], None] = lambda event: None,
    max_frames: int = MAX_FRAMES,
) -> Rendered:
    """Draw two played episodes side by side (left ``sides[0]``): one frame per sampled step
    (:func:`sample_steps`, at most ``max_frames``), the storyboard (:func:`storyboard_positions`) at a
    higher resolution, the GIF and, where ffmpeg is there, the MP4."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    moments, times = timeline(histories)
    steps = sample_steps(len(moments), max_frames)
    shown = [moments[k] for k in steps]
    clocks = None if times is None else [times[k] for k in steps]
    divergences = [float(domain.replay_divergence(histories[0][a], histories[1][b])) for a, b in shown]
    board = [steps[i] for i in storyboard_positions(divergences)]
    fig = plt.figure(figsize=FRAME_INCHES)
    canvas = FrameCanvas(fig)
    try:
        what = f"draw {len(steps)} frames"
        on_event(("start", what, len(steps)))
        frames = []

        def title(i: int) -> str:
            return f"{header}: " + (f"step {steps[i]}" if clocks is None else f"time {clocks[i]:g}")

        for i in range(len(steps)):
            frames.append(canvas.draw(domain, sides, histories, shown[i], title(i), FRAME_DPI))
            on_event(("update", what, i + 1))
        stills = {
            steps[i]: _png(canvas.draw(domain, sides, histories, shown[i], title(i), STORYBOARD_DPI))
            for i in (steps.index(k) for k in board)
        }
        on_event(("done", what, len(steps)))
    finally:
        plt.close(fig)
    fps = float(min(12.0, max(2.0, len(frames) / ANIMATION_SECONDS)))
    mp4, mp4_note = encode_mp4(frames, fps)
    gif = encode_gif(frames, fps)
    return Rendered(steps, divergences, board, shown, clocks, frames, stills, fps, gif, mp4, mp4_note)


def encode_gif(frames: Sequence[np.ndarray], fps: float) -> bytes:
    """The frames as a looping GIF, the last one held for :data:`HOLD_LAST_MS`: one palette for every
    frame (taken from the last, which has drawn the most), so that encoding is quick and colours do not
    flicker from frame to frame."""
    from PIL import Image

    step_ms = int(round(1000 / fps))
    durations = [step_ms] * (len(frames) - 1) + [max(step_ms, HOLD_LAST_MS)]
    images = [Image.fromarray(np.ascontiguousarray(frame)) for frame in frames]
    palette = images[-1].quantize(colors=255, method=Image.Quantize.FASTOCTREE)
    indexed = [image.quantize(palette=palette, dither=Image.Dither.NONE) for image in images]
    buffer = io.BytesIO()
    indexed[0].save(
        buffer, format="GIF", save_all=True, append_images=indexed[1:], duration=durations, loop=0,
        optimize=False, disposal=1,
    )  # fmt: skip
    return buffer.getvalue()


def encode_mp4(frames: Sequence[np.ndarray], fps: float) -> tuple[bytes | None, str | None]:
    """The frames as an H.264 MP4 through imageio-ffmpeg's ffmpeg, or ``(None, why not)``."""
    try:
        import imageio_ffmpeg

        imageio_ffmpeg.get_ffmpeg_exe()
    except (ImportError, RuntimeError, OSError) as exc:
        return None, f"no MP4: ffmpeg is not available ({' '.join(str(exc).split())[:160]})"
    height, width = frames[0].shape[:2]
    with tempfile.TemporaryDirectory(prefix="fieldrl-replay-") as tmp:
        path = os.path.join(tmp, MP4_FILE)
        try:
            writer = imageio_ffmpeg.write_frames(
                path, (width, height), fps=fps, codec="libx264", macro_block_size=16,
                pix_fmt_out="yuv420p", ffmpeg_log_level="error",
            )  # fmt: skip
            writer.send(None)
            for frame in frames:
                writer.send(np.ascontiguousarray(frame))
            writer.close()
            with open(path, "rb") as handle:
                return handle.read(), None
        except (OSError, RuntimeError) as exc:
            return None, f"no MP4: ffmpeg failed ({' '.join(str(exc).split())[:160]})"


# ----------------------------------------------------------------------------- the record


#: a file of a replay: a plain name inside its folder (never a path)
FILE_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class ReplaySide(_Strict):
    """One policy of a replay: who it is, and how its episode went."""

    policy: str
    kind: str = Field(pattern="^(heuristic|learned)$")
    train_seed: int
    role: str
    steps: int = Field(ge=0)
    episode_return: float


class StoryboardFrame(_Strict):
    """One storyboard moment: the step, how far apart the two episodes were, their returns, the PNG."""

    step: int = Field(ge=0)
    divergence: float
    returns: list[float] = Field(min_length=2, max_length=2)
    file: str = Field(pattern=FILE_NAME)
    #: the simulator's time of the moment, where the episodes are aligned by it (None: by step)
    clock: float | None = None


class ReplayRecord(_Strict):
    """``replay.json``: what a replay played and where its files are (names inside its folder)."""

    domain: str
    variant: str
    seed: int
    env_seed: int
    created: str
    sides: list[ReplaySide] = Field(min_length=2, max_length=2)
    divergence_meaning: str
    sampled_steps: list[int]
    divergences: list[float]
    storyboard: list[StoryboardFrame]
    fps: float = Field(gt=0)
    gif: str = Field(pattern=FILE_NAME)
    mp4: str | None = Field(None, pattern=FILE_NAME)
    mp4_note: str | None = None

    @property
    def folder(self) -> str:
        return replay_folder(self.variant, self.seed)

    def files(self) -> list[str]:
        """Every file of the replay, relative to the run folder."""
        names = [self.gif, *([self.mp4] if self.mp4 else []), *(f.file for f in self.storyboard)]
        return [f"{self.folder}/{name}" for name in names]


def read_replays(folder: RunFolder) -> list[ReplayRecord]:
    """Every replay recorded in the run folder (checked against the manifest and the shape fieldrl
    writes), oldest first."""
    records = []
    for rel in sorted(folder.hashes()):
        parts = rel.split("/")
        if len(parts) != 4 or parts[0] != REPLAY_ROOT or parts[3] != RECORD_FILE:
            continue
        record = folder.read_model(rel, ReplayRecord)
        if record.folder != "/".join(parts[:3]):
            raise FieldrlError(f"{folder.path / rel}: names another replay's folder (was the file edited?)")
        records.append(record)
    return sorted(records, key=lambda r: r.created)


def forget_replays(folder: RunFolder, rel_folder: str = REPLAY_ROOT) -> None:
    """Drop the replays under ``rel_folder`` (all of them by default) from the manifest and the disk."""
    prefix = rel_folder.rstrip("/") + "/"
    folder.forget(*(rel for rel in folder.hashes() if rel.startswith(prefix)))
    shutil.rmtree(folder.inside(rel_folder), ignore_errors=True)


# ----------------------------------------------------------------------------- making one


def make_replay(
    folder: RunFolder,
    scenario: Scenario,
    domain: Domain,
    plan: ReplayPlan,
    on_event: Callable[[tuple[str, str, Any]], None] = lambda event: None,
) -> ReplayRecord:
    """Play, draw and record the replay of ``plan`` (an earlier replay of the same case is replaced).

    Nothing is written until both episodes were played and every frame drawn, so a bad seed, a failing
    episode or an interruption leaves the run folder as it was.

    :param on_event: progress events ``("start"|"update"|"done", what, count)``.
    """
    folder.inside(plan.folder)  # refused before anything is played if it would lead out of the run folder
    hashes = folder.hashes()
    played = []
    for side in plan.sides:
        what = f"play {side.policy}"
        on_event(("start", what, 1))
        played.append(play(scenario, domain, plan, side, str(folder.path), hashes))
        on_event(("done", what, 1))
    where = "" if plan.variant == "default" else f", setting {plan.variant}"
    drawn = render(domain, plan.sides, played, f"held-out seed {plan.seed}{where}", on_event)
    record = ReplayRecord(
        domain=domain.name,
        variant=plan.variant,
        seed=plan.seed,
        env_seed=plan.env_seed,
        created=dt.datetime.now(dt.UTC).isoformat(timespec="microseconds"),
        sides=[
            ReplaySide(
                policy=side.policy,
                kind=side.kind,
                train_seed=side.train_seed,
                role=side.role,
                steps=int(history[-1]["step"]),
                episode_return=float(history[-1]["return"]),
            )
            for side, history in zip(plan.sides, played, strict=True)
        ],
        divergence_meaning=divergence_meaning(domain),
        sampled_steps=drawn.steps,
        divergences=drawn.divergences,
        storyboard=[
            StoryboardFrame(
                step=k,
                divergence=drawn.divergences[j],
                returns=[float(played[i][drawn.shown[j][i]]["return"]) for i in range(2)],
                file=f"storyboard-step-{k}.png",
                clock=None if drawn.clocks is None else drawn.clocks[j],
            )
            for k in drawn.storyboard
            for j in [drawn.steps.index(k)]
        ],
        fps=drawn.fps,
        gif=GIF_FILE,
        mp4=MP4_FILE if drawn.mp4 is not None else None,
        mp4_note=drawn.mp4_note,
    )
    forget_replays(folder, plan.folder)
    written = []
    for frame in record.storyboard:
        written.append(f"{plan.folder}/{frame.file}")
        folder.write_bytes(written[-1], drawn.stills[frame.step], record=False)
    written.append(f"{plan.folder}/{GIF_FILE}")
    folder.write_bytes(written[-1], drawn.gif, record=False)
    if drawn.mp4 is not None:
        written.append(f"{plan.folder}/{MP4_FILE}")
        folder.write_bytes(written[-1], drawn.mp4, record=False)
    folder.write_json(f"{plan.folder}/{RECORD_FILE}", record.model_dump(mode="json"), record=False)
    folder.record(*written, f"{plan.folder}/{RECORD_FILE}")
    return record


def _png(frame: np.ndarray) -> bytes:
    """A storyboard still as PNG, its blank margins trimmed (the frame canvas is fixed for the animation;
    on a page the empty bands above and below a wide map would only push the next frame away)."""
    import imageio.v3 as iio

    return bytes(iio.imwrite("<bytes>", trim_margins(frame), extension=".png"))


def trim_margins(frame: np.ndarray, pad: int = 8) -> np.ndarray:
    """``frame`` (rows, columns, channels) without the rows and columns that are all the corner's colour,
    keeping ``pad`` pixels of it around what is drawn."""
    background = frame[0, 0]
    drawn = np.any(frame != background, axis=-1)
    rows, cols = np.flatnonzero(drawn.any(axis=1)), np.flatnonzero(drawn.any(axis=0))
    if not len(rows):
        return frame
    top, bottom = max(rows[0] - pad, 0), min(rows[-1] + pad + 1, frame.shape[0])
    left, right = max(cols[0] - pad, 0), min(cols[-1] + pad + 1, frame.shape[1])
    return frame[top:bottom, left:right]
