"""Code a person can read (issue 37): module docstrings state their rule in at most 25 lines (measured figures and
history live in bench/results/ and docs/), and the tests share helpers through one module (tests/helpers.py, fixtures
in conftest.py), never by importing another test file. Read with Python's own parser, not by pattern."""
from __future__ import annotations

import ast
from pathlib import Path

import commscope

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = Path(commscope.__file__).resolve().parent
TESTS = ROOT / "tests"
MAX_DOCSTRING_LINES = 25


def module_docstring_lines(path: Path) -> int:
    """Source lines the module's docstring spans, its quotes included (0 without one)."""
    body = ast.parse(path.read_text(), str(path)).body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        return body[0].end_lineno - body[0].lineno + 1
    return 0


def test_every_module_docstring_states_its_rule_in_at_most_25_lines():
    long = {str(p.relative_to(ROOT)): n for p in sorted(PACKAGE.rglob("*.py"))
            if (n := module_docstring_lines(p)) > MAX_DOCSTRING_LINES}
    assert not long, f"module docstrings over {MAX_DOCSTRING_LINES} lines (move figures to bench/results/): {long}"


def imported_modules(path: Path) -> set[str]:
    """The top-level names of every module PATH imports, at any depth of its code."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.split(".")[0])
    return names


def test_no_test_file_imports_another_test_file():
    test_modules = {p.stem for p in TESTS.glob("test_*.py")}
    users = sorted(TESTS.glob("*.py")) + sorted((ROOT / "bench").glob("*.py")) \
        + sorted((ROOT / "dashboards" / "bench").glob("*.py"))
    found = {str(p.relative_to(ROOT)): sorted(imported_modules(p) & test_modules) for p in users}
    found = {k: v for k, v in found.items() if v}
    assert not found, f"import shared helpers from tests/helpers.py (fixtures: conftest.py) instead: {found}"


def test_only_conftest_puts_ci_on_the_path():
    """ci/'s scripts (suite, toolchain, ...) are importable in every test because conftest.py puts ci/ on sys.path,
    once."""
    edits = {}
    for p in sorted(TESTS.glob("*.py")):
        for node in ast.walk(ast.parse(p.read_text(), str(p))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "insert" \
                    and "sys.path" in ast.unparse(node.func.value) and "'ci'" in ast.unparse(node):
                edits.setdefault(p.name, []).append(node.lineno)
    assert list(edits) == ["conftest.py"], edits


MAX_MODULE_LINES, MAX_FUNCTION_LINES = 700, 80   # issue 42: rooms a person can hold in mind


def test_no_module_is_over_700_lines_and_no_function_over_80():
    """Counted by Python's own parser: a module's lines, and each function's from its `def` line to its last line
    (nested functions included)."""
    long_modules, long_functions = {}, {}
    for p in sorted(PACKAGE.rglob("*.py")):
        text = p.read_text()
        name = str(p.relative_to(ROOT))
        if (n := len(text.splitlines())) > MAX_MODULE_LINES:
            long_modules[name] = n
        for node in ast.walk(ast.parse(text, name)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if (n := node.end_lineno - node.lineno + 1) > MAX_FUNCTION_LINES:
                    long_functions[f"{name}:{node.name}"] = n
    assert not long_modules, f"modules over {MAX_MODULE_LINES} lines (split them by job): {long_modules}"
    assert not long_functions, f"functions over {MAX_FUNCTION_LINES} lines: {long_functions}"
