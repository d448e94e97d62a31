"""The tuning folder's Optuna storage, ``study.db``: opened only as a regular SQLite file of the
folder (never a link, FIFO or device), its errors turned into one line naming it, and its trials
read back as fieldrl wrote them or refused with one line."""

from __future__ import annotations

import contextlib
import json
import math
import os
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from fieldrl.errors import FieldrlError, short_repr
from fieldrl.files import open_regular

DB_FILE = "study.db"
#: SQLite's side files of study.db (rollback journal, write-ahead log and its shared memory)
DB_SIDE_FILES = ("-journal", "-wal", "-shm")
#: the first bytes of every SQLite database file
SQLITE_MAGIC = b"SQLite format 3\x00"


class _TrialAttrs(BaseModel):
    """A trial's user attributes as fieldrl writes them (others are not read)."""

    model_config = ConfigDict(extra="ignore", strict=True)
    hyperparameters: dict[str, Any] | None = None
    n_envs: Annotated[int, Field(ge=1)] | None = None
    params: dict[str, Any] | None = None
    handset: bool = False
    interrupted: bool = False
    surplus: bool = False
    error: str | None = None
    num_timesteps: Annotated[int, Field(ge=0)] | None = None
    gradient_updates: Annotated[int, Field(ge=0)] | None = None


def storage_url(folder: Path) -> str:
    """The study storage's URL: the folder is resolved, never study.db (a link there is refused)."""
    return f"sqlite:///{folder.resolve() / DB_FILE}"


def storage(folder: Path, existing: bool = True) -> Any:
    """The folder's Optuna storage, once study.db and its side files are checked (see _check_db).

    :param existing: study.db must be there already (every use but creating the folder).
    """
    _check_db(folder, existing)
    from optuna.storages import RDBStorage

    return RDBStorage(storage_url(folder), engine_kwargs={"connect_args": {"timeout": 120}})


def _check_db(folder: Path, existing: bool) -> None:
    """study.db and SQLite's side files are regular files of the folder, and study.db is an SQLite file.

    SQLite opens them by name: through a link it would write the study's tables (or a journal) to
    wherever the link points, and a FIFO or device is no database. Each is opened here without
    following links (``open_regular``), which refuses all of those before SQLite sees them.
    """
    db = folder / DB_FILE
    for side in DB_SIDE_FILES:
        with contextlib.suppress(FileNotFoundError):
            os.close(open_regular(folder / (DB_FILE + side), follow=False))
    try:
        with os.fdopen(open_regular(db, follow=False), "rb") as fh:
            header = fh.read(len(SQLITE_MAGIC))
    except FileNotFoundError:
        if existing:
            raise FieldrlError(
                f"{db}: missing; it holds the tuning folder's studies: restore it, or start a new "
                "tuning folder"
            ) from None
        return
    if existing and not header:  # SQLite would take an empty file for a new, empty database
        raise FieldrlError(
            f"{db}: empty; it holds none of the tuning folder's studies: restore it, or start a new "
            "tuning folder"
        )
    if header and header != SQLITE_MAGIC:
        raise FieldrlError(
            f"{db}: not an SQLite database (its first bytes are not SQLite's header): restore it from a "
            "copy, or start a new tuning folder"
        )


def check_studies_exist(folder: Path, storage: Any, names: list[str], named_by: str) -> None:
    """Every study the settings name is in study.db: a lost one is not silently started over.

    :param named_by: the file that names the studies, for the message.
    """
    import optuna

    held = set(optuna.get_all_study_names(storage))
    for name in names:
        if name not in held:
            raise FieldrlError(
                f"{folder / DB_FILE}: does not hold study {name!r} (named by {named_by}): restore "
                "it, or start a new tuning folder"
            )


# ----------------------------------------------------------------------------- errors as one line


@contextlib.contextmanager
def storage_errors(folder: Path) -> Iterator[None]:
    """Errors of the study storage (SQLite, through SQLAlchemy and Optuna) as one line naming study.db."""
    from optuna.exceptions import StorageInternalError
    from sqlalchemy.exc import SQLAlchemyError

    try:
        yield
    except (SQLAlchemyError, StorageInternalError, sqlite3.Error) as exc:
        raise _storage_problem(folder, exc) from None


def is_storage_error(exc: BaseException) -> bool:
    from optuna.exceptions import StorageInternalError
    from sqlalchemy.exc import SQLAlchemyError

    return isinstance(exc, (SQLAlchemyError, StorageInternalError, sqlite3.Error))


def _root_cause(exc: BaseException) -> BaseException:
    """The innermost error (sqlite3's, under SQLAlchemy's and Optuna's wrappers)."""
    seen = {id(exc)}
    while (inner := getattr(exc, "orig", None) or exc.__cause__) is not None and id(inner) not in seen:
        seen.add(id(inner))
        exc = inner
    return exc


def resume_advice(folder: Path) -> str:
    return f"resume with `fieldrl tune --resume {folder}`"


def _storage_problem(folder: Path, exc: BaseException) -> FieldrlError:
    """One line for a failed read or write of study.db: what SQLite said and what to do about it."""
    db = folder / DB_FILE
    cause = _root_cause(exc)
    reason = " ".join(str(cause).split())[:200] or type(cause).__name__
    lowered = reason.lower()
    if "is full" in lowered or getattr(cause, "sqlite_errorcode", None) == 13:  # SQLITE_FULL
        return FieldrlError(
            f"{db}: cannot write ({reason}); trials finished before are kept — free space, then "
            f"{resume_advice(folder)}"
        )
    if "locked" in lowered or "busy" in lowered:
        return FieldrlError(
            f"{db}: {reason}: another program holds the study storage; let it finish, then retry"
        )
    return FieldrlError(
        f"{db}: cannot be used as the study storage ({reason}): restore it from a copy, or start a new "
        "tuning folder"
    )


# ----------------------------------------------------------------------------- reading trials back


def checked_trials(folder: Path, study: Any) -> list[Any]:
    """The study's trials, each checked to be as fieldrl writes it (study.db may have been edited).

    A complete trial has a finite value and the configuration it ran (``hyperparameters``,
    ``n_envs``); every reported intermediate value is a number; the user attributes have their
    types. Anything else is one line naming the study, the trial and what is wrong with it.
    """
    try:
        trials = study.get_trials(deepcopy=False)
    except (ValueError, TypeError, LookupError, AssertionError) as exc:  # a field Optuna cannot decode
        raise _undecodable_trial(folder, study, exc) from None
    for t in trials:
        _check_trial(folder, study.study_name, t)
    return trials


def _trial_problem(
    folder: Path, study: str, number: int, what: str, value: Any, allowed: str
) -> FieldrlError:
    return FieldrlError(
        f"{folder / DB_FILE}: study {study!r}, trial {number}: {what} = {short_repr(value)}: allowed: "
        f"{allowed} (not what fieldrl writes: was study.db edited? restore it from a copy, or start a "
        "new tuning folder)"
    )


def _check_trial(folder: Path, study: str, t: Any) -> None:
    from optuna.trial import TrialState

    try:
        attrs = _TrialAttrs.model_validate(t.user_attrs)
    except ValidationError as exc:
        err = exc.errors()[0]
        name = ".".join(str(p) for p in err["loc"])
        value = t.user_attrs.get(str(err["loc"][0]), err.get("input"))
        message = err["msg"].removeprefix("Value error, ")
        raise _trial_problem(folder, study, t.number, f"user attribute {name}", value, message) from None
    for step, value in t.intermediate_values.items():
        if not _is_number(value):
            raise _trial_problem(
                folder, study, t.number, f"intermediate value at step {step}", value, "a number"
            )
    if t.state != TrialState.COMPLETE:
        return
    value = t.values[0] if t.values and len(t.values) == 1 else t.values
    if not _is_number(value) or not math.isfinite(value):
        raise _trial_problem(folder, study, t.number, "value", value, "a finite number for a complete trial")
    for name in ("hyperparameters", "n_envs"):
        if getattr(attrs, name) is None:
            raise _trial_problem(
                folder, study, t.number, f"user attribute {name}", None, "present on a complete trial"
            )


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _undecodable_trial(folder: Path, study: Any, exc: Exception) -> FieldrlError:
    """One line for trials Optuna cannot read back, naming the trial and what of it where that is found."""
    try:
        found = _first_undecodable(study)
    except (ValueError, TypeError, LookupError, AssertionError):  # a row even the table models cannot load
        found = None
    if found is None:
        return FieldrlError(
            f"{folder / DB_FILE}: study {study.study_name!r}: its trials cannot be read back "
            f"({type(exc).__name__}: {short_repr(str(exc))}); was study.db edited? restore it from a copy, "
            "or start a new tuning folder"
        )
    return _trial_problem(folder, study.study_name, *found)


def _first_undecodable(study: Any) -> tuple[int, str, Any, str] | None:
    """``(trial number, what, stored value, what is allowed)`` of the first stored trial field Optuna
    cannot decode, found through Optuna's own table models: its reader stops at such a field (a
    ``JSONDecodeError``, an ``AssertionError`` on a NULL value) without saying where it is."""
    from optuna.distributions import json_to_distribution
    from optuna.storages._rdb import models

    def fails(decode: Callable[[], Any]) -> bool:
        try:
            decode()
        except (ValueError, TypeError, LookupError, AssertionError):
            return True
        return False

    value_of = models.TrialValueModel.stored_repr_to_value
    intermediate_of = models.TrialIntermediateValueModel.stored_repr_to_intermediate_value
    storage = getattr(study._storage, "_backend", study._storage)  # under Optuna's cache
    session = storage.scoped_session()
    try:
        query = session.query(models.TrialModel).filter(models.TrialModel.study_id == study._study_id)
        for t in query.order_by(models.TrialModel.number):
            for kind, rows in (
                ("user attribute", t.user_attributes),
                ("system attribute", t.system_attributes),
            ):
                for row in rows:
                    if fails(lambda row=row: json.loads(row.value_json)):
                        return (
                            t.number,
                            f"{kind} {row.key}",
                            row.value_json,
                            "valid JSON, as Optuna writes it",
                        )
            for p in t.params:
                if fails(lambda p=p: json_to_distribution(p.distribution_json)):
                    allowed = "valid JSON, as Optuna writes it"
                    return t.number, f"distribution of parameter {p.param_name}", p.distribution_json, allowed
                dist = json_to_distribution(p.distribution_json)
                if fails(lambda p=p, dist=dist: dist.to_external_repr(p.param_value)):
                    return t.number, f"parameter {p.param_name}", p.param_value, f"a value of {dist}"
            for v in t.values:
                if fails(lambda v=v: value_of(v.value, v.value_type)):
                    return t.number, "value", v.value, f"a number (stored as {v.value_type.name})"
            for i in t.intermediate_values:
                if fails(lambda i=i: intermediate_of(i.intermediate_value, i.intermediate_value_type)):
                    what = f"intermediate value at step {i.step}"
                    return t.number, what, i.intermediate_value, "a number"
    finally:
        storage.scoped_session.remove()
    return None
