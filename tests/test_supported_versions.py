"""The supported OpenTelemetry range is stated once, in pyproject.toml, and is what the tests run on: the
``oldest`` extra pins each floor the dependencies claim, the ``newest`` extra the newest release line, and
the environment under test holds one of the two sets (`make test`: .venv with ``newest``, .venv-oldest
with ``oldest`` for the tests marked ``sdk``)."""

from __future__ import annotations

import tomllib
from importlib.metadata import version
from pathlib import Path

from opentelemetry.sdk.version import __version__ as sdk_version
from packaging.requirements import Requirement
from packaging.version import Version

PROJECT = tomllib.loads((Path(__file__).parent.parent / "pyproject.toml").read_text(encoding="utf-8"))[
    "project"
]
EXTRAS = PROJECT["optional-dependencies"]


def _requirements(texts: list[str]) -> dict[str, Requirement]:
    return {(r := Requirement(text)).name: r for text in texts}


def test_the_oldest_extra_pins_every_floor_the_dependencies_claim() -> None:
    claimed = _requirements(PROJECT["dependencies"] + EXTRAS["distro"])
    oldest = _requirements(EXTRAS["oldest"])
    for name, pinned in oldest.items():
        (spec,) = (s for s in pinned.specifier if s.operator == "==")
        floors = [s.version for s in claimed[name].specifier if s.operator == ">="]
        assert [Version(v) for v in floors] == [Version(spec.version)], (name, str(claimed[name]))
    opentelemetry = {name for name in claimed if name.startswith("opentelemetry-")}
    assert opentelemetry <= set(oldest) and opentelemetry <= set(_requirements(EXTRAS["newest"]))


def test_the_environment_under_test_is_the_oldest_or_the_newest_stated() -> None:
    installed = {name: Version(version(name)) for name in _requirements(EXTRAS["oldest"])}
    matches = {
        extra: all(
            r.specifier.contains(installed[name], prereleases=True)
            for name, r in _requirements(EXTRAS[extra]).items()
        )
        for extra in ("oldest", "newest")
    }
    assert matches["oldest"] or matches["newest"], installed
    assert Version(sdk_version) == installed["opentelemetry-sdk"]
