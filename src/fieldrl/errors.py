"""Errors a user can fix: the CLI prints them as one message and exits with status 2."""

from __future__ import annotations

from typing import Any


class FieldrlError(Exception):
    """A problem with user input (file, parameter, CLI argument) or a run folder."""


class ScenarioError(FieldrlError):
    """A scenario file that is not valid.

    :param source: file path or built-in name the problem is in.
    :param field: dotted path of the offending field (``policies.learned[0].algorithm``).
    :param value: the bad value, if there is one.
    :param allowed: what would be accepted, in words.
    """

    def __init__(self, source: str, field: str, value: Any, allowed: str):
        self.source, self.field, self.value, self.allowed = source, field, value, allowed
        where = f"{source}: {field}" if field else source
        shown = "" if value is _MISSING else f" = {_short(value)!s}"
        super().__init__(f"{where}{shown}: {allowed}")


class _Missing:
    def __repr__(self) -> str:
        return "<missing>"


_MISSING: Any = _Missing()
MISSING = _MISSING


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class Terminated(KeyboardInterrupt):
    """SIGTERM, handled like Ctrl-C (workers stopped, nothing half-written) but reported as exit 143."""
