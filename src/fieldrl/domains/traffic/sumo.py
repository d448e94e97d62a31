"""Where SUMO lives and how fieldrl talks to it (libsumo in-process, or TraCI over a socket).

``SUMO_HOME`` is taken from the ``eclipse-sumo`` PyPI package before ``libsumo``/``traci`` are
imported, so the tools (``netgenerate``, ``tlsCycleAdaptation.py``) and the simulator always come
from the same install. libsumo runs one simulation per process; :func:`start` enforces that with a
clear error instead of SUMO's own crash.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import os
import re
import subprocess
import sys
import weakref
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import sumo as _sumo_pkg

SUMO_HOME = Path(_sumo_pkg.SUMO_HOME)
os.environ.setdefault("SUMO_HOME", str(SUMO_HOME))
BIN = SUMO_HOME / "bin"
TOOLS = SUMO_HOME / "tools"

#: the env whose simulation libsumo runs (a weak reference: an env dropped unclosed frees the slot)
_libsumo_owner: weakref.ref[Any] | None = None
_labels = itertools.count()


#: lines traci and libsumo print that tell a fieldrl user nothing: a connection retry while SUMO is still
#: starting, and a pyarrow version notice about libsumo's own parquet output (fieldrl never uses it)
STDOUT_NOISE = (
    " Retrying in ",
    "Could not connect to TraCI server",
    "Warning! pyarrow ",
    " Try to uninstall pyarrow",
)


@contextlib.contextmanager
def quiet_stdout() -> Iterator[None]:
    """Drop traci's and libsumo's :data:`STDOUT_NOISE` lines; anything else they print still shows."""
    buffer = io.StringIO()
    try:
        with contextlib.redirect_stdout(buffer):
            yield
    finally:
        kept = [line for line in buffer.getvalue().splitlines() if not line.startswith(STDOUT_NOISE)]
        if kept:
            sys.stdout.write("\n".join(kept) + "\n")


def _owner() -> object | None:
    return None if _libsumo_owner is None else _libsumo_owner()


def binary(name: str) -> str:
    """Path of a SUMO executable (``sumo``, ``sumo-gui``, ``netgenerate``, ...)."""
    path = BIN / name
    if not path.exists():
        raise FileNotFoundError(f"{path} not found: is the eclipse-sumo package installed?")
    return str(path)


def tool(name: str) -> str:
    return str(TOOLS / name)


def python_tool_cmd(name: str) -> list[str]:
    return [sys.executable, tool(name)]


def start(cmd: list[str], owner: object, use_traci: bool) -> Any:
    """Start a simulation and return its handle (the ``libsumo`` module or a TraCI connection).

    :param cmd: SUMO command line without the binary name.
    :param owner: the object that will ``close`` this simulation (the libsumo slot is per process).
    :param use_traci: TraCI over a socket (several per process, GUI possible) instead of libsumo.
    """
    global _libsumo_owner
    if use_traci:
        import traci

        label = f"fieldrl-{os.getpid()}-{next(_labels)}"
        with quiet_stdout():
            traci.start([binary("sumo"), *cmd], label=label)
        return traci.getConnection(label)
    holder = _owner()
    if holder is not None and holder is not owner:
        raise RuntimeError(
            "libsumo runs one simulation per process and another traffic env holds it; "
            "close that env, use one env per process (subprocess vector envs) or set traci: true"
        )
    with quiet_stdout():
        import libsumo

    if _libsumo_owner is not None:  # this owner's last simulation, or one of an env dropped unclosed
        _release(libsumo)
    libsumo.start([binary("sumo"), *cmd])
    _libsumo_owner = weakref.ref(owner)
    return libsumo


def libsumo_in_use() -> bool:
    """Whether an env of this process holds the libsumo simulation now."""
    return _owner() is not None


def _release(libsumo: Any) -> None:
    """Close libsumo's simulation and free the slot, even if SUMO fails while closing."""
    global _libsumo_owner
    try:
        libsumo.close()
    except Exception:  # a simulation that raised mid-step may refuse to close cleanly; it is gone anyway
        pass
    finally:
        _libsumo_owner = None


def close(handle: Any, owner: object) -> None:
    """Close the simulation ``owner`` started (no-op when it has none)."""
    if handle is None:
        return
    if getattr(handle, "__name__", "") == "libsumo":
        if _owner() is owner:
            _release(handle)
        return
    with contextlib.suppress(Exception):  # a TraCI connection whose SUMO died: nothing left to close
        handle.close()


#: seconds SUMO may take to load a network and its inputs before :func:`load_error` gives up on it
LOAD_TIMEOUT_S = 300
_LOAD_CHECKED: dict[tuple[Any, ...], str | None] = {}
_LOADING = re.compile(r"^Loading (?:[\w-]+ )?[\w-]+ from '([^']*)'")


def load_error(
    net_file: Path, route_files: Sequence[Path] = (), additional_files: Sequence[Path] = (), begin_s: int = 0
) -> str | None:
    """What SUMO says when it refuses to start on these files, naming the file it was reading; None
    if it starts and simulates its first second.

    Run as a ``sumo`` process of its own (its messages are read, and libsumo stays free), once per
    process for the same files (as they are on disk).
    """
    files = [net_file, *route_files, *additional_files]
    key = (begin_s, *((str(f), *_stamp(f)) for f in files))
    if key not in _LOAD_CHECKED:
        _LOAD_CHECKED[key] = _sumo_load_error(net_file, route_files, additional_files, begin_s)
    return _LOAD_CHECKED[key]


def _stamp(path: Path) -> tuple[int, int]:
    try:
        stat = path.stat()
    except OSError:
        return (-1, -1)
    return (stat.st_mtime_ns, stat.st_size)


def _sumo_load_error(
    net_file: Path, route_files: Sequence[Path], additional_files: Sequence[Path], begin_s: int
) -> str | None:
    cmd = [binary("sumo"), "--verbose", "-n", str(net_file)]
    if route_files:
        cmd += ["-r", ",".join(str(f) for f in route_files)]
    if additional_files:
        cmd += ["-a", ",".join(str(f) for f in additional_files)]
    cmd += ["--begin", str(begin_s), "--end", str(begin_s + 1), "--no-step-log", "true"]
    cmd += ["--no-warnings", "true", "--duration-log.disable", "true"]
    try:
        result = subprocess.run(
            cmd,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=LOAD_TIMEOUT_S,
            env={**os.environ, "SUMO_HOME": str(SUMO_HOME)},
        )
    except subprocess.TimeoutExpired:
        return f"SUMO did not finish loading within {LOAD_TIMEOUT_S} s"
    if result.returncode == 0:
        return None
    reading = [m.group(1) for line in result.stdout.splitlines() if (m := _LOADING.match(line))]
    said = result.stderr.strip().splitlines() or [f"sumo exited with status {result.returncode}"]
    errors = [line.removeprefix("Error: ") for line in said if line.startswith("Error")]
    where = f"{reading[-1]}: " if reading else ""  # SUMO names the file only in its --verbose progress
    return f"{where}{' '.join((errors or said[-1:])[0].split())[:300]}"
