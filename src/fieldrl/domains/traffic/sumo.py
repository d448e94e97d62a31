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
import sys
import weakref
from collections.abc import Iterator
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
