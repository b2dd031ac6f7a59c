"""The chain's errors: one base class, one subclass per thing a caller may want to tell apart."""

from __future__ import annotations

__all__ = [
    "ChainCorruptError",
    "ChainError",
    "ChainFormatError",
    "ChainLockTimeout",
    "ChainPathError",
    "ChainPayloadError",
]


class ChainError(Exception):
    """Base class of the chain's errors."""


class ChainPayloadError(ChainError, ValueError):
    """The payload holds a value the format cannot carry; nothing was written."""


class ChainCorruptError(ChainError):
    """The chain's last complete line is not a record, so there is no head to link to. Nothing was
    written; ``otel-route-shadow verify`` names the problem."""


class ChainFormatError(ChainError, ValueError):
    """A reader met a complete line that is not a record."""


class ChainPathError(ChainError, OSError):
    """The chain path names something other than a regular file (a FIFO, a device, a directory);
    nothing is read from or written to it."""


class ChainLockTimeout(ChainError, TimeoutError):
    """Another process held the chain's file lock for longer than the writer's ``lock_timeout``."""
