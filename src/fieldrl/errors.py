"""Errors a user can fix: the CLI prints them as one message and exits with status 2."""

from __future__ import annotations

import re
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
        shown = "" if value is _MISSING else f" = {short_repr(value)!s}"
        super().__init__(f"{where}{shown}: {allowed}")


class _Missing:
    def __repr__(self) -> str:
        return "<missing>"


_MISSING: Any = _Missing()
MISSING = _MISSING


def short_repr(value: Any, limit: int = 80) -> str:
    """``repr(value)``, cut to ``limit`` characters for a one-line message."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class Terminated(KeyboardInterrupt):
    """SIGTERM, handled like Ctrl-C (workers stopped, nothing half-written) but reported as exit 143."""


def file_shape_error(exc: Any, source: str) -> FieldrlError:
    """One message for a file fieldrl wrote that no longer has the shape fieldrl writes.

    :param exc: the ``pydantic.ValidationError`` raised on reading it back (its first problem is named).
    :param source: the file.
    """
    err = exc.errors()[0]
    field = ".".join(str(p) for p in err["loc"] if not (isinstance(p, str) and "[" in p))
    value = MISSING if err["type"] in ("missing", "extra_forbidden") else err.get("input", MISSING)
    message = {"missing": "required field is missing", "extra_forbidden": "unknown field"}.get(
        err["type"], re.sub(r" or instance of \w+", "", err["msg"].removeprefix("Value error, "))
    )
    return ScenarioError(source, field, value, f"{message} (not what fieldrl writes: was the file edited?)")
