"""The refusals recorded beside a chain, as ``verify`` and ``report`` name them.

Two files of ``<chain>.tlog/`` (docs/chain-format.md 13.4): ``refusals``, one JSON line each time the
writer refused to sign (the chain was truncated, rewritten, broke a link or forked from what it
signed), and ``witness-refusals``, one JSON line per witness that refused a checkpoint. Both are read
bounded, without blocking (a FIFO or a device is named, never waited on), each line parsed strictly
and validated (names and causes of at most 256 characters, none of them a control character); a line
that is not a refusal is counted, never shown (the files are inputs).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from otel_route_shadow.files import FileRefused
from otel_route_shadow.logstore import REFUSALS_FILE, WITNESS_REFUSALS_FILE, LogStore
from otel_route_shadow.strict_json import StrictJSONError, loads_strict

__all__ = ["Refusals", "WitnessRefusal", "WriterRefusal", "read_refusals"]

_Refusal = TypeVar("_Refusal", bound=BaseModel)
_Name = Annotated[str, Field(max_length=256, pattern=r"^[^\x00-\x1f\x7f-\x9f]*$")]
"""A name or cause as printed: no control character (a hostile file never drives the terminal)."""
_Count = Annotated[int, Field(ge=-1, lt=2**63)]


class WriterRefusal(BaseModel):
    """A line of ``refusals``: why the writer stopped signing, at which signed size (and seq)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    reason: _Name
    origin: _Name | None = None
    tree_size: _Count | None = None
    seq: _Count | None = None

    def sentence(self) -> str:
        at = f" at seq {self.seq}" if self.seq is not None else ""
        size = f" (signed size {self.tree_size})" if self.tree_size is not None else ""
        return f"the writer refused to sign: {self.reason}{at}{size}"


class WitnessRefusal(BaseModel):
    """A line of ``witness-refusals``: which witness refused which checkpoint, and why."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    witness: _Name
    cause: _Name
    origin: _Name | None = None
    size: _Count | None = None

    def sentence(self) -> str:
        size = f" the checkpoint of size {self.size}" if self.size is not None else " a checkpoint"
        return f"witness {self.witness} refused{size}: {self.cause}"


@dataclass(frozen=True, slots=True)
class Refusals:
    """The refusals beside one chain; ``problems`` names what could not be read (file and line)."""

    writer: tuple[WriterRefusal, ...] = ()
    witnesses: tuple[WitnessRefusal, ...] = ()
    problems: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {
            "writer": [refusal.model_dump() for refusal in self.writer],
            "witnesses": [refusal.model_dump() for refusal in self.witnesses],
            "problems": list(self.problems),
        }

    def lines(self) -> list[str]:
        """One sentence per refusal and per problem; none when nothing was refused."""
        return [
            *(refusal.sentence() for refusal in self.writer),
            *(refusal.sentence() for refusal in self.witnesses),
            *self.problems,
        ]


def read_refusals(chain_path: str | os.PathLike[str]) -> Refusals:
    """The refusals recorded in the log directory of the chain at ``chain_path`` (never raises)."""
    store = LogStore(chain_path)
    problems: list[str] = []
    writer = _read(store, REFUSALS_FILE, WriterRefusal, problems)
    witnesses = _read(store, WITNESS_REFUSALS_FILE, WitnessRefusal, problems)
    return Refusals(tuple(writer), tuple(witnesses), tuple(problems))


def _read(store: LogStore, name: str, model: type[_Refusal], problems: list[str]) -> list[_Refusal]:
    path = store.file(name)
    try:
        data = store.refusals_file(name)
    except FileNotFoundError:
        return []
    except FileRefused as exc:
        problems.append(f"{path}: not read: {exc.problem}")
        return []
    except OSError as exc:
        problems.append(f"{path}: not read: {exc.strerror or type(exc).__name__}")
        return []
    found: list[_Refusal] = []
    bad: list[int] = []
    for number, line in enumerate(data.split(b"\n"), start=1):
        if not line.strip():
            continue
        try:
            found.append(model.model_validate(loads_strict(line)))
        except (StrictJSONError, ValidationError, ValueError):
            bad.append(number)
    if bad:
        problems.append(f"{path}: {len(bad)} line(s) that are not refusals (line {bad[0]} first)")
    return found
