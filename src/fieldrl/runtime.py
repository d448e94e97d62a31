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

``python runtime.py BUNDLE < observations.jsonl`` (or ``fieldrl act BUNDLE``) answers JSON lines
on stdin with JSON lines on stdout: shadow mode.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np

#: the bundle layout this runtime reads (``bundle.json``'s ``format``)
FORMAT = "fieldrl-bundle/1"
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
    if not isinstance(contract, dict) or contract.get("format") != FORMAT:
        found = contract.get("format") if isinstance(contract, dict) else None
        raise BundleError(
            f"{root / CONTRACT_FILE}: format {found!r}; this runtime reads {FORMAT!r} "
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
        if inputs != expected or self._outputs[0] not in {o.name for o in self.session.get_outputs()}:
            raise BundleError(
                f"{source}: the ONNX model's inputs {sorted(inputs)} are not the ones {CONTRACT_FILE} "
                f"names {sorted(expected)}"
            )

    @classmethod
    def load(cls, folder: str | Path) -> Bundle:
        """Load the bundle in ``folder``, every file checked against its manifest first."""
        contract, files = read_verified(folder)
        return cls(contract, files[contract["model"]], str(folder))

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

    # -------------------------------------------------------------------------------- acting

    def outputs(self, observation: Any, mask: Any = None) -> dict[str, np.ndarray]:
        """Every output of the network (``action`` first; discrete policies also give their masked
        logits or Q-values), each with the observation's leading dimensions."""
        obs = self.check_observation(observation)
        lead = obs.shape[: obs.ndim - len(self.obs_shape)]
        masks = self.check_mask(mask, lead)
        rows = int(np.prod(lead, dtype=np.int64))
        feed = {self._obs_input: obs.reshape(rows, *self.obs_shape)}
        if masks is not None:
            feed[self._mask_input] = masks.reshape(rows, self.mask_size)
        results = self.session.run(self._outputs, feed)
        out = {}
        for name, value in zip(self._outputs, results, strict=True):
            value = np.asarray(value)
            out[name] = value.reshape(*lead, *value.shape[1:])
        out[self._outputs[0]] = out[self._outputs[0]].astype(self.action_dtype, copy=False)
        return out

    def act(self, observation: Any, mask: Any = None) -> np.ndarray:
        """The action the environment takes for ``observation`` (``mask``: True where an action is
        allowed, for policies trained with masks). Leading dimensions are kept: one observation gives
        one action, a batch (or a multi-agent row per agent) gives one per row."""
        return self.outputs(observation, mask)[self._outputs[0]]


# ------------------------------------------------------------------------------------ shadow mode


def parse_line(text: str) -> tuple[Any, Any]:
    """``(observation, mask)`` of one JSON line: ``{"obs": [...], "mask": [...]}`` or a bare list."""
    try:
        record = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BundleError(f"not JSON ({exc.msg} at column {exc.colno})") from None
    if isinstance(record, list):
        return record, None
    if isinstance(record, dict) and "obs" in record and set(record) <= {"obs", "mask"}:
        return record["obs"], record.get("mask")
    raise BundleError('expected {"obs": [...], "mask": [...]} (mask optional) or a bare list of numbers')


def serve(bundle: Bundle, lines: Iterable[str], write: Callable[[str], None]) -> int:
    """Answer every non-blank JSON line of ``lines`` with ``{"action": ...}`` on ``write``; return how
    many were answered. A bad line raises :class:`BundleError` naming its line number (the lines before
    it were answered)."""
    answered = 0
    for number, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        try:
            obs, mask = parse_line(text)
            action = bundle.act(obs, mask)
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
