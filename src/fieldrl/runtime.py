"""Run an exported policy bundle without torch, Stable-Baselines3 or any simulator.

A bundle is the folder ``fieldrl export`` writes (see docs/deploying.md): the policy network as
ONNX with the observation normalisation folded in, ``bundle.json`` saying what goes in and what
comes out, a model card, and ``manifest.json`` with the SHA-256 of every other file. This module
loads one, refuses it if any file differs from its manifest, checks every observation (and action
mask) before it reaches the network, and answers with the action the environment takes.

It imports only numpy, onnxruntime and the standard library, and nothing of fieldrl: the file can
be copied beside a bundle and used on a machine that has neither torch nor fieldrl installed::

    from runtime import Bundle            # or: from fieldrl.runtime import Bundle
    bundle = Bundle.load("exports/chemo-PPO")
    action = bundle.act(observation)      # mask=... for policies trained with action masks

A recurrent policy (RecurrentPPO, LSTM-TD3) carries a memory from one decision to the next; its
bundle takes that state as explicit inputs and gives the next one back. Keep one state per stream
of decisions (one patient, one intersection), either by hand::

    action, state = bundle.step(observation, state, episode_start)   # state=None: a new stream

or with a :class:`Stream`, which keeps it for you::

    stream = bundle.stream()
    action = stream.act(observation, episode_start=True)   # the first decision of an episode
    action = stream.act(next_observation)                  # the same episode, one step on

``python runtime.py BUNDLE < observations.jsonl`` (or ``fieldrl act BUNDLE``) answers JSON lines
on stdin with JSON lines on stdout: shadow mode (the lines are one stream).
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

#: the layout of a feed-forward bundle (``bundle.json``'s ``format``)
FORMAT = "fieldrl-bundle/1"
#: the layout of a bundle whose policy carries a state between decisions (recurrent policies)
FORMAT_STATE = "fieldrl-bundle/2"
#: the layouts this runtime reads
READS = (FORMAT, FORMAT_STATE)
MANIFEST_FILE = "manifest.json"
CONTRACT_FILE = "bundle.json"
#: what a bundle must hold besides its manifest
REQUIRED_FILES = (CONTRACT_FILE,)
#: largest file a bundle may hold (a policy MLP is kilobytes to a few megabytes)
MAX_FILE_BYTES = 1 << 30


class BundleError(ValueError):
    """A bundle that cannot be used (missing, tampered, not a fieldrl bundle), or an observation or
    mask it cannot answer; the message is one line naming what is wrong and what was expected."""


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _read(path: Path, what: str) -> bytes:
    if not path.is_file():
        raise BundleError(f"{path}: {what} is missing; export the policy again (`fieldrl export`)")
    if path.stat().st_size > MAX_FILE_BYTES:
        raise BundleError(f"{path}: larger than {MAX_FILE_BYTES >> 20} MiB; not a file fieldrl exports")
    return path.read_bytes()


def read_verified(folder: str | Path) -> tuple[dict[str, Any], dict[str, bytes]]:
    """The bundle's contract and the bytes of every file its manifest lists, each checked against the
    manifest's SHA-256 (the bytes returned are the bytes hashed: nothing is read twice)."""
    root = Path(folder)
    if not root.is_dir():
        raise BundleError(f"BUNDLE = {str(folder)!r}: no such folder")
    try:
        manifest = json.loads(_read(root / MANIFEST_FILE, "the manifest").decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BundleError(f"{root / MANIFEST_FILE}: not readable as JSON ({exc})") from None
    listed = manifest.get("files") if isinstance(manifest, dict) else None
    if not isinstance(listed, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in listed.items()
    ):
        raise BundleError(
            f"{root / MANIFEST_FILE}: not a bundle manifest (expected {{'files': {{name: sha256}}}})"
        )
    for name in REQUIRED_FILES:
        if name not in listed:
            raise BundleError(f"{root / MANIFEST_FILE}: does not list {name}; not a complete fieldrl bundle")
    files: dict[str, bytes] = {}
    for name, expected in sorted(listed.items()):
        if Path(name).name != name or name in (".", "..", MANIFEST_FILE):
            raise BundleError(
                f"{root / MANIFEST_FILE}: lists {name!r}; a bundle's files sit in its own folder"
            )
        data = _read(root / name, f"{name} (listed in the manifest)")
        if sha256_hex(data) != expected:
            raise BundleError(
                f"{root / name}: changed since it was exported (its SHA-256 differs from the manifest's); "
                "refusing a bundle that is not what was exported and tested"
            )
        files[name] = data
    try:
        contract = json.loads(files[CONTRACT_FILE].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BundleError(f"{root / CONTRACT_FILE}: not readable as JSON ({exc})") from None
    if not isinstance(contract, dict) or contract.get("format") not in READS:
        found = contract.get("format") if isinstance(contract, dict) else None
        raise BundleError(
            f"{root / CONTRACT_FILE}: format {found!r}; this runtime reads {' and '.join(map(repr, READS))} "
            "(exported by another version of fieldrl?)"
        )
    model = contract.get("model")
    if not isinstance(model, str) or model not in files:
        raise BundleError(f"{root / CONTRACT_FILE}: its model file {model!r} is not in the manifest")
    return contract, files


def _shape_text(shape: Iterable[int]) -> str:
    dims = tuple(shape)
    return "(" + ", ".join(str(d) for d in dims) + ("," if len(dims) == 1 else "") + ")"


def _first_bad(values: np.ndarray) -> tuple[tuple[int, ...], str]:
    """Index and kind (NaN or infinity) of the first non-finite number of ``values``."""
    index = tuple(int(i) for i in np.argwhere(~np.isfinite(values))[0])
    value = values[index]
    return index, ("NaN" if np.isnan(value) else "infinity")


@dataclass(frozen=True)
class StateSpec:
    """One tensor of a recurrent policy's state: its name (an ONNX input), the output that gives its
    next value, and the shape and dtype of one row (the memory of one observation row)."""

    name: str
    output: str
    shape: tuple[int, ...]
    dtype: np.dtype


class Bundle:
    """An exported policy, ready to act.

    :param contract: ``bundle.json`` (what goes in and comes out, see docs/deploying.md).
    :param model: the ONNX model's bytes.
    :param source: where it came from, for messages.
    """

    def __init__(self, contract: dict[str, Any], model: bytes, source: str = "bundle") -> None:
        try:
            import onnxruntime as ort
        except ImportError:
            raise BundleError(
                "running a bundle needs onnxruntime: pip install onnxruntime (or 'fieldrl[runtime]')"
            ) from None
        self.contract = contract
        self.source = source
        try:
            observation, action = contract["observation"], contract["action"]
            self.obs_shape = tuple(int(d) for d in observation["shape"])
            self.per_agent = bool(observation.get("per_agent", False))
            self.action_shape = tuple(int(d) for d in action["shape"])
            self.action_dtype = np.dtype(action["dtype"])
            mask = contract.get("mask")
            self.mask_size = None if mask is None else int(mask["size"])
            names = contract["onnx"]
            self._obs_input, self._mask_input = names["observation"], names.get("mask")
            self._outputs = list(names["outputs"])
            state = contract.get("state")
            self._start_input: str | None = None if state is None else str(state["episode_start"])
            self.state_spec = [
                StateSpec(
                    str(t["name"]), str(t["output"]), tuple(int(d) for d in t["shape"]), np.dtype(t["dtype"])
                )
                for t in ([] if state is None else state["tensors"])
            ]
        except (KeyError, TypeError, ValueError) as exc:
            raise BundleError(f"{source}: {CONTRACT_FILE} is not what fieldrl exports ({exc!r})") from None
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1  # small networks: one thread answers fastest and always alike
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        try:
            self.session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
        except Exception as exc:  # onnxruntime raises its own exception types
            text = " ".join(str(exc).split())[:300]
            raise BundleError(f"{source}: the ONNX model does not load ({text})") from None
        inputs = {i.name for i in self.session.get_inputs()}
        expected = {self._obs_input} | ({self._mask_input} if self.mask_size is not None else set())
        expected |= {self._start_input} if self._start_input is not None else set()
        expected |= {t.name for t in self.state_spec}
        outputs = {o.name for o in self.session.get_outputs()}
        wanted = {self._outputs[0], *(t.output for t in self.state_spec)}
        if inputs != expected or not wanted <= outputs:
            raise BundleError(
                f"{source}: the ONNX model's inputs {sorted(inputs)} and outputs {sorted(outputs)} are not "
                f"the ones {CONTRACT_FILE} names (inputs {sorted(expected)}, outputs {sorted(wanted)})"
            )

    @classmethod
    def load(cls, folder: str | Path) -> Bundle:
        """Load the bundle in ``folder``, every file checked against its manifest first."""
        contract, files = read_verified(folder)
        return cls(contract, files[contract["model"]], str(folder))

    @property
    def recurrent(self) -> bool:
        """Whether the policy carries a state from one decision to the next (see :meth:`step`)."""
        return bool(self.state_spec)

    # -------------------------------------------------------------------------------- inputs

    def _expected_obs(self) -> str:
        dims = ", ".join(str(d) for d in self.obs_shape)
        if self.per_agent:
            return f"(agents, {dims}) for one decision (a row per agent)"
        return f"{_shape_text(self.obs_shape)} for one decision, or (batch, {dims}) for several"

    def check_observation(self, observation: Any) -> np.ndarray:
        """``observation`` as the float64 array the network reads; a :class:`BundleError` naming what is
        wrong (not numbers, wrong shape, NaN or infinity) otherwise."""
        try:
            obs = np.asarray(observation)
        except (ValueError, TypeError):  # ragged nested lists
            raise BundleError(
                f"observation: rows of different lengths, not an array; expected {self._expected_obs()}"
            ) from None
        if obs.dtype.kind not in "biuf":
            held = {"U": "text", "S": "bytes", "c": "complex numbers"}.get(obs.dtype.kind, "non-numbers")
            raise BundleError(f"observation: holds {held}; expected numbers of shape {self._expected_obs()}")
        n = len(self.obs_shape)
        lead = obs.shape[: obs.ndim - n]
        if obs.ndim < n or obs.shape[obs.ndim - n :] != self.obs_shape or (self.per_agent and len(lead) < 1):
            raise BundleError(f"observation: shape {_shape_text(obs.shape)}; expected {self._expected_obs()}")
        values = obs.astype(np.float64)
        if not np.isfinite(values).all():
            index, kind = _first_bad(values)
            raise BundleError(f"observation: {kind} at index {list(index)}; expected finite numbers")
        return values

    def check_mask(self, mask: Any, lead: tuple[int, ...]) -> np.ndarray | None:
        """``mask`` as booleans of shape ``lead + (mask size,)``, or None for a policy without masks."""
        if self.mask_size is None:
            if mask is not None:
                raise BundleError(
                    "mask: this policy takes no action mask (it was trained and tested without)"
                )
            return None
        expected = _shape_text((*lead, self.mask_size))
        if mask is None:
            raise BundleError(
                f"mask: missing; this policy was trained and tested with action masks: give one of shape "
                f"{expected}, True (or 1) where an action is allowed"
            )
        try:
            array = np.asarray(mask)
        except (ValueError, TypeError):
            raise BundleError(f"mask: rows of different lengths, not an array; expected {expected}") from None
        if array.shape != (*lead, self.mask_size):
            raise BundleError(f"mask: shape {_shape_text(array.shape)}; expected {expected}")
        if array.dtype.kind == "b":
            return array
        if array.dtype.kind not in "iuf" or not np.isin(array, (0, 1)).all():
            raise BundleError(f"mask: expected true/false (or 1/0) of shape {expected}")
        return array.astype(bool)

    @staticmethod
    def check_episode_start(episode_start: Any, lead: tuple[int, ...]) -> np.ndarray:
        """``episode_start`` as one boolean per observation row (``lead`` flattened): True or False for
        every row, or an array of the observation's leading shape, or of its first leading dimensions
        (one per episode of a multi-agent batch, repeated over its agents)."""
        expected = "true/false, or one per observation row" + (
            f" (shape {_shape_text(lead)})" if lead else ""
        )
        try:
            array = np.asarray(episode_start)
        except (ValueError, TypeError):
            raise BundleError(f"episode_start: rows of different lengths; expected {expected}") from None
        if array.dtype.kind != "b":
            if array.dtype.kind not in "iuf" or not np.isin(array, (0, 1)).all():
                raise BundleError(f"episode_start: expected {expected}")
            array = array.astype(bool)
        if array.ndim > len(lead) or array.shape != lead[: array.ndim]:
            raise BundleError(f"episode_start: shape {_shape_text(array.shape)}; expected {expected}")
        full = np.broadcast_to(array.reshape(array.shape + (1,) * (len(lead) - array.ndim)), lead)
        return full.reshape(-1)

    def initial_state(self, rows: int = 1) -> dict[str, np.ndarray]:
        """The state of a new stream of ``rows`` observation rows (zeros, as training starts an episode):
        ``{name: array of shape (rows, ...)}``; empty for a feed-forward policy."""
        if not isinstance(rows, int | np.integer) or isinstance(rows, bool) or rows < 1:
            raise BundleError(f"rows = {rows!r}: expected a whole number of observation rows, at least 1")
        return {t.name: np.zeros((int(rows), *t.shape), dtype=t.dtype) for t in self.state_spec}

    def check_state(self, state: Any, rows: int) -> dict[str, np.ndarray]:
        """``state`` (as :meth:`step` returned it, or :meth:`initial_state`) as the arrays the network
        reads, one row per observation row; a :class:`BundleError` naming what is wrong otherwise."""
        if state is None:
            return self.initial_state(rows)
        names = [t.name for t in self.state_spec]
        if not isinstance(state, dict) or sorted(state) != sorted(names):
            found = sorted(state) if isinstance(state, dict) else type(state).__name__
            raise BundleError(
                f"state: {found}; expected {{{', '.join(names)}}} as step() returned it "
                "(None for a new stream)"
            )
        checked = {}
        for t in self.state_spec:
            try:
                array = np.asarray(state[t.name])
            except (ValueError, TypeError):
                array = np.asarray(None)
            expected = _shape_text((rows, *t.shape))
            if array.dtype.kind not in "biuf":
                raise BundleError(f"state: {t.name} is not numbers; expected {t.dtype} of shape {expected}")
            if array.shape != (rows, *t.shape):
                raise BundleError(
                    f"state: {t.name} has shape {_shape_text(array.shape)}; expected {expected} (one row per "
                    "observation row: a stream keeps its number of rows within an episode)"
                )
            if not np.isfinite(array).all():
                index, kind = _first_bad(array.astype(np.float64))
                raise BundleError(
                    f"state: {t.name} holds {kind} at index {list(index)}; expected finite numbers"
                )
            checked[t.name] = array.astype(t.dtype, copy=False)
        return checked

    # -------------------------------------------------------------------------------- acting

    def _run(
        self, observation: Any, mask: Any, state: Any, episode_start: Any, restart: bool = False
    ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        """Outputs and the next state; ``restart``: where every row starts an episode, a ``state`` of
        another number of rows is dropped (the graph resets the rows it keeps: that is what was tested)."""
        obs = self.check_observation(observation)
        lead = obs.shape[: obs.ndim - len(self.obs_shape)]
        masks = self.check_mask(mask, lead)
        starts = self.check_episode_start(episode_start, lead)
        rows = int(np.prod(lead, dtype=np.int64))
        first = self.state_spec[0].name if self.state_spec else None
        if restart and starts.all() and isinstance(state, dict) and np.shape(state.get(first))[:1] != (rows,):
            state = None
        feed = {self._obs_input: obs.reshape(rows, *self.obs_shape)}
        if masks is not None:
            feed[self._mask_input] = masks.reshape(rows, self.mask_size)
        if self.recurrent:
            assert self._start_input is not None
            feed[self._start_input] = starts
            feed.update(self.check_state(state, rows))
        elif state:  # None or {}: what a feed-forward policy's step gives back
            raise BundleError("state: this policy is feed-forward (it carries no state); give None")
        wanted = [*self._outputs, *(t.output for t in self.state_spec)]
        results = dict(zip(wanted, self.session.run(wanted, feed), strict=True))
        out = {}
        for name in self._outputs:
            value = np.asarray(results[name])
            out[name] = value.reshape(*lead, *value.shape[1:])
        out[self._outputs[0]] = out[self._outputs[0]].astype(self.action_dtype, copy=False)
        return out, {t.name: np.asarray(results[t.output]) for t in self.state_spec}

    def _stateless(self, what: str) -> None:
        if self.recurrent:
            names = ", ".join(t.name for t in self.state_spec)
            raise BundleError(
                f"{what}: this policy is recurrent (it carries {names} from one decision to the next) and "
                "was never tested without its memory: use step(obs, state, episode_start) or "
                "stream().act(obs)"
            )

    def outputs(self, observation: Any, mask: Any = None) -> dict[str, np.ndarray]:
        """Every output of the network (``action`` first; discrete policies also give their masked
        logits or Q-values), each with the observation's leading dimensions (feed-forward policies)."""
        self._stateless("outputs()")
        return self._run(observation, mask, None, False)[0]

    def act(self, observation: Any, mask: Any = None) -> np.ndarray:
        """The action the environment takes for ``observation`` (``mask``: True where an action is
        allowed, for policies trained with masks). Leading dimensions are kept: one observation gives
        one action, a batch (or a multi-agent row per agent) gives one per row. Feed-forward policies
        only: a recurrent one acts with :meth:`step` or a :class:`Stream`."""
        self._stateless("act()")
        return self._run(observation, mask, None, False)[0][self._outputs[0]]

    def step(
        self,
        observation: Any,
        state: dict[str, np.ndarray] | None = None,
        episode_start: Any = False,
        mask: Any = None,
    ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """One decision of a stream: ``(action, the state after it)``.

        :param observation: as for :meth:`act`; each observation row has its own state row.
        :param state: what the previous ``step`` of this stream returned; None: a new stream (zeros, as
            :meth:`initial_state`). A stream's number of observation rows stays the same.
        :param episode_start: True where this observation is the first of an episode: that row's state is
            reset to zeros before acting, as in training and evaluation. True/False for every row, or
            one per row.
        :param mask: as for :meth:`act`.

        A feed-forward policy answers as :meth:`act` does, with an empty state.
        """
        out, after = self._run(observation, mask, state, episode_start)
        return out[self._outputs[0]], after

    def stream(self) -> Stream:
        """A new stream of decisions that keeps the policy's state between them (:class:`Stream`)."""
        return Stream(self)


class Stream:
    """One stream of decisions of a bundle (one patient, one intersection: one episode after another),
    keeping a recurrent policy's state between them. For a feed-forward policy it is the bundle's
    ``act``. Not for concurrent use: one Stream object per stream.

    :param bundle: the loaded bundle.
    """

    def __init__(self, bundle: Bundle) -> None:
        self.bundle = bundle
        #: the state after the last decision (None before the first)
        self.state: dict[str, np.ndarray] | None = None

    def act(self, observation: Any, mask: Any = None, episode_start: Any = False) -> np.ndarray:
        """The action for the stream's next ``observation``; ``episode_start``: True at the first
        decision of an episode (the stream's very first decision starts from zeros either way). Where
        every row starts an episode the stream may change its number of rows."""
        out, self.state = self.bundle._run(observation, mask, self.state, episode_start, restart=True)
        return out[self.bundle._outputs[0]]

    def reset(self) -> None:
        """Forget the state: the next decision starts a new stream."""
        self.state = None


# ------------------------------------------------------------------------------------ shadow mode


def parse_line(text: str) -> tuple[Any, Any, Any]:
    """``(observation, mask, episode_start)`` of one JSON line: ``{"obs": [...], "mask": [...],
    "episode_start": true}`` (mask and episode_start optional) or a bare list of numbers."""
    try:
        record = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BundleError(f"not JSON ({exc.msg} at column {exc.colno})") from None
    if isinstance(record, list):
        return record, None, False
    if isinstance(record, dict) and "obs" in record and set(record) <= {"obs", "mask", "episode_start"}:
        return record["obs"], record.get("mask"), record.get("episode_start", False)
    raise BundleError(
        'expected {"obs": [...], "mask": [...], "episode_start": true} (mask and episode_start optional) or '
        "a bare list of numbers"
    )


def serve(bundle: Bundle, lines: Iterable[str], write: Callable[[str], None]) -> int:
    """Answer every non-blank JSON line of ``lines`` with ``{"action": ...}`` on ``write``; return how
    many were answered. The lines are one stream (:class:`Stream`): a recurrent policy's state is kept
    from line to line and reset where a line says ``"episode_start": true``. A bad line raises
    :class:`BundleError` naming its line number (the lines before it were answered)."""
    stream = bundle.stream()
    answered = 0
    for number, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        try:
            obs, mask, start = parse_line(text)
            action = stream.act(obs, mask, start)
        except BundleError as exc:
            raise BundleError(f"input line {number}: {exc}") from None
        write(json.dumps({"action": action.tolist()}) + "\n")
        answered += 1
    return answered


def main(argv: list[str] | None = None) -> int:
    """``python runtime.py BUNDLE``: shadow mode (JSON lines on stdin, actions on stdout); exit 2 with
    one line on stderr for a bad bundle or input line."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        sys.stderr.write("usage: python runtime.py BUNDLE < observations.jsonl\n")
        return 2
    try:
        bundle = Bundle.load(args[0])

        def write(line: str) -> None:
            sys.stdout.write(line)
            sys.stdout.flush()  # shadow mode: each answer as soon as it is known

        serve(bundle, iter(sys.stdin.readline, ""), write)
    except BundleError as exc:
        sys.stderr.write(f"error: {' '.join(str(exc).split())}\n")
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
