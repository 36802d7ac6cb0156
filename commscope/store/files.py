"""The files the store writes and reads: a dump of the store (pg_dump) and its restore (psql, into a store with
no runs), and the safe writing of an output file that they, the report and the gate share: output_file refuses a
directory, a device, a FIFO or a dangling link before anything is opened, and replacing writes beside the file and
renames it over it, so a failure leaves the old file whole."""
from __future__ import annotations

import os
import stat
import subprocess
import tempfile
from contextlib import contextmanager
from pathlib import Path

import psycopg

from commscope.store.db import (DBError, Embedded, connect, external_dsn, masked, migrate, migrations, parsed,
                                pg_bin)


def _tool(name: str) -> str:
    """pg_dump/pg_restore/psql: the embedded server's own when it serves, else the newest found."""
    return Embedded().bin(name) if external_dsn() is None else pg_bin(name)


def _pg(argv: list[str], what: str, dsn: str = "", **kw) -> subprocess.CompletedProcess:
    """A PostgreSQL client program; DSN's password goes to it as PGPASSWORD (not on its command line), and
    its own messages are shown with the password masked."""
    conninfo = parsed(dsn)
    password = conninfo.pop("password", None)
    env = {**os.environ, "PGAPPNAME": "commscope", **({"PGPASSWORD": password} if password else {})}
    argv = [*argv, *([f"--dbname={psycopg.conninfo.make_conninfo('', **conninfo)}"] if dsn else [])]
    p = subprocess.run(argv, capture_output=True, text=True, env=env, **kw)
    if p.returncode != 0:
        raise DBError(f"{what} failed: {masked(p.stderr.strip() or p.stdout.strip(), dsn)}")
    return p


_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISSOCK, "a socket"))


def output_file(path: Path, what: str) -> Path:
    """Where WHAT (a dump, a report) may be written: PATH when it is a regular file or new, the file a
    symbolic link at PATH names when that is one. Anything else (a device, a FIFO, a socket, a directory,
    a link to one or to nothing) is a DBError before anything is opened."""
    path = Path(path)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        if path.is_symlink():
            raise DBError(f"{path}: a symbolic link to {os.readlink(path)}, which does not exist; give the "
                          f"{what} a file name of its own") from None
        return path
    except OSError as e:
        raise DBError(f"{path}: cannot write the {what} there ({e.strerror}); give a file in a writable "
                      f"directory") from None
    kind = next((k for test, k in _KINDS if test(st.st_mode)), None if stat.S_ISREG(st.st_mode) else "not a file")
    if kind:
        link = f" (a symbolic link to {os.readlink(path)})" if path.is_symlink() else ""
        raise DBError(f"{path}{link} is {kind}, not a regular file: nothing was written; give the {what} a "
                      f"regular file name (new or existing)")
    return Path(os.path.realpath(path))


@contextmanager
def replacing(path: Path, what: str, mode: int | None = None):
    """Yields a new file beside PATH for WHAT to be written into, of mode MODE (default: as the umask
    makes new files); when the block ends without an error it replaces PATH whole (output_file says
    what PATH may be), else it is removed."""
    target = output_file(path, what)
    try:
        fd, part = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".part")
    except OSError as e:
        raise DBError(f"{path}: cannot write the {what} there ({e.strerror}); give a file in a writable "
                      f"directory") from None
    os.close(fd)
    part = Path(part)
    if mode is None:
        mask = os.umask(0o022)
        os.umask(mask)
        mode = 0o666 & ~mask
    try:
        part.chmod(mode)
        yield part
        output_file(path, what)   # still a file: not swapped for a device or a FIFO meanwhile
        part.replace(target)
    finally:
        part.unlink(missing_ok=True)


def dump(dsn: str, file: Path) -> None:
    """The whole store into FILE with pg_dump's custom format, without owners
    or grants, so it restores into any store whatever its roles. FILE is a
    regular file or new (output_file), replaced whole (a failed dump leaves
    it as it was) and readable by its owner only (0600): a dump holds every
    run and role name."""
    with replacing(file, "pg_dump output", 0o600) as part:
        _pg([_tool("pg_dump"), "--format=custom", "--no-owner", "--no-acl", "--file", str(part)],
            f"pg_dump of {masked(dsn, dsn) or 'the PG* store'}", dsn)


# Everything in `public` that a restore recreates: the empty store's own schema goes first.
_DROP_ALL = """
DO $$
DECLARE q text;
BEGIN
  -- every statement is written before any runs: a cascade must not turn a later name into a bare oid
  FOREACH q IN ARRAY coalesce((SELECT array_agg(x) FROM (
      SELECT format('DROP %s IF EXISTS %s CASCADE',
                    CASE c.relkind WHEN 'v' THEN 'VIEW' WHEN 'm' THEN 'MATERIALIZED VIEW' WHEN 'S' THEN 'SEQUENCE'
                                   WHEN 'f' THEN 'FOREIGN TABLE' ELSE 'TABLE' END, c.oid::regclass) AS x
      FROM pg_class c WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'p', 'v', 'm', 'S', 'f')
        AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid
                        AND d.deptype IN ('a', 'i')    -- owned sequences and partitions go with their tables
                        AND d.refobjid <> c.oid)       -- (a partitioned table depends on its own key column)
      UNION ALL
      SELECT format('DROP ROUTINE IF EXISTS %s CASCADE', p.oid::regprocedure)
      FROM pg_proc p WHERE p.pronamespace = 'public'::regnamespace
      UNION ALL
      SELECT format('DROP TYPE IF EXISTS %s CASCADE', t.oid::regtype)
      FROM pg_type t WHERE t.typnamespace = 'public'::regnamespace AND t.typrelid = 0 AND t.typelem = 0) s),
      '{}')
  LOOP EXECUTE q; END LOOP;
END $$;
"""


def restore(dsn: str, file: Path) -> list[str]:
    """FILE (from `dump`) into the store at DSN, which must hold no runs; then
    the migrations a dump of an older schema lacks. One transaction: a
    failure leaves the store as it was. Returns the migrations applied."""
    file = Path(file)
    if not file.is_file():
        raise DBError(f"{file}: no such file; give a dump written by 'commscope db dump'")
    newest = migrations()[-1][0]
    script = _pg([_tool("pg_restore"), "--no-owner", "--no-acl", "--file=-", str(file)],
                 f"{file}: not a dump pg_restore can read (write one with 'commscope db dump'); pg_restore").stdout
    with connect(dsn) as conn:
        if conn.execute("SELECT to_regclass('runs')").fetchone()[0]:
            n = conn.execute("SELECT count(*) FROM runs").fetchone()[0]
            if n:
                raise DBError(f"restore into {masked(dsn, dsn) or 'the PG* store'} refused: it holds {n} runs. Restore "
                              f"into an empty store (e.g. 'commscope db start' with a new COMMSCOPE_HOME), "
                              f"or dump this one first")
    check = (f"DO $$ BEGIN IF (SELECT max(version) FROM public.schema_version) > {newest} THEN RAISE EXCEPTION "
             f"'the dump has schema version %, newer than this commscope knows ({newest}); restore it with a "
             f"newer commscope', (SELECT max(version) FROM public.schema_version); END IF; END $$;\n")
    sql_text = (f"SET client_min_messages = warning; SET lock_timeout = '{os.environ.get('COMMSCOPE_LOCK_TIMEOUT', '60s')}';\n" + _DROP_ALL + script + check)
    _pg([_tool("psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", "--single-transaction", "-f", "-"],
        f"restore of {file} into {masked(dsn, dsn) or 'the PG* store'}", dsn, input=sql_text)
    with connect(dsn) as conn:
        return migrate(conn)
