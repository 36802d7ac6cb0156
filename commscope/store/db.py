"""The store: connecting, migrating, roles, and the embedded default server.

Connection follows libpq conventions: COMMSCOPE_DB_URL, else the PG*
variables and ~/.pgpass, else the embedded server under COMMSCOPE_HOME.
No password lives in code or config, and none is printed: every DSN in a
message goes through `masked`.

The embedded server is PostgreSQL's own initdb/pg_ctl on a private data
directory. It admits only its owner (the user who ran `db start`):
- it listens on a unix socket in a 0700 directory, socket mode 0700, and on
  no TCP address unless `db start --listen` asks for one (then
  scram-sha-256 passwords on TCP);
- every local connection is checked by peer authentication against an ident
  map that names the owner, never `trust`;
- commscope itself connects as the role `commscope`, which owns the schema
  but is no superuser and cannot create roles, databases or extensions, run
  programs or read server files. The superuser `postgres` is used only to
  create roles and the database.
The binaries are Debian's postgresql when installed, else those the PyPI
`pgserver` package bundles (its server wrapper is not used: one start/stop
path for both). As root the server runs as the `postgres` system user,
because PostgreSQL refuses to run as root; binaries that user cannot reach
(a venv inside a 0700 checkout) are copied beside the data first.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import pwd
import re
import shutil
import subprocess
import urllib.parse
from importlib import resources
from pathlib import Path

import psycopg
from psycopg import sql

DB_NAME = "commscope"
OWNER = "commscope"        # the role commscope works as: owns the schema, no superuser
SUPERUSER = "postgres"     # the embedded server's bootstrap superuser, for roles and databases only
IDENT_MAP = "commscope"


class DBError(RuntimeError):
    """A store problem with a message meant for the user."""


_URI = re.compile(r"(postgres(?:ql)?://)(\S*)", re.I)


def _mask_userinfo(m: re.Match) -> str:
    """A URI's user:password@ part with the password as ***: the user information runs to the URI's last '@',
    so a password holding an unescaped '@', ':' or '/' is hidden whole."""
    scheme, rest = m.group(1), m.group(2)
    at = rest.rfind("@")
    user, colon, _password = rest[:at].partition(":") if at >= 0 else ("", "", "")
    return f"{scheme}{user}:***@{rest[at + 1:]}" if colon else m.group(0)


def masked(text: str, dsn: str | None = None) -> str:
    """TEXT (a DSN, or a message holding one) with every password replaced by ***: a libpq URI's
    user:password@, however the password is written (%-encoded, or with unescaped '@'), and password=
    in a URI's query or a key=value conninfo (quoted, with escaped quotes, or bare). Whatever DSN,
    COMMSCOPE_DB_URL or TEXT itself (when it is a DSN) hold as a password is hidden wherever it shows,
    also where libpq quotes it alone."""
    secrets = _secrets(dsn or "") | _secrets(os.environ.get("COMMSCOPE_DB_URL", ""))
    if _URI.match(text.strip()):
        secrets |= _secrets(text.strip())
    text = _URI.sub(_mask_userinfo, text)
    text = re.sub(_PASSWORD, r"\1***", text)
    for s in sorted(secrets, key=len, reverse=True):
        # a short password only where it stands alone, so the rest of the message stays readable
        text = text.replace(s, "***") if len(s) >= 4 else re.sub(rf"(?<!\w){re.escape(s)}(?!\w)", "***", text)
    return text


_PASSWORD = re.compile(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'?|[^&\s]*)", re.I)


def _secrets(dsn: str) -> set[str]:
    """What in DSN may be a password, as written and %-decoded: libpq's reading, a URI's user information
    after its first ':' (to the last '@', spaces included), and every password= value."""
    if not dsn:
        return set()
    found = set()
    try:
        found.add(psycopg.conninfo.conninfo_to_dict(dsn).get("password") or "")
    except psycopg.Error:
        pass
    m = re.match(r"\s*postgres(?:ql)?://(.*)@", dsn, re.I | re.S)
    if m and ":" in m.group(1):
        found.add(m.group(1).split(":", 1)[1])
    found |= {v[1].strip("'") for v in _PASSWORD.findall(dsn)}
    found |= {urllib.parse.unquote(s) for s in found}
    return {s for s in found if s and s != "***"}


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
    """The private server under <home>/postgres, admitting only its owner."""

    def __init__(self, root: Path | None = None):
        self.root = (root or home()) / "postgres"
        self.data = self.root / "data"
        self.sock = self.root / "run"
        self.log = self.root / "server.log"
        self.user = "postgres" if os.geteuid() == 0 else None   # the OS user the server runs as
        self.owner = pwd.getpwuid(os.geteuid()).pw_name           # the OS user peer auth admits

    def _run(self, argv: list[str], check: bool = True) -> subprocess.CompletedProcess:
        if self.user:
            # util-linux's runuser lives in /usr/sbin, which a root PATH may lack
            runuser = shutil.which("runuser") or shutil.which("runuser", path="/usr/sbin:/sbin")
            if not runuser:
                raise DBError(f"running the embedded server as root needs runuser (util-linux) to start it as "
                              f"'{self.user}', and none is on PATH or in /usr/sbin: install util-linux, or give "
                              f"COMMSCOPE_DB_URL of a server of your own")
            argv = [runuser, "-u", self.user, "--", *argv]
        p = subprocess.run(argv, capture_output=True, text=True)
        if check and p.returncode != 0:
            raise DBError(f"{' '.join(argv)} failed:\n{p.stdout}{p.stderr}")
        return p

    def _own(self, path: Path) -> None:
        if self.user:
            pw = pwd.getpwnam(self.user)
            os.chown(path, pw.pw_uid, pw.pw_gid)

    def port(self) -> int:
        """The port `db start` last wrote (it names the socket file too), 5432 before any."""
        conf = self.data / "commscope.conf"
        if conf.exists():
            m = re.search(r"^port = (\d+)$", conf.read_text(), re.M)
            if m:
                return int(m.group(1))
        return 5432

    def url(self, dbname: str = DB_NAME, user: str = OWNER) -> str:
        port = self.port()
        return f"postgresql:///{dbname}?host={self.sock}&user={user}" + (f"&port={port}" if port != 5432 else "")

    def bin(self, tool: str) -> str:
        """A server binary the server's user can execute. As root, binaries
        under a directory `postgres` cannot enter (pgserver's, inside a venv in
        a 0700 checkout) are copied once beside the data directory."""
        # The server's own directory first (pg_dump, psql of the server's version), else as found. Not
        # resolved further: Debian's /usr/bin/pg_dump is a wrapper that needs the name it was called by.
        server_dir = Path(pg_bin("pg_ctl")).resolve().parent
        found = server_dir / tool if (server_dir / tool).exists() else Path(pg_bin(tool))
        if not self.user or self._run(["test", "-x", str(found)], check=False).returncode == 0:
            return str(found)
        install = found.resolve().parent.parent  # <prefix>/bin/<tool>: copy the whole prefix (lib, share)
        # pgserver's binaries find their libraries through RPATH $ORIGIN/../../../pgserver.libs:
        # the copy keeps the prefix's parent folder and any *.libs beside it, so relative paths still hold.
        copy = self.root / "pgcopy"
        target = copy / install.parent.name / install.name
        if not (target / "bin" / tool).exists():
            shutil.rmtree(copy, ignore_errors=True)
            shutil.copytree(install, target, symlinks=True)
            for libs in install.parent.parent.glob("*.libs"):
                shutil.copytree(libs, copy / libs.name, symlinks=True)
            for d, _, _ in os.walk(copy):
                os.chmod(d, 0o755)
        return str(target / "bin" / tool)

    def running(self) -> bool:
        if not self.data.exists():
            return False
        return self._run([self.bin("pg_ctl"), "status", "-D", str(self.data)], check=False).returncode == 0

    def start(self, listen: str | None = None, port: int = 5432) -> str:
        """Starts the server (once, however many callers race) and makes sure
        the owner role and database exist; returns commscope's URL.
        `listen` opens TCP on that address, with scram-sha-256 passwords."""
        if self.user:
            try:
                pwd.getpwnam(self.user)
            except KeyError:
                raise DBError(f"as root the server must run as a system user '{self.user}', which does not exist; "
                              f"install Debian's postgresql (it creates the user) or run as a non-root user") from None
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.root / "start.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)     # two `db start` at once: the second waits, then finds it running
            try:
                self._start_locked(listen, port)
            except psycopg.OperationalError as e:
                raise DBError(f"the embedded server under {self.root} did not accept its owner: {e}; "
                              f"see {self.log}") from e
        return self.url()

    def _start_locked(self, listen: str | None, port: int) -> None:
        self.sock.mkdir(mode=0o700, exist_ok=True)
        self.sock.chmod(0o700)
        for p in (self.root, self.sock):
            self._own(p)
        if self.user:
            blocked = [p for p in self.root.parents if p.exists() and not os.stat(p).st_mode & 0o001]
            if blocked:
                raise DBError(f"as root the server runs as '{self.user}', which cannot enter {blocked[0]}; "
                              f"set COMMSCOPE_HOME to a directory it can reach, e.g. /var/lib/commscope")
        if not (self.data / "PG_VERSION").exists():
            self._run([self.bin("initdb"), "-D", str(self.data), "-U", SUPERUSER, "--auth-local=peer",
                       "--auth-host=scram-sha-256", "--encoding=UTF8", "--locale=C.UTF-8"])
        conf = self.data / "commscope.conf"
        before = conf.read_text() if conf.exists() else None
        self._write_config(listen, port)
        if self.running():
            # listen_addresses and port take a restart; the access rules a reload
            if conf.read_text() == before:
                self._run([self.bin("pg_ctl"), "reload", "-D", str(self.data)])
            else:
                self._run([self.bin("pg_ctl"), "restart", "-w", "-t", "60", "-m", "fast", "-D", str(self.data),
                           "-l", str(self.log)])
        else:
            self._run([self.bin("pg_ctl"), "start", "-w", "-t", "60", "-D", str(self.data), "-l", str(self.log)])
        with psycopg.connect(self.url("postgres", SUPERUSER), autocommit=True) as c:
            if not c.execute("SELECT 1 FROM pg_database WHERE datname = %s", (DB_NAME,)).fetchone():
                c.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(DB_NAME)))
        self.prepare_database(DB_NAME)

    def _write_config(self, listen: str | None, port: int) -> None:
        """The server's settings, access rules and ident map, rewritten at every
        start, so a store made by an older commscope (trust, a 0777 socket) is
        closed the next time it starts."""
        conf = [f"unix_socket_directories = '{self.sock}'", "unix_socket_permissions = 0700",
                f"listen_addresses = '{listen or ''}'", f"port = {int(port)}",
                "password_encryption = 'scram-sha-256'", "fsync = on", "timezone = 'UTC'", "log_timezone = 'UTC'",
                # Dashboard queries are short: JIT costs more than it saves (~47 ms a plan; worst p95 83-114 -> 56 ms off)
                "jit = off"]
        hba = [f"local all all peer map={IDENT_MAP}"]
        if listen:
            hba.append("host all all all scram-sha-256")
        files = {"commscope.conf": conf, "pg_hba.conf": hba, "pg_ident.conf": self._ident_lines()}
        for name, lines in files.items():
            self._write(name, lines)
        main_conf = self.data / "postgresql.conf"
        if "include_if_exists = 'commscope.conf'" not in main_conf.read_text():
            with main_conf.open("a") as f:
                f.write("\ninclude_if_exists = 'commscope.conf'\n")

    def _write(self, name: str, lines: list[str]) -> None:
        path = self.data / name
        path.write_text("# written by `commscope db start` at every start; edits are lost\n" + "\n".join(lines) + "\n")
        self._own(path)
        path.chmod(0o600)

    def _ident_lines(self) -> list[str]:
        """Who may connect as whom: the owner (and the server's own user) as the
        superuser and commscope's role, plus the local roles granted since."""
        people = sorted({self.owner, self.user or self.owner})
        roles = [SUPERUSER, OWNER] + self.local_roles()
        return [f"{IDENT_MAP} {p} {r}" for p in people for r in dict.fromkeys(roles)]

    def local_roles(self) -> list[str]:
        f = self.root / "local_roles"
        return f.read_text().split() if f.exists() else []

    def allow_local(self, role: str) -> None:
        """Lets the owner connect as ROLE over the socket (a role made by grant-readonly or grant-writer)."""
        if role in self.local_roles():
            return
        with (self.root / "local_roles").open("a") as f:
            f.write(role + "\n")
        self._write("pg_ident.conf", self._ident_lines())
        self._run([self.bin("pg_ctl"), "reload", "-D", str(self.data)])

    def stop(self) -> bool:
        if not self.running():
            return False
        self._run([self.bin("pg_ctl"), "stop", "-w", "-m", "fast", "-D", str(self.data)])
        return True

    def last_failure(self) -> str | None:
        """The server log's newest PANIC or FATAL line (a full disk, a kill), for messages."""
        try:
            lines = self.log.read_text(errors="replace").splitlines()[-200:]
        except OSError:
            return None
        bad = [ln for ln in lines if "PANIC:" in ln or ("FATAL:" in ln and "terminating connection" not in ln)]
        return bad[-1].split(":", 3)[-1].strip() if bad else None

    def admin(self, dbname: str = DB_NAME) -> psycopg.Connection:
        """The superuser, for roles and databases only."""
        return psycopg.connect(self.url(dbname, SUPERUSER), autocommit=True)

    def prepare_database(self, name: str) -> None:
        """Makes the role commscope (no superuser, no CREATEROLE/CREATEDB) the
        owner of NAME's public schema and of every object in it. The database
        itself stays the superuser's, so commscope cannot create extensions
        (trusted ones need CREATE on the database). Objects an older store
        made as the superuser are handed over."""
        with self.admin("postgres") as c:
            if not c.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (OWNER,)).fetchone():
                c.execute(sql.SQL("CREATE ROLE {} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE").format(
                    sql.Identifier(OWNER)))
        with self.admin(name) as c:
            c.execute(sql.SQL("ALTER SCHEMA public OWNER TO {}").format(sql.Identifier(OWNER)))
            c.execute(HAND_OVER, prepare=False)


# Every relation, routine and free-standing type in `public` not owned by commscope's role is handed to it.
# Tables first: their indexes and owned sequences follow them.
HAND_OVER = """
DO $$
DECLARE r record;
BEGIN
  FOR r IN SELECT c.oid::regclass AS name, c.relkind FROM pg_class c
           WHERE c.relnamespace = 'public'::regnamespace AND c.relowner <> 'commscope'::regrole
             AND c.relkind IN ('r', 'p', 'v', 'm', 'f', 'S')
             AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.objid = c.oid AND d.classid = 'pg_class'::regclass
                             AND d.deptype IN ('a', 'i') AND c.relkind = 'S')
           ORDER BY c.relkind IN ('r', 'p') DESC
  LOOP
    EXECUTE format('ALTER %s %s OWNER TO commscope',
                   CASE r.relkind WHEN 'v' THEN 'VIEW' WHEN 'm' THEN 'MATERIALIZED VIEW'
                                  WHEN 'S' THEN 'SEQUENCE' WHEN 'f' THEN 'FOREIGN TABLE' ELSE 'TABLE' END, r.name);
  END LOOP;
  FOR r IN SELECT p.oid::regprocedure AS name FROM pg_proc p
           WHERE p.pronamespace = 'public'::regnamespace AND p.proowner <> 'commscope'::regrole LOOP
    EXECUTE format('ALTER ROUTINE %s OWNER TO commscope', r.name);
  END LOOP;
  FOR r IN SELECT t.oid::regtype AS name FROM pg_type t
           WHERE t.typnamespace = 'public'::regnamespace AND t.typowner <> 'commscope'::regrole
             AND t.typrelid = 0 AND t.typelem = 0 LOOP
    EXECUTE format('ALTER TYPE %s OWNER TO commscope', r.name);
  END LOOP;
END $$"""


def external_dsn() -> str | None:
    """COMMSCOPE_DB_URL, or "" when PG* variables name a server; None means the embedded one."""
    if os.environ.get("COMMSCOPE_DB_URL"):
        return os.environ["COMMSCOPE_DB_URL"]
    if any(os.environ.get(v) for v in ("PGHOST", "PGDATABASE", "PGSERVICE")):
        return ""  # let libpq read PG* variables and ~/.pgpass
    return None


def url() -> str:
    """The DSN to use, by libpq conventions, falling back to the embedded server. A DSN libpq cannot read is
    a DBError (parsed)."""
    given = external_dsn()
    if given is not None:
        parsed(given)
        return given
    emb = Embedded()
    if not emb.running():
        raise DBError(f"no database: set COMMSCOPE_DB_URL (or PG* variables), or run 'commscope db start' "
                      f"for the embedded server under {emb.root}")
    return emb.url()


def parsed(dsn: str) -> dict:
    """libpq's reading of DSN ({} for none). One it cannot read, or whose port is no port, is a DBError
    naming it with its password masked; one that is neither a URI nor key=value settings (a password pasted
    alone, say) is not shown at all."""
    if not dsn:
        return {}
    try:
        given = psycopg.conninfo.conninfo_to_dict(dsn)
    except psycopg.Error as e:
        if not (_URI.match(dsn.strip()) or "=" in dsn):   # no URI, no key=value: it may be a password alone
            raise DBError(f"the store's address ({len(dsn)} characters, not shown) is neither a postgresql:// URI "
                          f"nor key=value settings; correct COMMSCOPE_DB_URL, e.g. "
                          f"postgresql://user@host:5432/commscope") from None
        raise DBError(f"the store's address {masked(dsn, dsn)} is not one libpq can read "
                      f"({masked(str(e).strip().splitlines()[0], dsn)}); correct COMMSCOPE_DB_URL, e.g. "
                      f"postgresql://user@host:5432/commscope") from None
    for port in str(given.get("port") or "").split(","):
        if port and not (port.isdigit() and 1 <= int(port) <= 65535):
            raise DBError(f"the store's address {masked(dsn, dsn)} gives port {port!r}, which is not a port "
                          f"(1 to 65535); correct COMMSCOPE_DB_URL, e.g. postgresql://user@host:5432/commscope")
    return given


def connect(dsn: str | None = None, **kw) -> psycopg.Connection:
    """A connection named `commscope` in pg_stat_activity, in the UTC time
    zone, that gives up after COMMSCOPE_CONNECT_TIMEOUT seconds (10), unless
    the DSN or PG* variables say otherwise."""
    dsn = url() if dsn is None else dsn
    given = parsed(dsn)
    if "application_name" not in given and not os.environ.get("PGAPPNAME"):
        kw.setdefault("application_name", "commscope")
    if "options" not in given and not os.environ.get("PGOPTIONS") and "options" not in kw:
        kw["options"] = "-c TimeZone=UTC"   # times come out in UTC, whatever the server's zone
    if "connect_timeout" not in given and not os.environ.get("PGCONNECT_TIMEOUT"):
        kw.setdefault("connect_timeout", int(os.environ.get("COMMSCOPE_CONNECT_TIMEOUT", "10")))
    try:
        return psycopg.connect(dsn, **kw)
    except psycopg.Error as e:   # libpq's message in one line: every command's refusal is one line
        raise DBError(f"cannot connect to the database ({masked(dsn, dsn) if dsn else 'PG* variables'}): "
                      f"{' '.join(masked(str(e), dsn).split())}") from e


def writer_session(conn: psycopg.Connection) -> None:
    """Timeouts for a transaction that writes: a lock held longer than
    COMMSCOPE_LOCK_TIMEOUT (60s), a statement running longer than
    COMMSCOPE_STATEMENT_TIMEOUT (30min), or a writer idle inside its
    transaction longer than COMMSCOPE_IDLE_TIMEOUT (10min, a hung ingest)
    end the transaction instead of blocking every other writer. Call inside
    the transaction (SET LOCAL)."""
    for setting, var, default in (("lock_timeout", "COMMSCOPE_LOCK_TIMEOUT", "60s"),
                                  ("statement_timeout", "COMMSCOPE_STATEMENT_TIMEOUT", "30min"),
                                  ("idle_in_transaction_session_timeout", "COMMSCOPE_IDLE_TIMEOUT", "10min")):
        conn.execute("SELECT set_config(%s, %s, true)", (setting, os.environ.get(var, default)))


def take_write_lock(conn: psycopg.Connection, name: str) -> None:
    """The transaction-scoped advisory lock NAME, waiting at most the lock
    timeout; a DBError names the session that holds it."""
    if conn.execute("SELECT pg_try_advisory_xact_lock(hashtext(%s))", (name,)).fetchone()[0]:
        return
    holder = conn.execute(
        "SELECT a.pid, a.application_name, a.client_addr, a.xact_start FROM pg_locks l "
        "JOIN pg_stat_activity a ON a.pid = l.pid WHERE l.locktype = 'advisory' AND l.granted "
        "AND l.objid = hashtext(%s)::oid", (name,)).fetchone()
    try:
        conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (name,))
    except psycopg.errors.LockNotAvailable:
        who = (f"session {holder[0]} ({holder[1] or 'no application name'}"
               f"{', from ' + str(holder[2]) if holder[2] else ''}, in its transaction since {holder[3]})"
               if holder else "another session")
        raise DBError(f"the store's write lock '{name}' is held by {who}; gave up after "
                      f"{os.environ.get('COMMSCOPE_LOCK_TIMEOUT', '60s')}. Wait for it to finish, end it with "
                      f"SELECT pg_terminate_backend(pid) if it hangs, or raise COMMSCOPE_LOCK_TIMEOUT") from None


def insert_advice(conn: psycopg.Connection, kind: str, run_id: int | None, source: str, summary: dict,
                  text: str) -> int:
    """One advisor's conclusion into `advice` (migration 0005); returns its id."""
    return conn.execute("INSERT INTO advice (kind, run_id, source, summary, text) VALUES (%s, %s, %s, %s, %s) "
                        "RETURNING id", (kind, run_id, source, json.dumps(summary), text)).fetchone()[0]


# ---- migrations -------------------------------------------------------------

def migrations() -> list[tuple[int, str, str]]:
    """(version, name, sql) of every migrations/NNNN_name.sql, in order: the tables, indexes, triggers and data
    changes (VIEWS_FILE holds the views)."""
    out = []
    for f in resources.files("commscope.store").joinpath("migrations").iterdir():
        if f.name.endswith(".sql"):
            out.append((int(f.name[:4]), f.name, f.read_text()))
    return sorted(out)


def migrate(conn: psycopg.Connection) -> list[str]:
    """Applies pending migrations, each in its own transaction. An advisory
    lock serialises concurrent migrators. A role that may not change the
    schema (a grant-writer or read-only role) gets a DBError naming it."""
    try:
        return _migrate(conn)
    except psycopg.errors.InsufficientPrivilege as e:
        role = conn.execute("SELECT current_user").fetchone()[0] if not conn.closed else "in use"
        raise DBError(f"role {role} may not change the store's schema ({e.diag.message_primary}); run "
                      f"'commscope db migrate' as the schema's owner") from None


# Every view of the store and the SQL functions only views use, one definition each (commscope/store/views.sql).
VIEWS_FILE = "views.sql"


def views_sql() -> tuple[str, str]:
    """(the text of VIEWS_FILE, its SHA-256 in hex)."""
    text = resources.files("commscope.store").joinpath(VIEWS_FILE).read_text()
    return text, hashlib.sha256(text.encode()).hexdigest()


# Every view in public, dependents first: each view before any view it reads.
_VIEWS_DEPENDENTS_FIRST = """
WITH RECURSIVE v AS (
    SELECT c.oid FROM pg_class c WHERE c.relnamespace = 'public'::regnamespace AND c.relkind = 'v'
), reads AS (
    SELECT DISTINCT r.ev_class AS reader, d.refobjid AS read
    FROM pg_depend d JOIN pg_rewrite r ON r.oid = d.objid AND d.classid = 'pg_rewrite'::regclass
    WHERE r.ev_class IN (SELECT oid FROM v) AND d.refobjid IN (SELECT oid FROM v) AND d.refobjid <> r.ev_class
), depth(oid, lvl) AS (
    SELECT oid, 0 FROM v
    UNION ALL
    SELECT reads.read, depth.lvl + 1 FROM depth JOIN reads ON reads.reader = depth.oid
)
SELECT oid::regclass::text FROM depth GROUP BY oid ORDER BY max(lvl), 1"""


def _apply_views(conn: psycopg.Connection, text: str, checksum: str) -> None:
    """Drops every view (dependents first) and creates them from TEXT, recording CHECKSUM."""
    for (name,) in conn.execute(_VIEWS_DEPENDENTS_FIRST).fetchall():
        conn.execute(f"DROP VIEW {name}")
    conn.execute(text)
    conn.execute("INSERT INTO schema_repeatable (name, checksum) VALUES (%s, %s) ON CONFLICT (name) DO UPDATE "
                 "SET checksum = excluded.checksum, applied_at = now()", (VIEWS_FILE, checksum))


def _migrate(conn: psycopg.Connection) -> list[str]:
    """The pending versioned migrations in order, then VIEWS_FILE when they ran or its checksum differs from the
    one the store holds; the names of what was applied."""
    applied = []
    with conn.transaction():
        writer_session(conn)
        take_write_lock(conn, "commscope.migrate")
        conn.execute("CREATE TABLE IF NOT EXISTS schema_version ("
                     "version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())")
        conn.execute("CREATE TABLE IF NOT EXISTS schema_repeatable ("
                     "name text PRIMARY KEY, checksum text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())")
        done = {r[0] for r in conn.execute("SELECT version FROM schema_version")}
        for version, name, statements in migrations():
            if version in done:
                continue
            conn.execute(statements)
            conn.execute("INSERT INTO schema_version (version, name) VALUES (%s, %s)", (version, name))
            applied.append(name)
        text, checksum = views_sql()
        stored = conn.execute("SELECT checksum FROM schema_repeatable WHERE name = %s", (VIEWS_FILE,)).fetchone()
        if applied or stored is None or stored[0] != checksum:
            _apply_views(conn, text, checksum)
            applied.append(VIEWS_FILE)
        if conn.execute("SELECT to_regclass('readonly_roles')").fetchone()[0]:
            for (role,) in conn.execute("SELECT name FROM readonly_roles").fetchall():
                _grant_views(conn, role)
    return applied


def schema_status(conn: psycopg.Connection) -> tuple[int | None, int, int]:
    """(schema version, runs stored before the measurement model, runs measured under an older model version)
    of the store: the runs v_runs_needing_reingest lists, by reason (0, 0 before that view's migration)."""
    version = conn.execute("SELECT max(version) FROM schema_version").fetchone()[0]
    if not conn.execute("SELECT to_regclass('v_runs_needing_reingest')").fetchone()[0]:
        return version, 0, 0
    before, older = conn.execute(
        "SELECT count(*) FILTER (WHERE r.model_version IS NULL), count(r.model_version) "
        "FROM v_runs_needing_reingest v JOIN runs r ON r.id = v.run_id").fetchone()
    return version, before, older


def run_matrix(conn: psycopg.Connection, run_id: int) -> tuple[int, str, str, str | None, dict[tuple[int, int], int]]:
    """A stored run's (ranks, source, content hash, decomposition, rank-to-rank bytes) for the placement advisor.
    LookupError when there is no such run, or when it is partial (its matrix lacks the missing ranks' messages)."""
    row = conn.execute("SELECT ranks, source, content_hash, decomposition, status, metadata->'missing_ranks' "
                       "FROM runs WHERE id = %s", (run_id,)).fetchone()
    if not row:
        raise LookupError(f"no run {run_id} in the store")
    ranks, source, content_hash, decomposition, status, missing = row
    if status == "partial":
        raise LookupError(f"run {run_id} is partial: rank(s) {', '.join(map(str, missing or []))} of its {ranks} have "
                          f"no data, so its matrix lacks their messages; advise from a complete run")
    matrix = {(s, d): b for s, d, b in conn.execute("SELECT src, dst, bytes FROM v_comm_matrix WHERE run_id = %s",
                                                     (run_id,))}
    return ranks, source, content_hash, decomposition, matrix


# The base tables that `commscope check`, `changepoints` and the advisors read (gate/, advise/, store/queries/): a
# read-only role reads them too, so it gets the owner's verdicts and advice; it writes nothing.
READER_TABLES = ("runs", "campaigns", "series", "run_windows", "foms", "systems", "stacks", "nodes", "node_metrics",
                 "hardware_versions", "annotations", "change_points", "change_point_state", "advice",
                 "accepted_levels")


def _grant_views(conn: psycopg.Connection, role: str) -> None:
    """SELECT on every view and on READER_TABLES to ROLE (read-only)."""
    if not conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone():
        return  # dropped by hand since
    views = [r[0] for r in conn.execute(
        "SELECT table_name FROM information_schema.views WHERE table_schema = 'public'")]
    views += [t for t in READER_TABLES if conn.execute("SELECT to_regclass(%s)", (f"public.{t}",)).fetchone()[0]]
    for v in views:
        conn.execute(sql.SQL("GRANT SELECT ON {} TO {}").format(sql.Identifier(v), sql.Identifier(role)))


# What `check` and `changepoints` write of change points: a read-only role computes into private copies.
CHANGE_POINT_TABLES, CHANGE_POINT_VIEWS = ("change_points", "change_point_state"), ("v_change_points",)


def private_copies(conn: psycopg.Connection, tables=CHANGE_POINT_TABLES, views=CHANGE_POINT_VIEWS) -> None:
    """For a role that may read TABLES but not write them: session-private (TEMP) copies holding their rows, and
    of VIEWS over them. Unqualified names reach pg_temp first, so the same code computes and reads back what it
    would store, and nothing is stored. Commits (the copies last for the session)."""
    defs = {v: conn.execute("SELECT pg_get_viewdef(%s::regclass)", (f"public.{v}",)).fetchone()[0] for v in views}
    for t in tables:
        conn.execute(sql.SQL("CREATE TEMP TABLE {t} (LIKE public.{t} INCLUDING DEFAULTS INCLUDING CONSTRAINTS "
                             "INCLUDING INDEXES)").format(t=sql.Identifier(t)))
        conn.execute(sql.SQL("INSERT INTO pg_temp.{t} SELECT * FROM public.{t}").format(t=sql.Identifier(t)))
    for v, d in defs.items():
        conn.execute(sql.SQL("CREATE TEMP VIEW {} AS ").format(sql.Identifier(v)) + sql.SQL(d))
    conn.commit()


def _create_login_role(admin: psycopg.Connection, role: str, password: str | None) -> None:
    """ROLE as a plain login role (no superuser, no CREATEDB/CREATEROLE), with a scram password if given."""
    verb = "ALTER" if admin.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone() else "CREATE"
    q = sql.SQL(verb + " ROLE {} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE").format(sql.Identifier(role))
    if password:
        admin.execute("SET password_encryption = 'scram-sha-256'")
        q = q + sql.SQL(" PASSWORD {}").format(sql.Literal(password))
    admin.execute(q)


def grant_readonly(conn: psycopg.Connection, role: str, admin: psycopg.Connection | None = None,
                   password: str | None = None) -> None:
    """A login role that can read the views and READER_TABLES, and write nothing (for Grafana, and for check,
    changepoints and the advisors, which then print what they may not store). ADMIN (a connection allowed to create roles; default CONN) creates it;
    CONN, the schema's owner, grants the views. Views that later migrations
    add are granted by migrate()."""
    _create_login_role(admin or conn, role, password)
    with conn.transaction():
        conn.execute(sql.SQL("GRANT USAGE ON SCHEMA public TO {}").format(sql.Identifier(role)))
        _grant_views(conn, role)
        conn.execute("INSERT INTO readonly_roles (name) VALUES (%s) ON CONFLICT DO NOTHING", (role,))


def grant_writer(conn: psycopg.Connection, role: str, admin: psycopg.Connection | None = None,
                 password: str | None = None) -> None:
    """A login role that can ingest (read and write every table, use the
    sequences and functions) but not create, alter or drop anything: for the
    ingest jobs of a site server. Default privileges carry the grants to what
    later migrations create as the schema's owner."""
    _create_login_role(admin or conn, role, password)
    r = sql.Identifier(role)
    with conn.transaction():
        for q in ("GRANT USAGE ON SCHEMA public TO {r}",
                  "GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {r}",
                  "GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA public TO {r}",
                  "GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA public TO {r}",
                  "ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO {r}",
                  "ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT USAGE, SELECT, UPDATE ON SEQUENCES TO {r}",
                  "ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT EXECUTE ON FUNCTIONS TO {r}"):
            conn.execute(sql.SQL(q).format(r=r))
