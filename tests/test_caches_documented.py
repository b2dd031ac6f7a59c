"""Every cache of the package is in the table of docs/benchmarks.md ("Caches, windows and threads").

An AST pass over every module finds what looks like a cache, by module and name:

* a function wrapped in ``functools.lru_cache`` / ``functools.cache``, or a ``cached_property``;
* a dict that is looked up (``.get``, ``.setdefault``, ``in``) and stored into (``x[k] = v``, the value
  not read from ``x`` itself: a counter is not a memo) in one scope: a module-level name, or an
  attribute of ``self`` across the methods of one class (``Class.attribute``);
* a class named ``...Memo...`` or ``...Cache...``, or whose docstring's first line says it memoises;
* a module-level name or ``self`` attribute whose name has a ``cache``, ``cached`` or ``memo`` word
  (``_CACHED_TILES``, ``self._cache``, ``MEMO_LIMIT``).

The finder over-approximates (a dict filled on first use is a memo or an accumulator, which the AST
cannot tell apart): each finding is a row of a cache table, or of the table of what was found and is
not a cache, with the reason. A row names its module and the name in backquotes.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
PACKAGE = ROOT / "otel_route_shadow"
DOC = ROOT / "docs" / "benchmarks.md"
SECTION = "## Caches, windows and threads"

_WRAPPERS = frozenset({"lru_cache", "cache", "cached_property"})
_NAMED = re.compile(r"(?:^|_)(?:cache|cached|memo)(?:_|$)", re.IGNORECASE)
_CLASS_NAMED = re.compile(r"Memo|Cache")
_SAYS_MEMO = re.compile(r"\bmemo(?:ised|ized|ises|izes|s)?\b", re.IGNORECASE)
_LOOKUPS = frozenset({"get", "setdefault"})


def _callee(node: ast.expr) -> str | None:
    target = node.func if isinstance(node, ast.Call) else node
    if isinstance(target, ast.Attribute):
        return target.attr
    return target.id if isinstance(target, ast.Name) else None


def _wrapped(node: ast.expr) -> bool:
    """``lru_cache``, ``lru_cache(maxsize=...)``, ``functools.cache``, ``cached_property``."""
    return _callee(node) in _WRAPPERS


class _Finder:
    def __init__(self, tree: ast.Module) -> None:
        self.found: set[str] = set()
        self.module_names = {
            target.id
            for node in tree.body
            for target in (
                node.targets
                if isinstance(node, ast.Assign)
                else [node.target]
                if isinstance(node, ast.AnnAssign)
                else []
            )
            if isinstance(target, ast.Name)
        }
        self.looked_up: dict[str | None, set[str]] = {}
        self.stored: dict[str | None, set[str]] = {}
        for node in tree.body:
            self.visit(node, None, in_function=False)
        for scope, names in self.looked_up.items():
            for name in names & self.stored.get(scope, set()):
                if "." in name or name in self.module_names:
                    self.found.add(name)

    def name_of(self, node: ast.expr, cls: str | None) -> str | None:
        if isinstance(node, ast.Name):
            return node.id
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
            return f"{cls}.{node.attr}" if cls else None
        return None

    def visit(self, node: ast.AST, cls: str | None, *, in_function: bool) -> None:
        if isinstance(node, ast.ClassDef):
            summary = (ast.get_docstring(node) or "").split("\n\n")[0]
            if _CLASS_NAMED.search(node.name) or _SAYS_MEMO.search(summary):
                self.found.add(node.name)
            for child in node.body:
                self.visit(child, node.name, in_function=False)
            return
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            if any(_wrapped(decorator) for decorator in node.decorator_list):
                self.found.add(f"{cls}.{node.name}" if cls else node.name)
            self.uses(node, cls)
            for child in node.body:
                self.visit(child, cls, in_function=True)
            return
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                name = self.assigned(target, cls, in_function=in_function)
                if name is not None and _NAMED.search(name.rsplit(".", 1)[-1]):
                    self.found.add(name)
                if (
                    name is not None
                    and isinstance(node.value, ast.Call)
                    and isinstance(node.value.func, ast.Call)
                    and _wrapped(node.value.func)
                ):
                    self.found.add(name)  # _f = functools.lru_cache(maxsize=...)(f)
        for child in ast.iter_child_nodes(node):
            self.visit(child, cls, in_function=in_function)

    def assigned(self, target: ast.expr, cls: str | None, *, in_function: bool) -> str | None:
        """The module-level name, class attribute or ``self`` attribute an assignment binds."""
        if in_function:
            return self.name_of(target, cls) if isinstance(target, ast.Attribute) else None
        if isinstance(target, ast.Name):
            return f"{cls}.{target.id}" if cls else target.id
        return None

    def uses(self, function: ast.FunctionDef | ast.AsyncFunctionDef, cls: str | None) -> None:
        looked_up = self.looked_up.setdefault(cls, set())
        stored = self.stored.setdefault(cls, set())
        for node in ast.walk(function):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in _LOOKUPS
            ):
                name = self.name_of(node.func.value, cls)
                if name is not None:
                    looked_up.add(name)
            elif isinstance(node, ast.Compare) and any(isinstance(op, ast.In | ast.NotIn) for op in node.ops):
                looked_up.update(n for n in (self.name_of(c, cls) for c in node.comparators) if n is not None)
            elif isinstance(node, ast.Assign):
                read = {self.name_of(n, cls) for n in ast.walk(node.value) if isinstance(n, ast.expr)}
                for target in node.targets:
                    if isinstance(target, ast.Subscript):
                        name = self.name_of(target.value, cls)
                        if name is not None and name not in read:
                            stored.add(name)


def find_caches(source: str) -> set[str]:
    """The names of what looks like a cache in one module's source (see the module docstring)."""
    return _Finder(ast.parse(source)).found


def package_caches() -> set[tuple[str, str]]:
    """``(module path below the package, name)`` of every cache-like construct of the package."""
    return {
        (path.relative_to(PACKAGE).as_posix(), name)
        for path in sorted(PACKAGE.rglob("*.py"))
        for name in find_caches(path.read_text(encoding="utf-8"))
    }


def table_rows(markdown: str) -> list[str]:
    """The table rows of the caches section of docs/benchmarks.md."""
    start = markdown.index(SECTION)
    end = markdown.find("\n## ", start + len(SECTION))
    section = markdown[start : end if end >= 0 else len(markdown)]
    return [line for line in section.splitlines() if line.startswith("|") and not line.startswith("|--")]


def unlisted(found: set[tuple[str, str]], rows: list[str]) -> list[tuple[str, str]]:
    """The findings no row lists: a row names the module (``analysis/records.py``) and the name, each
    in backquotes (the name alone, or with its class, or a row's ``Class.attribute`` holding it)."""

    def listed(module: str, name: str) -> bool:
        names = {f"`{name}`", f"`{name.rsplit('.', 1)[-1]}`"} if "." in name else {f"`{name}`"}
        return any(f"`{module}`" in row and any(n in row for n in names) for row in rows)

    return sorted((module, name) for module, name in found if not listed(module, name))


_CODE_NAME = re.compile(r"(?:_?[A-Z][A-Za-z0-9]*\.[_a-z][A-Za-z0-9_]*|_[A-Za-z0-9_]+|[A-Z][A-Z0-9_]+)")
"""A name a row gives as the package's own: ``Class.attribute``, ``_private`` or ``CONSTANT``."""


def stale(rows: list[str], source_of: dict[str, str]) -> list[tuple[str, str]]:
    """(row's first module, name) of each ``Class.attribute``, ``_private`` or ``CONSTANT`` name a row
    gives that none of the row's modules holds (every part a word of its source), and of each module a
    row names that the package does not have; rows of what was removed are not read."""
    found: list[tuple[str, str]] = []
    for row in rows:
        if row.startswith("| removed"):
            continue
        names = re.findall(r"`([^`]+)`", row)
        modules = [n for n in names if n.endswith(".py") and not n.startswith("tests/")]
        found += [(m, "(no such module)") for m in modules if m not in source_of]
        sources = [source_of[m] for m in modules if m in source_of]
        found += [
            (modules[0], name)
            for name in names
            if sources
            and _CODE_NAME.fullmatch(name)
            and not all(any(re.search(rf"\b{re.escape(p)}\b", s) for s in sources) for p in name.split("."))
        ]
    return found


# --- the finder, on sources made to hold each kind ---------------------------------------------------

_SYNTHETIC = '''
import functools
from functools import cached_property, lru_cache

_SEEN: dict[str, int] = {}
_COUNTS: dict[str, int] = {}
_TABLE = {"a": 1}
_CACHED_THINGS = 8


@functools.lru_cache(maxsize=16)
def decorated(x: int) -> int:
    return x


@lru_cache
def bare(x: int) -> int:
    return x


wrapped = functools.lru_cache(maxsize=4)(bare)


def memoised(key: str) -> int:
    found = _SEEN.get(key)
    if found is None:
        found = _SEEN[key] = len(key)
    return found


def counted(key: str) -> None:
    _COUNTS[key] = _COUNTS.get(key, 0) + 1


def constant(key: str) -> int:
    return _TABLE[key]


class Holder:
    """Holds things."""

    def __init__(self) -> None:
        self._by_key: dict[str, int] = {}
        self._cache = None
        self.totals: dict[str, int] = {}

    def get(self, key: str) -> int | None:
        return self._by_key.get(key)

    def put(self, key: str, value: int) -> None:
        self._by_key[key] = value

    def add(self, key: str) -> None:
        self.totals[key] = self.totals.get(key, 0) + 1

    @cached_property
    def lazy(self) -> int:
        return 1


class ResultMemo:
    """Nothing here says what it is."""


class Answers:
    """Answers by question, memoised.

    Not the summary: memo.
    """


class Talker:
    """Talks.

    Defeats the runtime's memo (said past the summary line: not one).
    """
'''


def test_the_finder_finds_each_kind_of_cache_and_nothing_else() -> None:
    assert find_caches(_SYNTHETIC) == {
        "_SEEN",
        "_CACHED_THINGS",
        "decorated",
        "bare",
        "wrapped",
        "Holder._by_key",
        "Holder._cache",
        "Holder.lazy",
        "ResultMemo",
        "Answers",
    }


def test_a_cache_the_table_does_not_list_fails_the_check() -> None:
    found = {("analysis/new.py", "_SEEN"), ("analysis/new.py", "Holder._by_key"), ("core/x.py", "_CACHE")}
    rows = [
        "| memo of things | `analysis/new.py`, `_SEEN` | 16 | never | 2x |",
        "| a table of x | `core/x.py` | - | - | - |",  # the module without the name
        "| `Holder._by_key` | `analysis/other.py` | - | - | - |",  # the name in another module
    ]
    assert unlisted(found, rows) == [("analysis/new.py", "Holder._by_key"), ("core/x.py", "_CACHE")]


def test_a_row_naming_what_its_module_no_longer_holds_fails_the_check() -> None:
    sources = {"a.py": "class Tiles:\n    def __init__(self):\n        self._cache = {}\n_LIMIT = 4\n"}
    rows = [
        "| `a.py` | `Tiles._cache`, `_LIMIT` | kept `verify`, `fetch_ms` | ok |",
        "| `a.py` | `Tiles._offset`, `_GONE` | - | - |",
        "| `b.py` | `X` | - | - |",
        "| removed: a memo | was `c.py`, `_OLD` | - | - |",
    ]
    assert stale(rows, sources) == [("a.py", "Tiles._offset"), ("a.py", "_GONE"), ("b.py", "(no such module)")]


def test_the_table_section_is_found_and_ends_at_the_next_section() -> None:
    markdown = f"# B\n| `a.py` `X` | outside |\n{SECTION}\n\n| `b.py` | `Y` |\n|---|---|\n\n## Next\n| `c.py` `Z` |\n"
    assert table_rows(markdown) == ["| `b.py` | `Y` |"]


# --- the package against the table ------------------------------------------------------------------


def test_the_finder_sees_the_caches_the_package_is_known_to_have() -> None:
    found = package_caches()
    for known in [
        ("chain/sanitize.py", "_is_secret_key"),
        ("chain/sanitize.py", "_CLEAN"),
        ("instrumentation/memo.py", "RuntimeMemo"),
        ("analysis/replaying.py", "Replayer.memo"),
        ("analysis/records.py", "Repeats.seen"),
        ("core/policy_index.py", "_Dimension._masks"),
        ("core/policy_index.py", "PolicyIndex._rows"),
        ("logstore/published.py", "_CACHED_TILES"),
        ("witness/witnessing.py", "CheckpointWitnessing._roots"),
    ]:
        assert known in found


@pytest.mark.parametrize("finding", sorted(package_caches()), ids=lambda f: f"{f[0]}:{f[1]}")
def test_every_cache_of_the_package_is_in_the_table(finding: tuple[str, str]) -> None:
    rows = table_rows(DOC.read_text(encoding="utf-8"))
    assert unlisted({finding}, rows) == [], (
        f"{finding[0]} {finding[1]} looks like a cache: list it in docs/benchmarks.md, '{SECTION}' "
        "(what is cached, its bound, what invalidates it, the figure that earns it), or in its table of "
        "what is not a cache, with the reason"
    )


def test_every_name_the_table_gives_is_in_the_module_it_names() -> None:
    """Regression: rows named ``OwnNotes._offset`` (the attribute is ``_position``) and ``_Served.pruned``
    (gone: ``serve`` asks the entry index) long after the code changed: a row is checked both ways."""
    source_of = {p.relative_to(PACKAGE).as_posix(): p.read_text(encoding="utf-8") for p in PACKAGE.rglob("*.py")}
    assert stale(table_rows(DOC.read_text(encoding="utf-8")), source_of) == []
