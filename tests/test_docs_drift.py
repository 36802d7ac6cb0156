"""Docs that cannot drift (issue 42): what the docs state, checked against the code, each truth read from the code
itself (the migration files, the panel catalog's source, the dashboards' JSON, the click command tree), never from a
constant the docs test shares with the docs.

- Dashboards: every "<N> (Grafana) dashboards" a doc states, in words or digits, is the number of `Dashboard(...)` the
  panel catalog (commscope/views/panels.py) defines, which is the number of files in dashboards/json/ and of entries
  in its DASHBOARDS list; dashboards/README.md's table names each dashboard's uid once.
- Schema: every "schema version: N" or "schema N" a doc states is the newest migration's number.
- Commands: every command of `commscope` (click's command tree, sub-groups walked) has a row in README.md's
  "The commands" table, and every command that table names exists.
- Store: the tables commscope/README.md's "Tables" list names are the base tables the migrations create (CREATE
  TABLE in a migration file, less those a later migration drops or renames; tables made by a function at run time,
  the monthly partitions, do not count), plus the bookkeeping tables store/db.py makes; its "Views" list names the
  views commscope/store/views.sql defines.
- No history in READMEs. A README may name a migration (its number, `migration 0024` or `0024_name.sql`) only as
  where something is defined. So, in any paragraph, list item or table row that names one: no sentence opens with
  the migration ("Migration 0006 adds ...": a changelog entry), no word that tells a before and after ("before",
  "was", "were", "used to", "no longer", "instead", "then", "earlier", "replaced", "dropped", "until"), no date, and
  at most two migrations named. Checked in every README of the project; those under tests/ say how their fixtures
  were made (history by nature) and those of bench/results/ are dated measurements, so both are left out.
Docs scanned for counts: the project's own Markdown files (git ls-files), less tests/ and bench/results/.
"""
from __future__ import annotations

import ast
import json
import re
import subprocess
from pathlib import Path

import click

ROOT = Path(__file__).resolve().parent.parent
MIGRATIONS = ROOT / "commscope" / "store" / "migrations"
VIEWS_SQL = ROOT / "commscope" / "store" / "views.sql"
PANELS = ROOT / "commscope" / "views" / "panels.py"
DB = ROOT / "commscope" / "store" / "db.py"
NUMBER_WORDS = {w: i for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen twenty".split())}


# ---- what the code says -------------------------------------------------------------------------------------

def tracked(pattern: str) -> list[Path]:
    out = subprocess.run(["git", "ls-files", "-z", "--", pattern], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout
    return [ROOT / p for p in out.split("\0") if p and (ROOT / p).is_file()]


def project_docs() -> list[Path]:
    """The project's own Markdown: tracked, less tests/ (fixtures' notes) and bench/results/ (dated figures)."""
    return [p for p in tracked("*.md") if not str(p.relative_to(ROOT)).startswith(("tests/", "bench/results/"))
            and "node_modules" not in p.parts]


def readmes() -> list[Path]:
    return [p for p in project_docs() if p.name == "README.md"]


def catalog_dashboards() -> tuple[dict[str, str], list[str]]:
    """panels.py read as source: {variable: uid} of every module-level `X = Dashboard(uid=..., ...)` (uid as the
    first argument or keyword), and the names in its DASHBOARDS list."""
    tree = ast.parse(PANELS.read_text(), str(PANELS))
    defined, listed = {}, []
    for node in tree.body:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
            continue
        name, value = node.targets[0].id, node.value
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "Dashboard":
            uid = value.args[0] if value.args else next(k.value for k in value.keywords if k.arg == "uid")
            defined[name] = ast.literal_eval(uid)
        elif name == "DASHBOARDS" and isinstance(value, ast.List):
            listed = [e.id for e in value.elts]
    return defined, listed


def migration_files() -> list[tuple[int, Path]]:
    files = sorted((int(m.group(1)), p) for p in MIGRATIONS.glob("*.sql")
                   if (m := re.match(r"(\d{4})_\w+\.sql$", p.name)))
    assert files, MIGRATIONS
    return files


def newest_migration() -> int:
    return migration_files()[-1][0]


SQL_OBJECTS = re.compile(
    r"\bCREATE\s+(?:OR\s+REPLACE\s+)?(?P<create_kind>(?:UNLOGGED\s+)?TABLE|(?:MATERIALIZED\s+)?VIEW)\s+"
    r"(?:IF\s+NOT\s+EXISTS\s+)?(?!IF\s)(?P<create>[\w.\"]+)(?=[\s(;])"
    r"|\bDROP\s+(?P<drop_kind>TABLE|(?:MATERIALIZED\s+)?VIEW)\s+(?:IF\s+EXISTS\s+)?"
    r"(?P<drop>[\w.\"]+(?:\s*,\s*[\w.\"]+)*)"
    r"\s*(?:CASCADE|RESTRICT)?\s*;"
    r"|\bALTER\s+(?P<alter_kind>TABLE|VIEW)\s+(?:IF\s+EXISTS\s+)?(?P<old>[\w.\"]+)\s+RENAME\s+TO\s+(?P<new>[\w.\"]+)",
    re.IGNORECASE)


def _ident(name: str) -> str:
    return name.strip().strip('"').removeprefix("public.").strip('"')


def schema_objects() -> tuple[set[str], set[str]]:
    """(base tables, views) the migrations and then views.sql leave, statement by statement in file order. A name
    written by a function at run time (`format('CREATE TABLE %I ...')`: the monthly partitions) is no identifier, so
    it does not match; TEMP tables do not match either."""
    tables: set[str] = set()
    views: set[str] = set()
    for path in [p for _, p in migration_files()] + [VIEWS_SQL]:
        text = re.sub(r"--[^\n]*", "", path.read_text())
        for m in SQL_OBJECTS.finditer(text):
            if m["create"]:
                (views if "VIEW" in m["create_kind"].upper() else tables).add(_ident(m["create"]))
            elif m["drop"]:
                kind = views if "VIEW" in m["drop_kind"].upper() else tables
                kind.difference_update(_ident(n) for n in m["drop"].split(","))
            else:
                kind = views if m["alter_kind"].upper() == "VIEW" else tables
                if _ident(m["old"]) in kind:
                    kind.discard(_ident(m["old"]))
                    kind.add(_ident(m["new"]))
    return tables, views


def store_made_tables() -> set[str]:
    """Tables store/db.py itself creates (not TEMP): the migrations' bookkeeping."""
    return set(re.findall(r"CREATE TABLE (?:IF NOT EXISTS )?(\w+)", DB.read_text()))


def cli_commands() -> set[tuple[str, ...]]:
    """Every command path of `commscope`, groups and their subcommands, walked with click's own API."""
    from commscope.cli import main

    found = set()

    def walk(group: click.Group, prefix: tuple[str, ...]):
        ctx = click.Context(group, info_name=" ".join(prefix) or "commscope")
        for name in group.list_commands(ctx):
            cmd = group.get_command(ctx, name)
            if cmd is None or cmd.hidden:
                continue
            found.add(prefix + (name,))
            if isinstance(cmd, click.Group):
                walk(cmd, prefix + (name,))

    walk(main, ())
    return found


# ---- what the docs say --------------------------------------------------------------------------------------

def section(path: Path, heading: str) -> str:
    """The text under the Markdown heading HEADING (any level) up to the next heading of the same or a higher
    level."""
    lines = path.read_text().splitlines()
    for i, line in enumerate(lines):
        m = re.match(r"(#+)\s+(.*)", line)
        if m and m.group(2).strip() == heading:
            level, body = len(m.group(1)), []
            for rest in lines[i + 1:]:
                n = re.match(r"(#+)\s", rest)
                if n and len(n.group(1)) <= level:
                    break
                body.append(rest)
            return "\n".join(body)
    raise AssertionError(f"{path.relative_to(ROOT)} has no heading {heading!r}")


def table_first_cells(text: str) -> list[str]:
    """The first cell of every body row of the Markdown tables in TEXT (`\\|` inside a cell kept as `|`)."""
    cells = []
    for line in text.splitlines():
        if not line.startswith("|") or re.match(r"\|\s*-", line):
            continue
        cell = re.split(r"(?<!\\)\|", line)[1].replace("\\|", "|").strip()
        cells.append(cell)
    return cells[1:] if cells else cells   # the header row


def code_names(cell: str) -> set[str]:
    return set(re.findall(r"`([^`]+)`", cell))


def stated_dashboard_counts(text: str) -> list[tuple[int, str]]:
    out = []
    for m in re.finditer(r"\b([A-Za-z]+|\d+)\s+(?:Grafana\s+)?dashboards\b", text):
        word = m.group(1).lower()
        n = int(word) if word.isdigit() else NUMBER_WORDS.get(word)
        if n is not None:
            out.append((n, m.group(0)))
    return out


def documented_commands(cell: str, known: set[tuple[str, ...]]) -> set[tuple[str, ...]]:
    """The command paths a row's first cell names: each code span `commscope WORD ...`, where a group's
    subcommands may be alternatives, `a|b ARG|c` (`commscope db start|stop|grant-readonly ROLE`). After a command
    (not a group) come its arguments, which are not read."""
    groups = {p[:i] for p in known for i in range(1, len(p))}
    found = set()
    for span in code_names(cell):
        words = span.split()
        if len(words) < 2 or words[0] != "commscope":
            continue
        path, rest = (), " ".join(words[1:])
        while rest and (not path or path in groups):
            head = rest.split()[0]
            if "|" in head:   # alternatives: each `|`-separated piece opens with a subcommand
                for piece in rest.split("|"):
                    first, *more = piece.split() or [""]
                    if not first or first.startswith(("-", "[")) or first.isupper():
                        break
                    found.add(path + (first,))
                    if any(w.startswith(("-", "[")) for w in more):
                        break   # options follow: any later `|` is theirs
                break
            if head.startswith(("-", "[")) or head.isupper():
                break
            path += (head,)
            found.add(path)
            rest = rest[len(head):].strip()
    return found


# ---- the checks ---------------------------------------------------------------------------------------------

def test_the_dashboards_the_docs_count_are_the_ones_the_code_builds():
    defined, listed = catalog_dashboards()
    committed = {p.stem: json.loads(p.read_text()).get("uid") for p in (ROOT / "dashboards" / "json").glob("*.json")}
    assert sorted(listed) == sorted(defined), "panels.DASHBOARDS lists every Dashboard(...) of panels.py once"
    assert sorted(committed) == sorted(defined.values()) == sorted(committed.values()), \
        f"dashboards/json/ holds one <uid>.json per dashboard of panels.py: {sorted(committed)} vs {defined}"
    n = len(defined)
    stated = {str(p.relative_to(ROOT)): c for p in project_docs() if (c := stated_dashboard_counts(p.read_text()))}
    assert "README.md" in stated, "README.md states how many dashboards there are"
    wrong = {doc: [s for k, s in c if k != n] for doc, c in stated.items()}
    assert not {d: w for d, w in wrong.items() if w}, f"the code builds {n} dashboards; the docs say {wrong}"
    in_table = table_first_cells(section(ROOT / "dashboards" / "README.md", "The dashboards"))
    uids = sorted(u for c in in_table for u in code_names(c))
    assert uids == sorted(defined.values()), f"dashboards/README.md's table names {uids}"


def test_the_schema_version_the_docs_state_is_the_newest_migration():
    newest = newest_migration()
    wrong = {}
    for p in project_docs():
        for m in re.finditer(r"schema(?: version)?:?\s+(\d+)\b(?!\.\d)", p.read_text(), re.IGNORECASE):
            if int(m.group(1)) != newest:
                wrong.setdefault(str(p.relative_to(ROOT)), []).append(m.group(0))
    assert not wrong, f"the newest migration is {newest:04d}; the docs say {wrong}"


def test_every_command_has_a_row_in_the_readme_and_every_row_a_command():
    known = cli_commands()
    rows = table_first_cells(section(ROOT / "README.md", "The commands"))
    documented = set().union(*(documented_commands(c, known) for c in rows))
    assert documented, "README.md's 'The commands' table names no command"
    missing = sorted(" ".join(p) for p in known - documented)
    unknown = sorted(" ".join(p) for p in documented - known)
    assert not unknown, f"README.md's commands table names commands the CLI lacks: {unknown}"
    assert not missing, f"commands without a row in README.md's 'The commands' table: {missing}"


def test_commscope_readme_lists_exactly_the_stores_tables_and_views():
    tables, views = schema_objects()
    tables |= store_made_tables()
    assert {"runs", "series", "schema_version"} <= tables and "v_run_metrics" in views   # the parser reads SQL
    readme = ROOT / "commscope" / "README.md"
    listed_tables = set().union(*map(code_names, table_first_cells(section(readme, "Tables"))))
    listed_views = set().union(*map(code_names, table_first_cells(section(readme, "Views"))))
    assert listed_tables == tables, (f"tables listed but not created: {sorted(listed_tables - tables)}; "
                                     f"created but not listed: {sorted(tables - listed_tables)}")
    view_names = {re.sub(r"\(.*", "", v) for v in listed_views}   # `routines_between(from, to)`-style functions too
    assert not views - view_names, f"views not listed: {sorted(views - view_names)}"
    stale = {v for v in view_names if v.startswith("v_")} - views
    assert not stale, f"views listed that the migrations do not leave: {sorted(stale)}"


HISTORY_WORDS = re.compile(
    r"\b(before|was|were|used to|no longer|instead|then|earlier|formerly|replaced|dropped|until)\b", re.IGNORECASE)
DATE = re.compile(r"\b(19|20)\d\d-\d\d-\d\d\b")


def units(text: str) -> list[str]:
    """Paragraphs, list items and table rows of a Markdown text, code blocks left out."""
    text = re.sub(r"```.*?```", "", text, flags=re.DOTALL)
    out, cur = [], []
    for line in text.splitlines():
        starts = re.match(r"\s*([-*]|\d+\.)\s", line) or line.startswith("|") or line.startswith("#")
        if not line.strip() or starts:
            if cur:
                out.append(" ".join(cur))
            cur = [line.strip()] if line.strip() else []
            if line.startswith(("|", "#")):
                out.append(line)
                cur = []
        else:
            cur.append(line.strip())
    if cur:
        out.append(" ".join(cur))
    return out


def migrations_named(unit: str, numbers: set[str]) -> set[str]:
    return {m for m in re.findall(r"(?<![\w.-])(\d{4})(?![\d.-])", unit) if m in numbers}


def test_readmes_carry_no_migration_history():
    numbers = {f"{n:04d}" for n, _ in migration_files()}
    told = {}
    for p in readmes():
        for unit in units(p.read_text()):
            named = migrations_named(unit, numbers)
            if not named:
                continue
            why = []
            if re.search(r"(?:^|[.:;]\s|^[-*]\s|\|\s*)(?:\*\*)?(?:migrations?\s+)?`?\d{4}(?:_\w+\.sql)?`?\s+"
                         r"(?:adds?|added|makes?|splits?|keeps?|versions?|drops?|replaces?|moves?)\b",
                         unit, re.IGNORECASE):
                why.append("a sentence opens with the migration")
            if w := HISTORY_WORDS.search(unit):
                why.append(f"history word {w.group(0)!r}")
            if DATE.search(unit):
                why.append("a date")
            if len(named) > 2:
                why.append(f"{len(named)} migrations named")
            if why:
                told.setdefault(str(p.relative_to(ROOT)), []).append(f"{'; '.join(why)}: {unit[:140]}...")
    assert not told, "READMEs retell migration history (tests/test_docs_drift.py says the rule):\n" + "\n".join(
        f"{doc}: {u}" for doc, us in told.items() for u in us)
