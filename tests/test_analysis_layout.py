"""Modules a newcomer can hold (issue 23 item 6, for the report area): ``analysis/`` computes result
objects and renders nothing; text and HTML for report, whatif and matrix live in one layer,
``cli/``; ``cli`` reaches ``analysis`` through its ``__init__`` only; no module of either folder is
over 600 lines."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import otel_route_shadow.analysis as analysis

PACKAGE = Path(__file__).parent.parent / "otel_route_shadow"
MAX_LINES = 600
RENDERING_MODULES = frozenset({"html", "csv", "io"})
"""What rendering imports: ``html.escape``, ``csv`` writers, string buffers."""


def _modules(folder: str) -> list[Path]:
    return sorted((PACKAGE / folder).glob("*.py"))


def _imports(path: Path) -> list[str]:
    names = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.append(node.module)
    return names


@pytest.mark.parametrize(
    "path", _modules("analysis") + _modules("cli"), ids=lambda p: f"{p.parent.name}/{p.name}"
)
def test_no_module_is_over_600_lines(path: Path) -> None:
    assert len(path.read_text(encoding="utf-8").splitlines()) <= MAX_LINES


@pytest.mark.parametrize("path", _modules("analysis"), ids=lambda p: p.name)
def test_analysis_renders_nothing(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    assert not set(_imports(path)) & RENDERING_MODULES
    functions = [node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)]
    assert not [name for name in functions if name.startswith(("render_", "format_report", "format_whatif"))]
    assert "<svg" not in path.read_text(encoding="utf-8")


@pytest.mark.parametrize("path", _modules("cli"), ids=lambda p: p.name)
def test_cli_uses_analysis_through_its_init(path: Path) -> None:
    deep = [name for name in _imports(path) if name.startswith("otel_route_shadow.analysis.")]
    assert deep == []


def test_the_public_api_resolves() -> None:
    missing = [name for name in analysis.__all__ if not hasattr(analysis, name)]
    assert missing == []


def test_the_check_catches_a_deep_import(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text("from otel_route_shadow.analysis.report import build_report\nimport html\n")
    assert _imports(sample) == ["otel_route_shadow.analysis.report", "html"]
