"""The traffic pages of the report (filled in below)."""

from __future__ import annotations

from typing import Any


def report_section(ctx: Any) -> list[Any]:
    return []
