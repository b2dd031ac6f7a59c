"""``audit`` subcommand (filled in by its issue)."""

from __future__ import annotations

import argparse
from typing import Any


def register(sub: Any) -> None:
    _ = (sub, argparse)
