"""Progress display for jobs: one rich bar per running job, one overall bar."""

from __future__ import annotations

import time
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn


class JobProgress:
    """Consumes job events ``("start"|"update"|"done", key, value)``; a context manager."""

    def __init__(self, title: str, n_jobs: int, console: Console | None = None, enabled: bool = True):
        self.enabled = enabled
        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console or Console(stderr=True),
            transient=False,
            disable=not enabled,
        )
        self.title, self.n_jobs = title, n_jobs
        self._tasks: dict[str, Any] = {}
        self._finished = 0
        # Without a terminal (log files, CI) live bars don't render: print a line per finished job.
        self._lines = enabled and not self.progress.console.is_terminal
        self._started: dict[str, float] = {}

    def __enter__(self) -> JobProgress:
        self.progress.start()
        self._overall = self.progress.add_task(f"[bold]{self.title}", total=self.n_jobs)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.progress.stop()

    def __call__(self, event: tuple[Any, ...]) -> None:
        kind, key, value = event
        if kind == "start":
            # escaped: a job's setting is shown in brackets ("[level-0]"), which rich would take for markup
            self._tasks[key] = self.progress.add_task(escape(f"  {key}"), total=value)
            self._started[key] = time.monotonic()
        elif kind == "update" and key in self._tasks:
            self.progress.update(self._tasks[key], completed=value)
        elif kind == "done":
            task = self._tasks.pop(key, None)
            if task is not None:
                self.progress.update(task, completed=value)
                self.progress.remove_task(task)
            self.progress.advance(self._overall)
            self._finished += 1
            if self._lines:
                seconds = time.monotonic() - self._started.pop(key, time.monotonic())
                self.progress.console.print(
                    f"{self.title} [{self._finished}/{self.n_jobs}] {key} done in {seconds:.0f} s",
                    highlight=False,
                    markup=False,
                )
