"""The core is pure, and the dependencies point one way: shell -> core, never core -> shell, and
between the shell's folders only down the table in ``SHELL_MAY_IMPORT`` (README, "Layout"). A folder's
public API is what its ``__init__.py`` re-exports: an import from another folder names the folder's
package and a name in its ``__all__``, never a submodule. No module is over :data:`MAX_MODULE_LINES`.

An AST check over every module of ``otel_route_shadow/core``: imports come from an allow-list of
computation-only standard modules, pydantic and the core itself; no I/O, clock, randomness, logging
or OpenTelemetry; no calls to ``open``/``print``/``input``/``eval``/``exec``; no module-level mutable
state (best effort: mutable literals, ``global``, module-level mutation). A runtime check confirms
that importing the core loads neither OpenTelemetry nor any other part of the package. The log's spec,
``otel_route_shadow/tlog``, is held to the same rules with a wider allow-list (``base64``, ``struct``,
``cryptography``...) and no other part of the package: its storage and I/O are ``logstore``.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

PACKAGE = Path(__file__).parent.parent / "otel_route_shadow"
CORE = PACKAGE / "core"

ALLOWED_MODULES = frozenset(
    {
        "__future__",
        "collections",
        "collections.abc",
        "dataclasses",
        "enum",
        "functools",
        "hashlib",
        "itertools",
        "json",
        "math",
        "operator",
        "re",
        "string",
        "types",
        "typing",
        "unicodedata",
        "pydantic",
        "pydantic_core",
    }
)
FORBIDDEN_CALLS = frozenset(
    {"open", "print", "input", "eval", "exec", "compile", "__import__", "breakpoint", "globals", "setattr"}
)
MUTABLE_FACTORIES = frozenset(
    {"list", "dict", "set", "bytearray", "defaultdict", "deque", "OrderedDict", "Counter"}
)


def _imported_modules(tree: ast.Module, module: str) -> list[tuple[int, str]]:
    found: list[tuple[int, str]] = []
    package = module.rsplit(".", 1)[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
                name = ".".join([*base, *([node.module] if node.module else [])])
            else:
                name = node.module or ""
            found.append((node.lineno, name))
    return found


def _allowed(name: str) -> bool:
    return (
        name in ALLOWED_MODULES
        or name == "otel_route_shadow.core"
        or name.startswith("otel_route_shadow.core.")
    )


TLOG_ALLOWED_MODULES = ALLOWED_MODULES | {"base64", "binascii", "bisect", "struct"}
"""The pure log (``tlog/``, the spec: Merkle math, notes, checkpoints, proofs, tile arithmetic) may also
use these and ``cryptography`` (Ed25519), but no I/O, clock, thread or other part of the package."""


def _tlog_allowed(name: str) -> bool:
    return (
        name in TLOG_ALLOWED_MODULES
        or name == "cryptography"
        or name.startswith("cryptography.")
        or name == "otel_route_shadow.tlog"
        or name.startswith("otel_route_shadow.tlog.")
    )


def purity_violations(source: str, module: str, allowed: Callable[[str], bool] = _allowed) -> list[str]:
    """Every way ``source`` breaks the core's rules (``allowed``: the imports it may make), as ``line:
    problem`` strings."""
    tree = ast.parse(source)
    problems = [
        f"{line}: imports {name}" for line, name in _imported_modules(tree, module) if not allowed(name)
    ]
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in FORBIDDEN_CALLS:
            problems.append(f"{node.lineno}: calls {node.func.id}()")
        if isinstance(node, ast.Global | ast.Nonlocal):
            problems.append(f"{node.lineno}: {type(node).__name__.lower()} statement")
    for node in tree.body:
        targets: list[ast.expr] = []
        value: ast.expr | None = None
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign):
            targets, value = [node.target], node.value
        elif isinstance(node, ast.AugAssign):
            problems.append(f"{node.lineno}: module-level augmented assignment")
            continue
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            func = node.value.func
            if isinstance(func, ast.Attribute):  # e.g. TABLE.update(...), ITEMS.append(...)
                problems.append(f"{node.lineno}: module-level call of .{func.attr}() (mutation after import)")
            continue
        else:
            continue
        names = [t.id for t in targets if isinstance(t, ast.Name)]
        if any(not isinstance(t, ast.Name) for t in targets):
            problems.append(f"{node.lineno}: module-level assignment to an attribute or item")
        if names == ["__all__"] or value is None:
            continue
        mutable = isinstance(
            value, ast.List | ast.Dict | ast.Set | ast.ListComp | ast.DictComp | ast.SetComp
        ) or (
            isinstance(value, ast.Call)
            and isinstance(value.func, ast.Name | ast.Attribute)
            and (value.func.id if isinstance(value.func, ast.Name) else value.func.attr) in MUTABLE_FACTORIES
        )
        if mutable:
            problems.append(f"{node.lineno}: module-level mutable global {', '.join(names)}")
    return problems


CORE_MODULES = sorted(CORE.glob("*.py"))


def test_the_core_has_the_expected_modules() -> None:
    names = {p.stem for p in CORE_MODULES}
    assert {
        "vocabulary",
        "identity",
        "requirements",
        "context",
        "legacy",
        "policy",
        "decision",
        "resolver",
        "shadow",
        "canonical",
    } <= names


@pytest.mark.parametrize("path", CORE_MODULES, ids=lambda p: p.name)
def test_core_module_is_pure(path: Path) -> None:
    module = (
        "otel_route_shadow.core." + path.stem
        if path.stem != "__init__"
        else "otel_route_shadow.core.__init__"
    )
    assert purity_violations(path.read_text(encoding="utf-8"), module) == []


@pytest.mark.parametrize(
    ("snippet", "problem"),
    [
        ("import os", "imports os"),
        ("import time", "imports time"),
        ("from datetime import datetime", "imports datetime"),
        ("import random", "imports random"),
        ("import secrets", "imports secrets"),
        ("import uuid", "imports uuid"),
        ("import logging", "imports logging"),
        ("from pathlib import Path", "imports pathlib"),
        ("import io", "imports io"),
        ("import socket", "imports socket"),
        ("import subprocess", "imports subprocess"),
        ("import threading", "imports threading"),
        ("from opentelemetry import trace", "imports opentelemetry"),
        ("import opentelemetry.sdk.trace", "imports opentelemetry.sdk.trace"),
        ("from otel_route_shadow.store import RoutingPolicyStore", "imports otel_route_shadow.store"),
        ("from otel_route_shadow import version", "imports otel_route_shadow"),
        ("from ..store import x", "imports otel_route_shadow.store"),
        ("def f():\n    open('x')", "calls open()"),
        ("def f():\n    print('x')", "calls print()"),
        ("x = input()", "calls input()"),
        ("eval('1')", "calls eval()"),
        ("exec('1')", "calls exec()"),
        ("CACHE = {}", "module-level mutable global CACHE"),
        ("SEEN: list[str] = []", "module-level mutable global SEEN"),
        ("TABLE = dict(a=1)", "module-level mutable global TABLE"),
        ("X = 0\ndef f():\n    global X\n    X += 1", "global statement"),
        ("X = 0\nX += 1", "module-level augmented assignment"),
        (
            "from types import MappingProxyType\nT = MappingProxyType({})\nT.update({})",
            "module-level call of .update()",
        ),
        ("import re\nre.cache = 1", "module-level assignment to an attribute or item"),
    ],
)
def test_the_purity_check_catches(snippet: str, problem: str) -> None:
    violations = purity_violations(snippet, "otel_route_shadow.core.example")
    assert any(problem in v for v in violations), violations


TLOG_MODULES = sorted((PACKAGE / "tlog").glob("*.py"))


@pytest.mark.parametrize("path", TLOG_MODULES, ids=lambda p: p.name)
def test_tlog_module_is_pure(path: Path) -> None:
    module = "otel_route_shadow.tlog." + path.stem
    assert purity_violations(path.read_text(encoding="utf-8"), module, _tlog_allowed) == []


@pytest.mark.parametrize(
    ("snippet", "problem"),
    [
        ("import os", "imports os"),
        ("import fcntl", "imports fcntl"),
        ("import threading", "imports threading"),
        ("from concurrent.futures import Executor", "imports concurrent.futures"),
        ("import time", "imports time"),
        ("import logging", "imports logging"),
        ("from otel_route_shadow.files import read_regular", "imports otel_route_shadow.files"),
        ("from otel_route_shadow.chain import leaf_hash", "imports otel_route_shadow.chain"),
        ("from otel_route_shadow.logstore import LogStore", "imports otel_route_shadow.logstore"),
        ("from ..logstore import LogStore", "imports otel_route_shadow.logstore"),
        ("def f():\n    open('x')", "calls open()"),
        ("CACHE = {}", "module-level mutable global CACHE"),
    ],
)
def test_the_tlog_purity_check_catches(snippet: str, problem: str) -> None:
    violations = purity_violations(snippet, "otel_route_shadow.tlog.example", _tlog_allowed)
    assert any(problem in v for v in violations), violations


def test_the_tlog_purity_check_allows_what_the_spec_needs() -> None:
    ok = (
        "import base64, binascii, hashlib, struct\n"
        "from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey\n"
        "from otel_route_shadow.tlog.merkle import HASH_SIZE\n"
        "from .note import Verifier\n"
    )
    assert purity_violations(ok, "otel_route_shadow.tlog.example", _tlog_allowed) == []


_TLOG_PROBE = """
import json, sys
before = set(sys.modules)
import otel_route_shadow.tlog
loaded = sorted(set(sys.modules) - before)
print(json.dumps(loaded))
"""


def test_importing_tlog_loads_no_other_part_of_the_package() -> None:
    out = subprocess.run([sys.executable, "-c", _TLOG_PROBE], capture_output=True, text=True, check=True)
    loaded = json.loads(out.stdout)
    ours = [m for m in loaded if m.split(".")[0] == "otel_route_shadow"]
    pure = ("otel_route_shadow.tlog", "otel_route_shadow.core")  # the package's own __init__ loads the core
    allowed = {"otel_route_shadow", "otel_route_shadow.version"}
    assert [m for m in ours if m not in allowed and not m.startswith(pure)] == []


def _imported_names(path: Path, package: str) -> set[str]:
    """The names ``path`` imports from ``package`` (``from package import a, b``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == package
        for alias in node.names
    }


def test_the_face_of_tlog_is_what_the_rest_of_the_package_uses() -> None:
    """``tlog`` exports the spec other folders call, no more: a name only its own modules or tests need
    stays in its submodule."""
    import otel_route_shadow.tlog

    used: set[str] = set()
    for path in PACKAGE.rglob("*.py"):
        if "tlog" not in path.relative_to(PACKAGE).parts:
            used |= _imported_names(path, "otel_route_shadow.tlog")
    face = otel_route_shadow.tlog.__all__
    assert [name for name in face if not hasattr(otel_route_shadow.tlog, name)] == []
    assert sorted(set(face) - used) == []


def test_a_name_two_folders_export_is_one_thing() -> None:
    """One name per concept: a name in two folders' ``__all__`` is the same object (a re-export), never
    two things. Regression: a rename of the witness policy's reader renamed the routing policy's too, so
    ``store`` and ``logstore`` each exported a ``read_witness_policy_file`` reading a different file."""
    import importlib
    import itertools

    folders = {
        p.parent.name: importlib.import_module(f"otel_route_shadow.{p.parent.name}")
        for p in sorted(PACKAGE.glob("*/__init__.py"))
    }
    clashes = [
        f"{a}.{name} / {b}.{name}"
        for (a, one), (b, other) in itertools.combinations(folders.items(), 2)
        for name in sorted(set(getattr(one, "__all__", ())) & set(getattr(other, "__all__", ())))
        if getattr(one, name) is not getattr(other, name)
    ]
    assert clashes == []


def test_only_the_store_finds_the_log_folder() -> None:
    """``<chain>.tlog/`` is found by ``logstore.tlog_dir`` and read through ``LogStore``: outside
    ``logstore/`` no module imports ``tlog_dir`` (``analysis/refusals.py`` joined it with the refusals
    files' names and read them itself, following a planted link)."""
    finders = [
        path.relative_to(PACKAGE).as_posix()
        for path in PACKAGE.rglob("*.py")
        if "logstore" not in path.relative_to(PACKAGE).parts
        and "tlog_dir" in _imported_names(path, "otel_route_shadow.logstore")
    ]
    assert finders == []


@pytest.mark.parametrize("folder", sorted(p.parent.name for p in PACKAGE.glob("*/__init__.py")))
def test_every_name_a_folder_exports_exists(folder: str) -> None:
    """``__all__`` names nothing the package does not define (``from folder import *`` works)."""
    module = __import__(f"otel_route_shadow.{folder}", fromlist=["__all__"])
    assert [name for name in module.__all__ if not hasattr(module, name)] == []


def test_the_purity_check_allows_what_the_core_needs() -> None:
    ok = (
        "from __future__ import annotations\n"
        "import hashlib, json, re\n"
        "from collections.abc import Mapping\n"
        "from types import MappingProxyType\n"
        "from pydantic import BaseModel\n"
        "from otel_route_shadow.core.vocabulary import Provider\n"
        "from .canonical import digest\n"
        "__all__ = ['x']\n"
        "TABLE: Mapping[str, int] = MappingProxyType({'a': 1})\n"
        "NAMES = frozenset({'a'})\n"
    )
    assert purity_violations(ok, "otel_route_shadow.core.example") == []


_PROBE = """
import json, sys
before = set(sys.modules)
import otel_route_shadow.core
loaded = sorted(set(sys.modules) - before)
print(json.dumps(loaded))
"""


def test_importing_the_core_loads_no_shell_and_no_opentelemetry() -> None:
    out = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, check=True)
    loaded = json.loads(out.stdout)
    ours = [m for m in loaded if m.split(".")[0] == "otel_route_shadow"]
    allowed = {"otel_route_shadow", "otel_route_shadow.version"}
    assert [m for m in ours if m not in allowed and not m.startswith("otel_route_shadow.core")] == []
    assert [m for m in loaded if m.split(".")[0] == "opentelemetry"] == []


def _imports_core(path: Path) -> bool:
    module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return any(
        name == "otel_route_shadow.core" or name.startswith("otel_route_shadow.core.")
        for _, name in _imported_modules(tree, module)
    )


@pytest.mark.parametrize("shell", ["store", "cli"])
def test_the_shell_depends_on_the_core(shell: str) -> None:
    modules = sorted((PACKAGE / shell).rglob("*.py"))
    assert modules and any(_imports_core(p) for p in modules), f"{shell} never imports the core"


def test_the_dependency_points_one_way() -> None:
    # Restating the purity rule as the direction rule: no core module names any other package module.
    for path in CORE_MODULES:
        module = "otel_route_shadow.core." + path.stem
        for _, name in _imported_modules(ast.parse(path.read_text(encoding="utf-8")), module):
            if name.startswith("otel_route_shadow"):
                assert name.startswith("otel_route_shadow.core"), f"{path.name} imports {name}"


# The shell's own directions: each folder of the package and the folders it may import. A module at the
# package root (``version``, small shared helpers) may be imported by every folder and imports only the core.
SHELL_MAY_IMPORT: dict[str, frozenset[str]] = {
    "store": frozenset({"core"}),
    "tlog": frozenset({"core"}),
    "chain": frozenset({"core", "tlog"}),
    "logstore": frozenset({"core", "chain", "tlog"}),
    "shadow": frozenset({"core", "chain"}),
    "backend": frozenset({"core", "chain", "tlog", "logstore", "shadow"}),
    "witness": frozenset({"core", "chain", "tlog", "logstore"}),
    "server": frozenset({"core", "chain", "tlog", "logstore"}),
    "analysis": frozenset({"core", "chain", "tlog", "logstore", "store", "shadow"}),
    "instrumentation": frozenset({"core", "chain", "tlog", "logstore", "store", "shadow", "witness"}),
    "demo": frozenset({"core", "chain", "tlog", "logstore", "store", "shadow", "witness", "instrumentation"}),
    "cli": frozenset(
        {
            "core",
            "chain",
            "tlog",
            "logstore",
            "store",
            "shadow",
            "backend",
            "witness",
            "server",
            "analysis",
            "instrumentation",
            "demo",
        }
    ),
}
OPENTELEMETRY_FOLDERS = frozenset({"instrumentation", "demo"})
# ``__main__`` (``python -m otel_route_shadow``) is the command line's: held to cli's rule, and no module imports it.
ROOT_MODULES = frozenset(p.stem for p in PACKAGE.glob("*.py") if p.stem not in {"__init__", "__main__"})


def _package_modules() -> list[tuple[str, Path]]:
    """(folder, path) for every module; the folder of a root module is ``""``."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE).parts
        found.append((parts[0] if len(parts) > 1 else "cli" if path.stem == "__main__" else "", path))
    return found


def direction_violations(folder: str, source: str, module: str) -> list[str]:
    """Every import in ``source`` (module ``module`` of ``folder``; ``""`` at the root) that breaks the directions."""
    allowed = SHELL_MAY_IMPORT.get(folder, frozenset({"core"})) | {folder} | ROOT_MODULES
    wrong = []
    for line, name in _imported_modules(ast.parse(source), module):
        parts = name.split(".")
        if parts[0] == "opentelemetry" and folder not in OPENTELEMETRY_FOLDERS:
            wrong.append(f"{line}: imports {name} (only {sorted(OPENTELEMETRY_FOLDERS)} use OpenTelemetry)")
        elif parts[0] == "otel_route_shadow" and len(parts) > 1 and parts[1] not in allowed:
            wrong.append(f"{line}: imports {name}")
    return wrong


def test_every_folder_of_the_package_has_a_direction_rule() -> None:
    folders = {folder for folder, _ in _package_modules() if folder}
    assert folders - {"core"} <= set(SHELL_MAY_IMPORT)


@pytest.mark.parametrize(("folder", "path"), _package_modules(), ids=lambda v: str(v))
def test_a_shell_module_imports_only_the_folders_below_it(folder: str, path: Path) -> None:
    if folder == "core":
        return  # the purity tests above hold the core to a stricter rule
    module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    assert direction_violations(folder, path.read_text(encoding="utf-8"), module) == []


@pytest.mark.parametrize(
    ("folder", "snippet", "problem"),
    [
        (
            "chain",
            "from otel_route_shadow.store import RoutingPolicyStore",
            "imports otel_route_shadow.store",
        ),
        (
            "backend",
            "from otel_route_shadow.instrumentation import x",
            "imports otel_route_shadow.instrumentation",
        ),
        ("store", "from ..chain import x", "imports otel_route_shadow.chain"),
        ("analysis", "from opentelemetry import trace", "imports opentelemetry"),
        ("", "from otel_route_shadow.chain import x", "imports otel_route_shadow.chain"),
    ],
)
def test_the_direction_check_catches(folder: str, snippet: str, problem: str) -> None:
    module = f"otel_route_shadow.{folder}.example" if folder else "otel_route_shadow.example"
    assert any(problem in v for v in direction_violations(folder, snippet, module))


def test_the_direction_check_allows_the_table() -> None:
    ok = "from otel_route_shadow.core import explain\nfrom otel_route_shadow.chain import verify_chain\n"
    assert direction_violations("analysis", ok, "otel_route_shadow.analysis.example") == []
    assert direction_violations("instrumentation", "from opentelemetry import trace", "m.x") == []


# -- a folder's public API is what its __init__.py re-exports ----------------------------------------------

MAX_MODULE_LINES = 600
"""The longest module a newcomer is asked to hold (README, "Layout")."""


def _public_names(folder: str) -> frozenset[str]:
    """The ``__all__`` of the folder's ``__init__.py`` (a literal list of strings)."""
    tree = ast.parse((PACKAGE / folder / "__init__.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets) and node.value is not None:
                return frozenset(ast.literal_eval(node.value))
    return frozenset()


FOLDERS = sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file())


def api_violations(folder: str, source: str, module: str, public: dict[str, frozenset[str]]) -> list[str]:
    """Every import in ``source`` (module ``module`` of ``folder``) that reaches into another folder: a
    submodule named, or a name its ``__init__.py`` does not re-export (``public``: folder -> ``__all__``)."""
    wrong = []
    tree = ast.parse(source)
    for line, name in _imported_modules(tree, module):
        parts = name.split(".")
        if parts[0] != "otel_route_shadow" or len(parts) < 3 or parts[1] == folder or parts[1] not in public:
            continue
        wrong.append(
            f"{line}: imports {name}, a module inside {parts[1]}/; import from otel_route_shadow.{parts[1]}"
        )
    package = module.rsplit(".", 1)[0]
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom):
            continue
        base = package.split(".")[: len(package.split(".")) - (node.level - 1)] if node.level else []
        target = (
            ".".join([*base, *([node.module] if node.module else [])]) if node.level else node.module or ""
        )
        parts = target.split(".")
        if len(parts) != 2 or parts[0] != "otel_route_shadow" or parts[1] == folder or parts[1] not in public:
            continue
        hidden = sorted(alias.name for alias in node.names if alias.name not in public[parts[1]])
        if hidden:
            wrong.append(
                f"{node.lineno}: imports {', '.join(hidden)} from {target}, which does not re-export it"
            )
    return wrong


PUBLIC = {folder: _public_names(folder) for folder in FOLDERS}


@pytest.mark.parametrize(("folder", "path"), _package_modules(), ids=lambda v: str(v))
def test_a_module_imports_another_folder_only_through_its_init(folder: str, path: Path) -> None:
    module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    assert api_violations(folder, path.read_text(encoding="utf-8"), module, PUBLIC) == []


@pytest.mark.parametrize(
    ("snippet", "problem"),
    [
        ("from otel_route_shadow.tlog.directory import CHECKPOINT_FILE", "a module inside tlog/"),
        ("import otel_route_shadow.chain.record", "a module inside chain/"),
        ("from ..tlog.proofs import prove_inclusion", "a module inside tlog/"),
        ("from otel_route_shadow.tlog import _private", "does not re-export it"),
        ("from otel_route_shadow.shadow import record", "does not re-export it"),
    ],
)
def test_the_api_check_catches(snippet: str, problem: str) -> None:
    public = {"tlog": frozenset({"TileReader"}), "chain": frozenset(), "shadow": frozenset({"attributes"})}
    assert any(problem in v for v in api_violations("cli", snippet, "otel_route_shadow.cli.example", public))


def test_the_api_check_allows_the_folder_and_its_own_modules() -> None:
    public = {"tlog": frozenset({"TileReader"}), "shadow": frozenset({"attributes"})}
    ok = (
        "from otel_route_shadow.tlog import TileReader\n"
        "from otel_route_shadow.shadow import attributes\n"
        "from otel_route_shadow.cli.common import CliError\n"
        "from .common import CliError\n"
        "from otel_route_shadow.files import read_regular\n"
    )
    assert api_violations("cli", ok, "otel_route_shadow.cli.example", public) == []


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_module_is_over_600_lines(path: Path) -> None:
    lines = path.read_text(encoding="utf-8").count("\n")
    assert lines <= MAX_MODULE_LINES, f"{path.relative_to(PACKAGE)}: {lines} lines; split it by what it holds"


def _module_cycle(folder: Path) -> list[str] | None:
    """A circle of imports between the modules of ``folder`` (``TYPE_CHECKING`` imports count), or None."""
    prefix = f"otel_route_shadow.{folder.name}."
    graph: dict[str, set[str]] = {}
    for path in folder.glob("*.py"):
        module = prefix + path.stem
        names = _imported_modules(ast.parse(path.read_text(encoding="utf-8")), module)
        graph[path.stem] = {name[len(prefix) :].split(".")[0] for _, name in names if name.startswith(prefix)}
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(node: str, path: list[str]) -> list[str] | None:
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt, [*path, nxt])) is not None:
                return found
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (found := visit(start, [start])) is not None:
            return found
    return None


@pytest.mark.parametrize(
    "folder",
    sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()),
)
def test_no_two_modules_of_a_folder_import_each_other_in_a_circle(folder: str) -> None:
    assert _module_cycle(PACKAGE / folder) is None


def test_the_cycle_check_finds_a_type_only_circle(tmp_path: Path) -> None:
    folder = tmp_path / "example"
    folder.mkdir()
    (folder / "a.py").write_text("from otel_route_shadow.example.b import B\n")
    (folder / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from otel_route_shadow.example.a import A\n"
    )
    assert _module_cycle(folder) == ["a", "b", "a"]


_PROCESS_HOOKS = {
    "os.register_at_fork",
    "atexit.register",
    "multiprocessing.util.Finalize",
    "multiprocessing.util.register_after_fork",
    "run_at_exit",
}


def _process_hooks() -> list[str]:
    """Every call of a process-wide hook (fork, ``atexit``, ``multiprocessing``'s exit and after-fork
    callbacks, ``worker.run_at_exit``) in the package, as ``module:call``."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.Call) and ast.unparse(node.func) in _PROCESS_HOOKS:
                found.append(f"{path.relative_to(PACKAGE)}:{ast.unparse(node.func)}")
    return found


def test_one_fork_handler_and_one_exit_handler_for_the_whole_package() -> None:
    """``worker.AFTER_FORK`` resets everything a forked child inherits (workers and the chain's
    descriptors alike) and the runtime's one exit hook (``worker.run_at_exit``: an ``atexit`` entry and
    a ``multiprocessing`` exit callback, made again in each of its children) runs every way out: the chain
    used to register a fork handler of its own."""
    assert sorted(_process_hooks()) == [
        "instrumentation/runtime.py:run_at_exit",
        "worker.py:atexit.register",
        "worker.py:multiprocessing.util.Finalize",
        "worker.py:multiprocessing.util.register_after_fork",
        "worker.py:os.register_at_fork",
    ]
