"""Model weights that load without running code: safetensors files, models rebuilt from the scenario.

An SB3 ``model.zip`` holds pickles (cloudpickle of the policy class, spaces, schedules), so
loading one runs whatever code a tampered file carries, whatever hash is stored beside it.
fieldrl therefore never loads a zip. A trained policy is saved as a safetensors file (plain
tensors plus a JSON header); to load it, the model is rebuilt from the validated scenario entry
(algorithm, policy class, hyperparameters) on the domain's own environment, and the tensors
are copied in with ``load_state_dict(strict=True)``. A file whose tensors do not fit that
model is refused.

The header's ``fieldrl`` entry records what the model itself says about its training: env
steps trained (``num_timesteps``), gradient updates (optimizer steps counted while training),
and which validation checkpoint was kept. Reports read these from the file, not from the
scenario's stated budget.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from pydantic import ValidationError
from safetensors import SafetensorError, safe_open
from safetensors.torch import load as load_bytes
from safetensors.torch import save as save_bytes

from fieldrl.errors import FieldrlError, file_shape_error
from fieldrl.files import read_regular
from fieldrl.policies.record import FORMAT, TrainingRecord

#: header key of fieldrl's training record in the safetensors metadata
HEADER_KEY = "fieldrl"


class UpdateCounter:
    """Counts gradient updates: ``step()`` calls of every optimizer the model's networks use.

    SB3's own ``_n_updates`` counts PPO epochs, not minibatch steps, so it cannot say how
    many times the weights moved; optimizer step hooks can, for every algorithm alike. The
    count reported is the largest over optimizers (the critic's, for TD3's delayed actor).
    """

    def __init__(self, model: Any, start: int = 0) -> None:
        self.counts: dict[int, int] = {}
        self.start = int(start)
        for optimizer in _optimizers(model):
            self.counts[id(optimizer)] = 0
            optimizer.register_step_post_hook(self._hook)

    def _hook(self, optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        self.counts[id(optimizer)] = self.counts.get(id(optimizer), 0) + 1

    @property
    def total(self) -> int:
        return self.start + max(self.counts.values(), default=0)


def _optimizers(model: Any) -> list[torch.optim.Optimizer]:
    found: dict[int, torch.optim.Optimizer] = {}
    holders = [model, *model.policy.modules()]
    for holder in holders:
        for value in vars(holder).values():
            if isinstance(value, torch.optim.Optimizer):
                found[id(value)] = value
    return list(found.values())


def policy_bytes(state_dict: dict[str, torch.Tensor], record: dict[str, Any]) -> bytes:
    """A safetensors file of ``state_dict`` with ``record`` (JSON-able) in its header."""
    tensors = {k: v.detach().clone().contiguous().cpu() for k, v in state_dict.items()}
    header = {HEADER_KEY: json.dumps({"format": FORMAT, **record}, sort_keys=True)}
    return save_bytes(tensors, metadata=header)


def read_record(path: Path) -> dict[str, Any]:
    """The training record in a weights file's header (no tensors are read), its shape checked."""
    try:
        with safe_open(str(path), framework="pt") as handle:
            header = handle.metadata() or {}
        record = json.loads(header.get(HEADER_KEY, "{}"))
    except (OSError, ValueError, SafetensorError) as exc:
        raise FieldrlError(f"{path}: not a fieldrl weights file ({exc})") from None
    try:
        return TrainingRecord.model_validate(record).model_dump(exclude_unset=True)
    except ValidationError as exc:
        raise file_shape_error(exc, f"{path} (training record)") from None


def record_of(data: bytes) -> dict[str, Any]:
    """The training record in the header of a weights file's bytes (as :func:`read_record`)."""
    try:
        size = int.from_bytes(data[:8], "little")
        header = json.loads(data[8 : 8 + size])
        return json.loads(header.get("__metadata__", {}).get(HEADER_KEY, "{}"))
    except (ValueError, TypeError, AttributeError) as exc:
        raise FieldrlError(f"not a fieldrl weights file ({exc})") from None


def read_weights(path: Path) -> dict[str, torch.Tensor]:
    try:
        return load_bytes(read_regular(path))
    except (OSError, ValueError, RuntimeError, SafetensorError) as exc:
        raise FieldrlError(f"{path}: not a fieldrl weights file ({exc})") from None


def load_into(model: Any, tensors: dict[str, torch.Tensor], source: str) -> None:
    """Copy ``tensors`` into ``model.policy``; refuse a file that does not fit the rebuilt model."""
    try:
        model.policy.load_state_dict(tensors, strict=True)
    except RuntimeError as exc:
        first = " ".join(str(exc).split())[:300]
        raise FieldrlError(
            f"{source}: these weights do not fit the model the scenario describes ({first}); "
            "was the scenario changed after training?"
        ) from None
