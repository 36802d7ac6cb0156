"""The store: connecting, migrating, and the embedded default server.

Connection follows libpq conventions: COMMSCOPE_DB_URL, else the PG*
variables and ~/.pgpass, else the embedded server under COMMSCOPE_HOME.
No password lives in code or config.

The embedded server is PostgreSQL's own initdb/pg_ctl on a private data
directory, listening only on a unix socket in that directory. The binaries
are Debian's postgresql when installed, else those the PyPI `pgserver`
package bundles (its server wrapper is not used: one start/stop path for both). As root it runs
as the `postgres` system user, because PostgreSQL refuses to run as root.
"""
from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import time
from importlib import resources
from pathlib import Path

import psycopg

DB_NAME = "commscope"


class DBError(RuntimeError):
    """A store problem with a message meant for the user."""


def home() -> Path:
    """All of commscope's local state: COMMSCOPE_HOME, else the user data dir
    (/var/lib/commscope for root, whose home the server user cannot reach)."""
    if os.environ.get("COMMSCOPE_HOME"):
        return Path(os.environ["COMMSCOPE_HOME"]).resolve()
    if os.geteuid() == 0:
        return Path("/var/lib/commscope")
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "commscope"


def pgserver_bindir() -> Path | None:
    """The PostgreSQL binaries bundled by the PyPI `pgserver` package, if installed."""
    import importlib.util
    spec = importlib.util.find_spec("pgserver")
    if spec is None or not spec.submodule_search_locations:
        return None
    d = Path(list(spec.submodule_search_locations)[0]) / "pginstall" / "bin"
    return d if d.is_dir() else None


def pg_bin(tool: str) -> str:
    """A PostgreSQL server binary: from COMMSCOPE_PG_BINDIR if set, else on
    PATH, else Debian's newest versioned dir, else the binaries the PyPI
    `pgserver` package bundles (pip install "commscope[embedded]")."""
    if os.environ.get("COMMSCOPE_PG_BINDIR"):
        d = Path(os.environ["COMMSCOPE_PG_BINDIR"])
        if not (d / tool).exists():
            raise DBError(f"COMMSCOPE_PG_BINDIR={d} has no {tool}")
        return str(d / tool)
    found = shutil.which(tool)
    if found:
        return found
    dirs = sorted(Path("/usr/lib/postgresql").glob("*/bin"), key=lambda p: int(p.parent.name), reverse=True)
    bundled = pgserver_bindir()
    for d in dirs + ([bundled] if bundled else []):
        if (d / tool).exists():
            return str(d / tool)
    raise DBError(f"PostgreSQL's {tool} is not installed; install Debian's postgresql (bash ci/setup.sh does) "
                  f"or the pgserver package (pip install \"commscope[embedded]\")")


class Embedded:
    """The private server under <home>/postgres."""

    def __init__(self, root: Path | None = None):
        self.root = (root or home()) / "postgres"
        self.data = self.root / "data"
        self.sock = self.root / "run"
        self.log = self.root / "server.log"
        self.user = "postgres" if os.geteuid() == 0 else None

    def _run(self, argv: list[str], check: bool = True) -> subprocess.CompletedProcess:
        if self.user:
            argv = ["runuser", "-u", self.user, "--", *argv]
        p = subprocess.run(argv, capture_output=True, text=True)
        if check and p.returncode != 0:
            raise DBError(f"{' '.join(argv)} failed:\n{p.stdout}{p.stderr}")
        return p

    def _own(self, path: Path) -> None:
        if self.user:
            pw = pwd.getpwnam(self.user)
            os.chown(path, pw.pw_uid, pw.pw_gid)

    def url(self) -> str:
        return f"postgresql:///{DB_NAME}?host={self.sock}&user=postgres"

    def running(self) -> bool:
        if not self.data.exists():
            return False
        return self._run([pg_bin("pg_ctl"), "status", "-D", str(self.data)], check=False).returncode == 0

    def start(self) -> str:
        if self.running():
            return self.url()
        if self.user:
            try:
                pwd.getpwnam(self.user)
            except KeyError:
                raise DBError(f"as root the server must run as a system user '{self.user}', which does not exist; "
                              f"install Debian's postgresql (it creates the user) or run as a non-root user") from None
        self.root.mkdir(parents=True, exist_ok=True)
        self.sock.mkdir(exist_ok=True)
        for p in (self.root, self.sock):
            self._own(p)
        if self.user:
            blocked = [p for p in self.root.parents if p.exists() and not os.stat(p).st_mode & 0o001]
            if blocked:
                raise DBError(f"as root the server runs as '{self.user}', which cannot enter {blocked[0]}; "
                              f"set COMMSCOPE_HOME to a directory it can reach, e.g. /var/lib/commscope")
        if not (self.data / "PG_VERSION").exists():
            self._run([pg_bin("initdb"), "-D", str(self.data), "-U", "postgres", "--auth=trust",
                       "--encoding=UTF8", "--locale=C.UTF-8"])
        # listen_addresses='' : no TCP at all, only the socket in our own directory.
        opts = f"-c listen_addresses='' -c unix_socket_directories='{self.sock}' -c fsync=on"
        self._run([pg_bin("pg_ctl"), "start", "-w", "-t", "60", "-D", str(self.data), "-l", str(self.log), "-o", opts])
        with psycopg.connect(f"postgresql:///postgres?host={self.sock}&user=postgres", autocommit=True) as c:
            if not c.execute("SELECT 1 FROM pg_database WHERE datname = %s", (DB_NAME,)).fetchone():
                c.execute(f'CREATE DATABASE "{DB_NAME}"')
        return self.url()

    def stop(self) -> bool:
        if not self.running():
            return False
        self._run([pg_bin("pg_ctl"), "stop", "-w", "-m", "fast", "-D", str(self.data)])
        return True


def url() -> str:
    """The DSN to use, by libpq conventions, falling back to the embedded server."""
    if os.environ.get("COMMSCOPE_DB_URL"):
        return os.environ["COMMSCOPE_DB_URL"]
    if any(os.environ.get(v) for v in ("PGHOST", "PGDATABASE", "PGSERVICE")):
        return ""  # let libpq read PG* variables and ~/.pgpass
    emb = Embedded()
    if not emb.running():
        raise DBError(f"no database: set COMMSCOPE_DB_URL (or PG* variables), or run 'commscope db start' "
                      f"for the embedded server under {emb.root}")
    return emb.url()


def connect(dsn: str | None = None, **kw) -> psycopg.Connection:
    dsn = url() if dsn is None else dsn
    try:
        return psycopg.connect(dsn, **kw)
    except psycopg.OperationalError as e:
        raise DBError(f"cannot connect to the database ({dsn or 'PG* variables'}): {e}") from e


def insert_advice(conn: psycopg.Connection, kind: str, run_id: int | None, source: str, summary: dict,
                  text: str) -> int:
    """One advisor's conclusion into `advice` (migration 0005); returns its id."""
    return conn.execute("INSERT INTO advice (kind, run_id, source, summary, text) VALUES (%s, %s, %s, %s, %s) "
                        "RETURNING id", (kind, run_id, source, json.dumps(summary), text)).fetchone()[0]


# ---- migrations -------------------------------------------------------------

def migrations() -> list[tuple[int, str, str]]:
    """(version, name, sql) of every migrations/NNNN_name.sql, in order."""
    out = []
    for f in resources.files("commscope").joinpath("migrations").iterdir():
        if f.name.endswith(".sql"):
            out.append((int(f.name[:4]), f.name, f.read_text()))
    return sorted(out)


def migrate(conn: psycopg.Connection) -> list[str]:
    """Applies pending migrations, each in its own transaction. An advisory
    lock serialises concurrent migrators."""
    applied = []
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(hashtext('commscope.migrate'))")
        conn.execute("CREATE TABLE IF NOT EXISTS schema_version ("
                     "version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())")
        done = {r[0] for r in conn.execute("SELECT version FROM schema_version")}
        for version, name, sql in migrations():
            if version in done:
                continue
            conn.execute(sql)
            conn.execute("INSERT INTO schema_version (version, name) VALUES (%s, %s)", (version, name))
            applied.append(name)
        if conn.execute("SELECT to_regclass('readonly_roles')").fetchone()[0]:
            for (role,) in conn.execute("SELECT name FROM readonly_roles").fetchall():
                _grant_views(conn, role)
    return applied


def _grant_views(conn: psycopg.Connection, role: str) -> None:
    from psycopg import sql
    if not conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone():
        return  # dropped by hand since
    views = [r[0] for r in conn.execute(
        "SELECT table_name FROM information_schema.views WHERE table_schema = 'public'")]
    for v in views:
        conn.execute(sql.SQL("GRANT SELECT ON {} TO {}").format(sql.Identifier(v), sql.Identifier(role)))


def grant_readonly(conn: psycopg.Connection, role: str) -> None:
    """A login role that can read the views and nothing else (for Grafana)."""
    from psycopg import sql
    with conn.transaction():
        if not conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone():
            conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
        conn.execute(sql.SQL("GRANT USAGE ON SCHEMA public TO {}").format(sql.Identifier(role)))
        _grant_views(conn, role)
        # Views that later migrations add are granted by migrate().
        conn.execute("INSERT INTO readonly_roles (name) VALUES (%s) ON CONFLICT DO NOTHING", (role,))
