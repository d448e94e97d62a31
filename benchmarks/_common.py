"""What every benchmark records beside its numbers, and how it writes them."""

from __future__ import annotations

import json
import os
import platform
import sys
from pathlib import Path
from typing import Any

from fieldrl.files import atomic_write_bytes


def machine_info(**versions: str) -> dict[str, Any]:
    """CPU, cores, load at start (these machines are shared), platform and the given versions."""
    cpu = platform.processor()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "load_average_1min_at_start": os.getloadavg()[0],
        "platform": platform.platform(),
        "python": platform.python_version(),
        **versions,
    }


def write_result(path: Path, data: dict[str, Any]) -> Path:
    """Write the result JSON atomically, so an interrupted benchmark keeps the previous file.

    ``--quick`` results go to ``results/quick/``: a smoke run never replaces the full figures the
    README quotes."""
    if quick_mode():
        path = path.parent / "quick" / path.name
        data = {**data, "quick": True}
    atomic_write_bytes(path, (json.dumps(data, indent=2) + "\n").encode())
    return path


def quick_mode() -> bool:
    """``--quick`` on the command line: a smaller, faster version (``fieldrl bench --quick``)."""
    return "--quick" in sys.argv[1:]
