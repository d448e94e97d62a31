"""Worker processes that never outlive the process that started them.

A pool worker, the multiprocessing manager or a simulator worker whose parent is killed (``kill -9``,
the OOM killer) would otherwise run on, writing models and checkpoints into a run folder that a
``--resume`` may already be writing. Each child calls :func:`die_with_parent` first thing: on Linux
the kernel sends it SIGKILL when its parent dies (``prctl(PR_SET_PDEATHSIG)``); everywhere a watchdog
thread notices the parent is gone within half a second, and :func:`orphaned` lets a writer check
before it replaces a file.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
import time

PR_SET_PDEATHSIG = 1  # linux/prctl.h

_parent_pid: int | None = None


def _parent_death_signal() -> None:
    """Ask the kernel to SIGKILL this process when its parent dies (Linux only; no-op elsewhere)."""
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # no prctl: the watchdog below still works
        pass


def _watch(parent_pid: int, poll_s: float) -> None:
    while True:
        time.sleep(poll_s)
        if os.getppid() != parent_pid:
            os._exit(1)


def die_with_parent(parent_pid: int, poll_s: float = 0.5) -> None:
    """Make this (child) process end as soon as ``parent_pid``, its parent, is gone.

    :param parent_pid: the parent's pid, passed from the parent (``os.getppid()`` in the child could
        already be the reaper's if the parent died during start-up).
    :param poll_s: watchdog period in seconds.
    """
    global _parent_pid
    _parent_death_signal()
    if os.getppid() != parent_pid:  # the parent died before the signal was armed
        os._exit(1)
    _parent_pid = parent_pid
    threading.Thread(
        target=_watch, args=(parent_pid, poll_s), daemon=True, name="fieldrl-parent-watch"
    ).start()


def orphaned() -> bool:
    """True in a child whose parent (registered by :func:`die_with_parent`) is gone."""
    return _parent_pid is not None and os.getppid() != _parent_pid
