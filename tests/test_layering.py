"""The stages stack one way: profile -> records -> store -> views -> panels (docs: commscope/README.md).

- Imports run downwards only: read <- store <- views, gate, advise <- workflow <- commands, cli (a stage may import
  its own level, never one above it; commscope/__init__.py, the notebook facade, is no stage).
- The command line is the top: only cli.py and commands/ import click, so every stage below is usable without it.
- Data access is in one place: SQL on the store's base tables (every table the migrations create) is written only
  in commscope/store/ and the panel catalog (views/panels.py); gate, advise, views and the CLI call the store's
  query functions (store/queries/) or read the v_* views.

Read from the sources with Python's own parser: docstrings and comments do not count, every string literal
(f-strings by their fixed parts) and every import, at any depth, does."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import commscope

PACKAGE = Path(commscope.__file__).resolve().parent
ALLOWED = ("store/", "views/panels.py")
LEVEL = {"read": 0, "store": 1, "views": 2, "gate": 2, "advise": 2, "workflow": 3, "commands": 4, "cli": 4}


def base_tables() -> set[str]:
    """The tables the migrations create and do not drop, and the store's own schema_version."""
    text = "\n".join(p.read_text() for p in sorted((PACKAGE / "store" / "migrations").glob("*.sql")))
    created = set(re.findall(r"CREATE\s+(?:UNLOGGED\s+)?TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?(\w+)", text, re.I))
    dropped = {t.strip() for names in re.findall(r"DROP\s+TABLE\s+(?:IF\s+EXISTS\s+)?([\w ,]+)", text, re.I)
               for t in names.split(",")}
    return {t.lower() for t in created - dropped} | {"schema_version"}


def literals(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, text) of every string literal that is not a docstring; an f-string's placeholders read as `?`."""
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr)
                  and isinstance(node.body[0].value, ast.Constant)}
    inside_fstring = {id(v) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for v in node.values}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            out.append((node.lineno, "".join(v.value if isinstance(v, ast.Constant) else "?" for v in node.values)))
        elif (isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
              and id(node) not in inside_fstring):
            out.append((node.lineno, node.value))
    return out


def test_no_base_table_sql_outside_the_store_and_the_panel_catalog():
    tables = base_tables()
    assert {"runs", "nodes", "node_metrics", "campaigns", "run_windows", "rank_metrics", "series",
            "annotations"} <= tables, tables   # the premise: the migrations are read
    sql = re.compile(r"\b(?:FROM|JOIN|INTO|UPDATE|TABLE)\s+(" + "|".join(sorted(tables)) + r")\b")
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel.startswith(ALLOWED):
            continue
        for line, text in literals(ast.parse(path.read_text(), str(path))):
            found += [f"commscope/{rel}:{line}: {m.group(0)}" for m in sql.finditer(text)]
    assert not found, ("base-table SQL outside commscope/store/ and views/panels.py (call or add a query "
                       "function in commscope/store/queries/, or read a v_* view):\n" + "\n".join(found))


def test_no_stage_imports_a_stage_above_it():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        stage = rel.split("/")[0].removesuffix(".py")
        if rel == "__init__.py":
            continue
        assert stage in LEVEL, f"commscope/{rel}: a module outside the stages {sorted(LEVEL)}"
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module] if isinstance(node, ast.ImportFrom) and node.module and not node.level else [])
            for name in names:
                parts = name.split(".")
                if parts[0] == "commscope" and len(parts) > 1 and LEVEL.get(parts[1], -1) > LEVEL[stage]:
                    found.append(f"commscope/{rel}:{node.lineno}: {stage} imports {name}")
    assert not found, "imports that run up the stages (pass the value down instead):\n" + "\n".join(found)


def test_only_the_command_line_imports_click():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel == "cli.py" or rel.startswith("commands/"):
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module] if isinstance(node, ast.ImportFrom) and node.module and not node.level else [])
            found += [f"commscope/{rel}:{node.lineno}: imports {n}" for n in names if n.split(".")[0] == "click"]
    assert not found, ("click outside the command line (commscope/cli.py, commscope/commands/): raise the stage's "
                       "own error and let the command say it:\n" + "\n".join(found))


# What the store may take from read/: the record's shape (records; the columns of measures and caliper's comm.stats),
# the checks of what it can hold (storable) and the error that names a bad input (files). The modules that open paths (inputs, discover, the format readers)
# are read's own: workflow/ingest.py joins reading to the store.
RECORD_SHAPE = {"records", "storable", "files", "measures", "caliper"}


def test_the_store_takes_records_and_never_paths():
    found = []
    for path in sorted((PACKAGE / "store").rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module == "commscope.read":
                names = [f"commscope.read.{a.name}" for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names = [node.module]
            else:
                names = []
            found += [f"commscope/{rel}:{node.lineno}: imports {n}" for n in names
                      if n.startswith("commscope.read.") and n.split(".")[2] not in RECORD_SHAPE]
    assert not found, ("the store reads paths (it takes a stream of records; read them in workflow/ingest.py):\n"
                       + "\n".join(found))
