"""Hostile and broken input to `commscope ingest` and the store commands (issue 32): memory stays bounded
whatever an input claims, every bad input ends in one line naming it and a non-zero exit with nothing
stored, and nothing the user gave is silently changed. Real profiles from tests/data are damaged at test
time; everything runs through the real command against a real PostgreSQL."""
from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest
from helpers import assert_one_clear_line, calipers_own, cli_in_process, plotly_strings, positions

DATA = Path(__file__).parent / "data"
PROFILE = DATA / "halo3d-overlap-n2.runtime-profile.cali"
CLI = [sys.executable, "-m", "commscope.cli"]
MEMORY_CAP = 4_000_000 * 1024   # `ulimit -v 4000000`, in bytes


def _cap_memory():
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))


def cli(dsn: str | None, *args, capped: bool = False, stdin: str | None = None, timeout: int = 300):
    """The real command: under `ulimit -v 4000000` in a process of its own when CAPPED, else in this process
    (cli_in_process: an unhandled exception still shows as a traceback, a hang as a failure)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG") and k != "COMMSCOPE_DB_URL"}
    if dsn:
        env["COMMSCOPE_DB_URL"] = dsn
    if not capped:
        return cli_in_process(args, env, stdin=stdin, timeout=timeout)
    return subprocess.run([*CLI, *map(str, args)], capture_output=True, text=True, env=env, timeout=timeout,
                          input=stdin, preexec_fn=_cap_memory)


def counts(dsn: str) -> dict:
    with psycopg.connect(dsn) as c:
        return {t: c.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                for t in ("runs", "campaigns", "series", "node_metrics", "nodes")}


def with_lines_replaced(src: Path, dst: Path, replace: dict[str, str]) -> Path:
    """SRC with whole lines replaced (each must occur exactly once), written to DST."""
    lines = src.read_text().splitlines(keepends=True)
    for old, new in replace.items():
        hits = [i for i, ln in enumerate(lines) if ln.rstrip("\n") == old]
        assert len(hits) == 1, (old, hits)
        lines[hits[0]] = new + "\n"
    dst.write_text("".join(lines))
    return dst


# ---- 1. bounded memory whatever an input claims ----------------------------------------------------------------

# The profile's two rank-count records (Caliper's mpi.world.size and Adiak's jobsize), both 2 in the real file.
WORLD_SIZE = "__rec=node,id=20,attr=16,data=2,parent=19"
JOBSIZE = "__rec=node,id=271,attr=209,data=2,parent=270"


def test_ranks_claimed_on_the_command_line_are_refused_under_a_memory_cap(dsn):
    before = counts(dsn)
    r = cli(dsn, "ingest", "-q", PROFILE, "--ranks", "2000000000", capped=True)
    assert_one_clear_line(r, str(PROFILE), "2000000000", "only 2 ranks have data", "nothing was stored", code=2)
    assert counts(dsn) == before


def test_ranks_claimed_by_the_profile_are_refused_under_a_memory_cap(dsn, tmp_path):
    hostile = with_lines_replaced(PROFILE, tmp_path / "claims-2e9.cali",
                                  {WORLD_SIZE: WORLD_SIZE.replace("data=2,", "data=2000000000,"),
                                   JOBSIZE: JOBSIZE.replace("data=2,", "data=2000000000,")})
    before = counts(dsn)
    r = cli(dsn, "ingest", "-q", hostile, capped=True)
    assert_one_clear_line(r, str(hostile), "2000000000", "jobsize", "only 2 ranks have data", code=2)
    assert counts(dsn) == before


def test_a_record_naming_a_huge_rank_is_refused_under_a_memory_cap(dsn, tmp_path):
    """One record's mpi.rank edited to 2e9: the rank a record names sizes nothing before it is checked."""
    text = PROFILE.read_text()
    rank_attr = next(ln for ln in text.splitlines() if ln.endswith(",data=mpi.rank,parent=21")).split(",id=")[1].split(",")[0]
    one = [ln for ln in text.splitlines() if ln.startswith("__rec=ctx") and f",attr={rank_attr}=" in ln
           and ",data=1=" in ln][-1]
    hostile = with_lines_replaced(PROFILE, tmp_path / "rank-2e9.cali",
                                  {one: one.replace(",data=1=", ",data=2000000000=")})
    r = cli(dsn, "ingest", "-q", hostile, capped=True)
    assert_one_clear_line(r, str(hostile), "rank 2000000000", "only 3 ranks have data", code=2)
    assert counts(dsn)["runs"] == 0


def test_a_rank_count_within_the_data_still_reads_as_before(dsn):
    """The bound leaves real profiles alone: the same per-rank times as caliper-reader's own reading."""
    from caliperreader import read_caliper_contents
    records, _g = read_caliper_contents(str(PROFILE))
    expected: dict[int, float] = {}
    for rec in records:
        if "mpi.rank" in rec and "sum#sum#time.duration" in rec and not calipers_own(rec):
            rank = int(rec["mpi.rank"])
            expected[rank] = expected.get(rank, 0.0) + float(rec["sum#sum#time.duration"])
    r = cli(dsn, "ingest", "-q", PROFILE, capped=True)
    assert r.returncode == 0, r.stderr
    with psycopg.connect(dsn) as c:
        got = dict(c.execute("SELECT rank, total_time FROM rank_metrics").fetchall())
    assert got.keys() == expected.keys()
    for rank, t in expected.items():
        assert got[rank] == pytest.approx(t, rel=1e-9)


def test_the_largest_believed_rank_count_keeps_arrays_sized_by_the_ranks_with_data(dsn):
    """2 ranks with data claimed as the most the reader believes for them (claim_limit: 1028): stored under the
    memory cap as a partial run with caliper-reader's per-rank times, and every per-rank array the reader holds
    has one entry per rank with data, not one per claimed rank."""
    from caliperreader import read_caliper_contents

    from commscope.read import profiles
    claimed = profiles.claim_limit(2)
    prof = profiles.read_files([PROFILE], allow_partial=True, ranks=claimed)
    assert prof.ranks == claimed and prof.rank_ids.tolist() == [0, 1]
    assert len(prof.missing_ranks) == claimed - 2
    arrays = [*prof.excl.values(), *prof.present.values(), prof.outside, prof.measured]
    assert {len(a) for a in arrays} == {2}
    records, _g = read_caliper_contents(str(PROFILE))
    expected: dict[int, float] = {}
    for rec in records:
        if "mpi.rank" in rec and "sum#sum#time.duration" in rec and not calipers_own(rec):
            expected[int(rec["mpi.rank"])] = expected.get(int(rec["mpi.rank"]), 0.0) + float(rec["sum#sum#time.duration"])
    r = cli(dsn, "ingest", "-q", "--allow-partial", "--ranks", claimed, PROFILE, capped=True)
    assert r.returncode == 0, r.stderr
    with psycopg.connect(dsn) as c:
        assert c.execute("SELECT status, ranks FROM runs").fetchall() == [("partial", claimed)]
        got = dict(c.execute("SELECT rank, total_time FROM rank_metrics").fetchall())
    assert got.keys() == expected.keys()
    for rank, t in expected.items():
        assert got[rank] == pytest.approx(t, rel=1e-9)


# ---- 2. one clear line for damaged input, never a traceback ----------------------------------------------------

def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines(keepends=True)


def _damaged_cases(tmp: Path) -> dict[str, Path]:
    """Real damage to the real profile: truncations, a flipped byte, deleted and garbled records."""
    raw = PROFILE.read_bytes()
    lines = _lines(PROFILE)
    first_ctx = next(i for i, ln in enumerate(lines) if ln.startswith("__rec=ctx"))
    parent_node = next(i for i, ln in enumerate(lines) if ln.startswith("__rec=node") and ",id=21," in ln)
    cases = {
        "truncated-mid-record": raw[:len(raw) // 2],
        "truncated-mid-line": raw[:raw.index(b"\n", len(raw) // 3) - 7],
        "no-globals": b"".join(ln.encode() for ln in lines if not ln.startswith("__rec=globals")),
        "flipped-to-non-utf8": raw[:500] + bytes([raw[500] | 0x80]) + raw[501:],
        "node-deleted": "".join(lines[:parent_node] + lines[parent_node + 1:]).encode(),
        "garbled-record": "".join(lines[:first_ctx] + ["__re\n"] + lines[first_ctx:]).encode(),
        "half-a-number": "".join(lines[:first_ctx] + [lines[first_ctx].replace("data=0=", "data=0x=")]
                                 + lines[first_ctx + 1:]).encode(),
        "ref-to-missing-node": "".join(lines[:first_ctx] + ["__rec=ctx,ref=99999,attr=22,data=0\n"]
                                       + lines[first_ctx:]).encode(),
    }
    out = {}
    for name, data in cases.items():
        out[name] = tmp / f"{name}.cali"
        out[name].write_bytes(data)
    return out


DAMAGE_WORDS = {"truncated-mid-record": "damaged", "truncated-mid-line": "damaged", "no-globals": "no global metadata",
                "flipped-to-non-utf8": "not UTF-8", "node-deleted": "not defined before it",
                "garbled-record": "not a Caliper record", "half-a-number": "malformed number",
                "ref-to-missing-node": "refers to node 99999"}


def test_damaged_profiles_give_one_line_naming_file_and_damage(dsn, tmp_path):
    before = counts(dsn)
    cases = _damaged_cases(tmp_path)
    assert cases.keys() == DAMAGE_WORDS.keys()
    for name, path in cases.items():
        r = cli(dsn, "ingest", "-q", path)
        line = assert_one_clear_line(r, str(path), DAMAGE_WORDS[name], "nothing was stored", code=2)
        assert "Error:" not in line, line   # no Python exception names
    assert counts(dsn) == before


def test_a_valid_profile_with_a_trailing_blank_line_is_stored_as_the_original(dsn, tmp_path):
    blank = tmp_path / "blank-line.cali"
    blank.write_bytes(PROFILE.read_bytes() + b"\n")
    r1, r2 = cli(dsn, "ingest", "-q", PROFILE), cli(dsn, "ingest", "-q", blank)
    assert r1.returncode == 0 and r2.returncode == 0, r2.stderr
    with psycopg.connect(dsn) as c:
        rows = c.execute("SELECT status, wall_time, mpi_fraction_avg FROM runs ORDER BY id").fetchall()
    assert len(rows) == 2 and rows[0] == rows[1] and rows[0][0] == "ok"


def test_control_characters_in_a_file_name_are_escaped(dsn, tmp_path):
    name = "evil\x1b[2K\rcommscope: stored 5 runs\n.cali"
    bad = tmp_path / name
    bad.write_bytes(PROFILE.read_bytes()[:200])
    r = cli(dsn, "ingest", "-q", bad)
    assert_one_clear_line(r, "evil\\x1b[2K\\rcommscope: stored 5 runs\\n.cali", code=2)
    assert "\x1b" not in r.stderr and "\r" not in r.stderr


def test_a_symlink_loop_says_so(dsn, tmp_path):
    loop = tmp_path / "loop.cali"
    loop.symlink_to(loop)
    r = cli(dsn, "ingest", "-q", loop)
    assert_one_clear_line(r, str(loop), "symbolic link loop", code=2)
    d = tmp_path / "dir"
    d.mkdir()
    (d / "a.cali").symlink_to(d / "b.cali")
    (d / "b.cali").symlink_to(d / "a.cali")
    r = cli(dsn, "ingest", "-q", d)
    assert_one_clear_line(r, "symbolic link loop", code=2)


# ---- 3. --skip-bad: a pipeline can tell -----------------------------------------------------------------------

def test_skip_bad_exits_3_and_lists_the_skips_in_json(dsn, tmp_path):
    bad = tmp_path / "bad.cali"
    bad.write_bytes(PROFILE.read_bytes()[:300])
    r = cli(dsn, "ingest", "--skip-bad", "--format", "json", bad)
    assert r.returncode == 3, (r.returncode, r.stderr)
    doc = json.loads(r.stdout)
    assert doc["stored"] == 0 and len(doc["bad"]) == 1 and str(bad) in doc["bad"][0]
    r = cli(dsn, "ingest", "--skip-bad", "--format", "json", bad, PROFILE)
    assert r.returncode == 3 and json.loads(r.stdout)["stored"] == 1
    r = cli(dsn, "ingest", "--skip-bad", "-q", DATA / "halo3d-overlap-n4.runtime-profile.cali")
    assert r.returncode == 0, r.stderr   # nothing skipped: success


# ---- 4. labels are never changed in silence -------------------------------------------------------------------

@pytest.mark.parametrize("args,needle", [(["--app", ""], "--app is empty"), (["--app", "   "], "--app is empty"),
                                         (["--app", "x" * 5000], "1 to 200 characters"),
                                         (["--param", "size="], "value is empty"),
                                         (["--param", "size=" + "9" * 5000], "1 to 4096"),
                                         (["--param", "k" * 300 + "=1"], "1 to 200")])
def test_empty_or_over_long_labels_are_refused_with_their_limit(dsn, args, needle):
    r = cli(dsn, "ingest", "-q", *args, PROFILE)
    assert_one_clear_line(r, needle, code=2)
    assert counts(dsn)["runs"] == 0


def test_reingest_with_other_labels_is_refused_then_relabelled(dsn):
    assert cli(dsn, "ingest", "-q", "--app", "first", "--param", "size=1", PROFILE).returncode == 0
    before = counts(dsn)
    r = cli(dsn, "ingest", "-q", "--app", "second", "--param", "size=2", PROFILE)
    assert_one_clear_line(r, str(PROFILE), "app 'first' is now 'second'", 'param size "1" is now "2"', "--relabel",
                          code=2)
    assert counts(dsn) == before
    r = cli(dsn, "ingest", "-q", "--app", "first", "--param", "size=1", PROFILE)   # the same labels: a no-op
    assert r.returncode == 0 and counts(dsn) == before
    r = cli(dsn, "ingest", "-q", "--relabel", "--app", "second", "--param", "size=2", PROFILE)
    assert r.returncode == 0, r.stderr
    with psycopg.connect(dsn) as c:
        rows = c.execute("SELECT r.app, s.app, s.parameters->>'size' FROM runs r JOIN series s ON s.id = r.series_id"
                         ).fetchall()
        per_series = c.execute("SELECT s.app, count(r.id) FROM series s LEFT JOIN runs r ON r.series_id = s.id "
                               "GROUP BY 1 ORDER BY 1").fetchall()
    assert rows == [("second", "second", "2")]
    assert per_series == [("first", 0), ("second", 1)]


# ---- 5. no injection into the report --------------------------------------------------------------------------

EVIL = '<a href="https://evil.example/x">evil</a>'


def test_a_name_with_a_link_shows_as_text_in_the_report(dsn, tmp_path):
    r = cli(dsn, "ingest", "-q", "--app", EVIL, PROFILE)
    assert r.returncode == 0, r.stderr
    for extra in ("halo3d-overlap-n4.runtime-profile.cali", "halo3d-blocking-loop-n2.mpi-profile.cali"):
        assert cli(dsn, "ingest", "-q", "--app", EVIL, DATA / extra).returncode == 0
    out = tmp_path / "report.html"
    r = cli(dsn, "report", "-o", out)
    assert r.returncode == 0, r.stderr
    strings = plotly_strings(out.read_text())
    escaped = EVIL.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    assert any(EVIL in s or escaped in s for s in strings), "the app's name reaches no plot: the test proves nothing"
    assert not [s for s in strings if "<a" in s], "a link plotly would render"
    assert any(escaped in s for s in strings)


HOSTILE_APPS = ('<a href="https://evil.example/x">x</a>', "<img src=x onerror=alert(1)>", "a & b <i>c</i>")
HOSTILE_LIBRARY = 'lib <script>alert(1)</script> 2.0 <a href="https://evil.example/y">y</a>'
DASHBOARDS = Path(__file__).parents[1] / "dashboards"


def _strings(doc):
    """(path, string) of every string in a dashboard's JSON."""
    return ((path, v) for path, v in positions(doc) if isinstance(v, str))


def test_names_show_as_text_in_grafanas_annotations_and_nowhere_else_as_html(dsn):
    """Grafana renders an annotation's text as HTML (sanitized by @grafana/data, which keeps links and images), and
    the change-point layer's text names the series. Series named by HOSTILE_APPS get change points (commscope
    changepoints), regressions (commscope check) and an upgrade to a library named HOSTILE_LIBRARY; every annotation layer of every dashboard, run as Grafana's
    read-only role with every series selected, gives texts that Grafana's own sanitizer shows as plain text, naming
    the application verbatim. No other place of the dashboards interpolates a variable or a value into a link, a
    description, a title or a text panel (where Grafana would render markdown or HTML)."""
    import datetime as dt
    import random

    from commscope.store.ingest import Provenance, ingest_records
    from commscope.views import panels as P
    from conftest import grant_local
    from helpers import START, synthetic
    rnd = random.Random(3)
    with psycopg.connect(dsn) as conn:
        for night in range(15):
            recs = [synthetic(app, night, i, 10.0 * (1.3 if night >= 10 else 1.0) * (1 + rnd.gauss(0, 0.02)))
                    for app in HOSTILE_APPS for i in range(3)]
            for r in recs:   # an upgrade whose library string holds markup: the version-change layer names it
                r.mpi_library = HOSTILE_LIBRARY if night >= 10 else r.mpi_library
            ingest_records(conn, iter(recs), Provenance(), f"night {night}")
    assert cli(dsn, "changepoints").returncode == 0
    assert cli(dsn, "check").returncode == 1   # the newest night: the shift has held five nights, a regression
    ro = grant_local(dsn, "grafana_ro")
    rows = []
    with psycopg.connect(ro) as c:
        values = {name: [str(v) for (v,) in c.execute(P.variable_query(col))] for name, _, col in P.VARIABLES}
        t0, t1 = START - dt.timedelta(days=1), START + dt.timedelta(days=20)
        for f in sorted((DASHBOARDS / "json").glob("*.json")):
            for a in json.loads(f.read_text()).get("annotations", {}).get("list", []):
                q = P.expand(a["target"]["rawSql"], t0, t1, values)
                cur = c.execute(q)
                col = [d.name for d in cur.description].index("text")
                rows += [(f.name, a["name"], r[col]) for r in cur]
        stored = {t for (t,) in c.execute("SELECT text FROM v_annotations")}
    layers = {(f, name) for f, name, _ in rows}
    assert {"Change points", "Regressions", "Version changes"} <= {n for f, n in layers
                                                                   if f == "commscope-mpi-fraction.json"}, layers
    from grafana_draw import grafana_shows
    shown = grafana_shows([t for _, _, t in rows])
    assert [s["elements"] for s in shown] == [[] for _ in rows], [s["html"] for s in shown if s["elements"]]
    change_points = [s["shown"] for (_, name, _), s in zip(rows, shown) if name == "Change points"]
    for app in HOSTILE_APPS:
        assert any(f" {app} " in t for t in change_points), (app, change_points)
    assert {s["shown"] for (_, name, _), s in zip(rows, shown) if name == "Regressions"} == stored
    upgrades = [s["shown"] for (_, name, _), s in zip(rows, shown) if name == "Version changes"]
    assert len(upgrades) == len(HOSTILE_APPS) and all(f"lib 1.0 -> {HOSTILE_LIBRARY} (campaign" in t
                                                      for t in upgrades), upgrades
    assert stored   # check annotated the shift
    for f in sorted((DASHBOARDS / "json").glob("*.json")):
        doc = json.loads(f.read_text())
        assert not [p["title"] for p in doc["panels"] if p["type"] in ("text", "news", "dashlist")], f.name
        for path, text in _strings(doc):
            if path[-1] in ("rawSql", "query", "definition", "regex"):
                continue
            assert "$" not in text and "links" not in path and "url" not in str(path[-1]).lower(), (f.name, path)


# ---- 6. no leaks ------------------------------------------------------------------------------------------------

def test_a_dump_is_readable_by_its_owner_only(dsn, tmp_path):
    import stat
    out = tmp_path / "store.dump"
    out.write_bytes(b"an older, world-readable file")
    out.chmod(0o644)
    r = subprocess.run(["bash", "-c", 'umask 022 && exec "$@"', "sh", *CLI, "db", "dump", str(out)],
                       capture_output=True, text=True, env={**os.environ, "COMMSCOPE_DB_URL": dsn}, timeout=300)
    assert r.returncode == 0, r.stderr
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    listed = subprocess.run(["pg_restore", "--list", str(out)], capture_output=True, text=True)
    assert listed.returncode == 0 and "TABLE public runs" in listed.stdout   # a real dump, not an empty file


# (URI or conninfo, the password as written). libpq's own parser (PQconninfoParse) names what it reads as the
# password too; neither may show in a message.
SECRETS = [("postgresql://alice:p@ssw0rd@db.example/commscope", "p@ssw0rd"),
           ("postgresql://alice:p%40ss%2Fw0rd@db.example:5432/commscope", "p%40ss%2Fw0rd"),
           ("postgres://alice:s3cr:et@h1:5432,h2/commscope?sslmode=require", "s3cr:et"),
           ("postgresql://alice:pa/ss@db.example/commscope", "pa/ss"),
           ("postgresql:///commscope?host=/tmp&user=alice&password=se%20cret", "se%20cret"),
           ("postgresql://alice@db.example/commscope?password=hunter2&sslmode=disable", "hunter2"),
           ("host=db.example user=alice password='a \\' secret phrase' dbname=commscope", "a \\' secret phrase"),
           ("host=db.example user=alice password=bare-secret dbname=commscope", "bare-secret")]


@pytest.mark.parametrize("dsn_text,written", SECRETS, ids=[w for _d, w in SECRETS])
def test_passwords_are_masked_in_every_libpq_form(dsn_text, written):
    from urllib.parse import unquote

    from psycopg.conninfo import conninfo_to_dict
    from commscope.store.db import masked
    try:
        parsed = conninfo_to_dict(dsn_text).get("password")
    except psycopg.ProgrammingError:
        parsed = None
    shown = masked(f"could not connect to {dsn_text}: timeout")
    for secret in {written, unquote(written), parsed} - {None, ""}:
        for piece in {p for p in (secret, secret.split("@")[-1], secret.split("'")[-1].strip()) if len(p) >= 3}:
            assert piece not in shown, (piece, shown)
    assert "***" in shown and shown.startswith("could not connect to ") and shown.endswith("timeout")


def test_a_password_is_masked_in_the_commands_own_message(tmp_path):
    """The command as a user meets it: a store URL whose password holds an unescaped '@'."""
    url = "postgresql://alice:p@ss-w0rd@127.0.0.1:1/commscope?connect_timeout=2"
    r = cli(url, "db", "migrate")
    assert r.returncode != 0 and "Traceback" not in r.stderr, r.stderr
    assert "w0rd" not in r.stderr + r.stdout and "p@ss" not in r.stderr + r.stdout, r.stderr


# ---- 7. least-privilege roles get messages, not tracebacks ----------------------------------------------------

def test_migrate_as_a_writer_role_says_it_needs_the_owner(dsn):
    from commscope.store import db
    from conftest import grant_local
    writer = grant_local(dsn, "ingest_job", db.grant_writer)
    with psycopg.connect(dsn) as c:
        versions = c.execute("SELECT count(*) FROM schema_version").fetchone()[0]
        c.execute("DELETE FROM schema_version WHERE version = (SELECT max(version) FROM schema_version)")
    r = cli(writer, "db", "migrate")
    assert_one_clear_line(r, "ingest_job", "schema", "owner", code=1)
    with psycopg.connect(dsn) as c:
        assert c.execute("SELECT count(*) FROM schema_version").fetchone()[0] == versions - 1


def _readonly_store(dsn: str) -> str:
    """Runs with call counts stored by the owner (the cgsolve profiles predate the `loop` region: focus timestep,
    as test_advise_barriers stores them); a DSN of a read-only role (grant-readonly) on that store."""
    from conftest import grant_local
    for name in ("cgsolve-direct-barriers-n4.mpi-profile.cali", "cgsolve-direct-barriers-uncounted-n2.mpi-profile.cali"):
        assert cli(dsn, "ingest", "-q", "--focus", "timestep", DATA / name).returncode == 0
    assert cli(dsn, "ingest", "-q", DATA / "halo3d-overlap-n2.runtime-profile.cali").returncode == 0
    return grant_local(dsn, "viewer")


def test_a_readonly_role_gets_the_advice_and_a_line_on_what_was_not_stored(dsn, tmp_path):
    """From a profile the advice needs nothing of the store: it is printed, and storing it is refused in one line."""
    ro = _readonly_store(dsn)
    with psycopg.connect(dsn) as c:
        advice_before = c.execute("SELECT count(*) FROM advice").fetchone()[0]
    topo = tmp_path / "topology.yaml"
    topo.write_text("nodes: [hostA, hostB]\nranks_per_node: 2\nnetwork: {type: flat}\n")
    trace = DATA / "commgraph-pairs-n4.msgtrace"
    r = cli(ro, "advise", "placement", trace, "--topology", topo)
    assert "placement of 4 ranks on 2 nodes" in r.stdout, r.stdout   # the advice itself is printed
    assert_one_clear_line(r, "role viewer", "printed but not stored", "--no-store", code=4)
    assert cli(ro, "advise", "placement", trace, "--topology", topo, "--no-store").returncode == 0
    with psycopg.connect(dsn) as c:
        assert c.execute("SELECT count(*) FROM advice").fetchone()[0] == advice_before


def _judged_history(dsn: str) -> str:
    """test_regressions' synthetic nights (regressions, improvements, a suspect and a newcomer) stored by the owner;
    a DSN of a read-only role (grant-readonly) on that store."""
    import random

    from commscope.store.ingest import Provenance, ingest_records
    from conftest import grant_local
    from helpers import NIGHTS_STORED, SERIES, synthetic
    rnd = random.Random(7)
    with psycopg.connect(dsn) as conn:
        for night in range(NIGHTS_STORED):
            recs = [synthetic(app, night, i, 10.0 * levels.get(NIGHTS_STORED - 1 - night, 1.0) * (1 + rnd.gauss(0, 0.03)))
                    for app, per_night, levels in SERIES for i in range(per_night)]
            ingest_records(conn, iter(recs), Provenance(), f"night {night}")
    return grant_local(dsn, "viewer")


def _verdicts(stdout: str) -> list[tuple]:
    return [(s["label"], s["metric"], s["verdict"], s["effect"], s["p_value"], s["n_new"], s["n_baseline"])
            for s in json.loads(stdout)["series"]]


def test_a_readonly_role_gets_the_owners_verdicts_and_a_line_on_what_was_not_stored(dsn):
    """`check` as a read-only role judges from what it may read: the same verdicts as the owner's, then one line
    naming what it could not store (the annotations), exit 4; nothing is written. The owner then stores them."""
    ro = _judged_history(dsn)
    r = cli(ro, "check", "--format", "json")
    assert_one_clear_line(r, "role viewer", "annotations", "not stored", code=1)   # 1: regressions, as the owner's
    assert counts_of(dsn, "annotations", "change_points") == (0, 0)
    text = cli(ro, "check")
    assert_one_clear_line(text, "role viewer", "annotations", "not stored", code=1)
    owner = cli(dsn, "check", "--format", "json")
    assert owner.returncode == 1, owner.stderr   # regressions
    assert _verdicts(r.stdout) == _verdicts(owner.stdout)
    assert {v[2] for v in _verdicts(r.stdout)} >= {"regression", "improvement", "suspect", "no change"}
    assert json.loads(r.stdout)["annotations"] == 0 and json.loads(owner.stdout)["annotations"] > 0
    assert [ln for ln in text.stdout.splitlines() if "regression" in ln or "improvement" in ln]
    quiet = cli(ro, "check", "--no-annotate", "--format", "json")   # nothing to store but change points
    assert quiet.returncode == 1 and _verdicts(quiet.stdout) == _verdicts(owner.stdout)
    changes = [[{k: v for k, v in c.items() if k != "detected_at"} for c in json.loads(out)["change_points"]]
               for out in (r.stdout, quiet.stdout, owner.stdout)]
    assert changes[0] == changes[1] == changes[2] and changes[2]   # computed as the owner's, not stored
    none = cli(ro, "check", "--campaign", "1", "--no-annotate")   # the first night: no baseline, nothing to store
    assert none.returncode == 0 and not none.stderr.strip(), none.stderr


def test_a_readonly_role_gets_the_barrier_advice_and_a_line_on_what_was_not_stored(dsn):
    """`advise barriers` on a stored run reads tables: as a read-only role it prints the owner's advice, then
    one line on the advice rows it could not store, exit 4."""
    ro = _readonly_store(dsn)
    with psycopg.connect(dsn) as c:
        (run,) = c.execute("SELECT id FROM runs WHERE source LIKE '%cgsolve-direct-barriers-n4%'").fetchone()
    r = cli(ro, "advise", "barriers", run)
    assert_one_clear_line(r, "role viewer", "printed but not stored", "--no-store", code=4)
    owner = cli(dsn, "advise", "barriers", run, "--no-store")
    assert owner.returncode == 0, owner.stderr
    assert r.stdout == owner.stdout and f"run {run}:" in r.stdout
    assert counts_of(dsn, "advice") == (0,)


def test_a_readonly_role_computes_the_owners_change_points_and_says_it_could_not_store_them(dsn):
    """`changepoints` as a read-only role computes what the owner would (in session-private copies of the tables,
    db.private_copies) and lists it, then says in one line that it stored nothing; exit 4. The owner, run after,
    finds and stores the same change points; --format json gives the same ones too."""
    ro = _judged_history(dsn)
    assert counts_of(dsn, "change_points", "change_point_state") == (0, 0)
    r = cli(ro, "changepoints")
    assert_one_clear_line(r, "role viewer", "change points", "computed but not stored", code=4)
    as_json = cli(ro, "changepoints", "--format", "json")
    assert_one_clear_line(as_json, "role viewer", "change points", "computed but not stored", code=4)
    assert counts_of(dsn, "change_points", "change_point_state") == (0, 0)
    owner = cli(dsn, "changepoints", "--format", "json")
    assert owner.returncode == 0, owner.stderr
    strip = lambda out: [{k: v for k, v in c.items() if k != "detected_at"}   # noqa: E731
                         for c in json.loads(out)["change_points"]]
    assert strip(as_json.stdout) == strip(owner.stdout) and len(strip(owner.stdout)) >= 3
    listed = [ln for ln in r.stdout.splitlines() if " from run " in ln]
    assert len(listed) == len(strip(owner.stdout)) and listed == [
        ln for ln in cli(dsn, "changepoints", "--full").stdout.splitlines() if " from run " in ln]


def counts_of(dsn: str, *tables: str) -> tuple:
    with psycopg.connect(dsn) as c:
        return tuple(c.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in tables)


@pytest.mark.parametrize("line,value", [("__rec=node,id=270,attr=210,data=1,parent=269", "99999999999999999999"),
                                        ("__rec=node,id=258,attr=234,data=10,parent=257", "-99999999999")],
                         ids=["numhosts", "iterations"])
def test_a_metadata_number_beyond_the_store_is_refused_in_one_line(dsn, tmp_path, line, value):
    """Adiak's numhosts or the workload's iterations beyond a PostgreSQL integer: refused by the reader, not by
    the store mid-campaign."""
    hostile = with_lines_replaced(PROFILE, tmp_path / "huge.cali", {line: line.replace(",data=", f",data={value}#")
                                                                     .replace(f"{value}#1,", f"{value},")
                                                                     .replace(f"{value}#10,", f"{value},")})
    assert value in hostile.read_text()
    before = counts(dsn)
    r = cli(dsn, "ingest", "-q", hostile)
    assert_one_clear_line(r, str(hostile), value, "nothing was stored", code=2)
    assert counts(dsn) == before


# ---- nothing silently stored wrong ------------------------------------------------------------------------------

def test_a_profile_with_half_its_context_records_deleted_is_refused_or_partial(dsn, tmp_path):
    lines = _lines(PROFILE)
    ctx = [i for i, ln in enumerate(lines) if ln.startswith("__rec=ctx")]
    gone = set(ctx[::2])
    half = tmp_path / "half.cali"
    half.write_text("".join(ln for i, ln in enumerate(lines) if i not in gone))
    from caliperreader import read_caliper_contents
    records, _g = read_caliper_contents(str(half))
    assert len(records) == len(ctx) - len(gone)     # still a readable Caliper file, half its records gone
    before = counts(dsn)
    r = cli(dsn, "ingest", "-q", half)
    assert_one_clear_line(r, str(half), "context records are missing", "--allow-partial", code=2)
    assert counts(dsn) == before
    r = cli(dsn, "ingest", "-q", "--allow-partial", half)
    assert r.returncode == 0, r.stderr
    with psycopg.connect(dsn) as c:
        assert c.execute("SELECT status, metadata ? 'lost_records' FROM runs").fetchall() == [("partial", True)]


def _rank_times(path: Path) -> dict[int, float]:
    """caliper-reader's records of PATH, their exclusive time summed per rank."""
    from caliperreader import read_caliper_contents
    records, _g = read_caliper_contents(str(path))
    out: dict[int, float] = {}
    for rec in records:
        if "mpi.rank" in rec and "sum#sum#time.duration" in rec and not calipers_own(rec):
            out[int(rec["mpi.rank"])] = out.get(int(rec["mpi.rank"]), 0.0) + float(rec["sum#sum#time.duration"])
    return out


@pytest.mark.parametrize("how", ["one-record-twice", "every-record-twice"])
def test_a_profile_with_repeated_context_records_is_refused_or_partial_without_the_repeats(dsn, tmp_path, how):
    """caliper-reader hands a repeated record over again, so summing its records doubles the repeated times; Caliper
    writes one record per call path and rank, so a repeat is damage: refused in one line, or with --allow-partial
    stored as partial with the original's per-rank times (caliper-reader's reading of the file before the repeat)."""
    from caliperreader import read_caliper_contents
    lines = _lines(PROFILE)
    ctx = [i for i, ln in enumerate(lines) if ln.startswith("__rec=ctx")]
    repeated = [lines[ctx[len(ctx) // 2]]] if how == "one-record-twice" else [lines[i] for i in ctx]
    dup = tmp_path / f"{how}.cali"
    dup.write_text("".join(lines[:ctx[-1] + 1] + repeated + lines[ctx[-1] + 1:]))
    assert len(read_caliper_contents(str(dup))[0]) == len(read_caliper_contents(str(PROFILE))[0]) + len(repeated)
    assert _rank_times(dup) != _rank_times(PROFILE)   # a plain sum over caliper-reader's records counts them twice
    before = counts(dsn)
    r = cli(dsn, "ingest", "-q", dup)
    assert_one_clear_line(r, str(dup), "records are duplicated", "count twice", "--allow-partial", code=2)
    assert counts(dsn) == before
    r = cli(dsn, "ingest", "-q", "--allow-partial", dup)
    assert r.returncode == 0, r.stderr
    with psycopg.connect(dsn) as c:
        assert c.execute("SELECT status, metadata->>'lost_records' LIKE '%duplicated%' FROM runs").fetchall() == [
            ("partial", True)]
        got = dict(c.execute("SELECT rank, total_time FROM rank_metrics").fetchall())
    expected = _rank_times(PROFILE)
    assert got.keys() == expected.keys()
    for rank, t in expected.items():
        assert got[rank] == pytest.approx(t, rel=1e-9)


def _matrix(folder: Path) -> dict[tuple[int, int], tuple[int, int]]:
    """caliper-reader's message-trace records of FOLDER's files: (rank, dst) -> (messages, bytes)."""
    from caliperreader import read_caliper_contents
    out: dict[tuple[int, int], tuple[int, int]] = {}
    for f in sorted(folder.glob("*.cali")):
        for rec in read_caliper_contents(str(f))[0]:
            if "mpi.msg.dst" in rec and int(rec["mpi.msg.dst"]) >= 0:
                key = (int(rec["mpi.rank"]), int(rec["mpi.msg.dst"]))
                m, b = out.get(key, (0, 0))
                out[key] = (m + int(rec["count"]), b + int(float(rec["sum#mpi.msg.size"])))
    return out


def test_a_repeated_message_trace_record_is_refused_or_partial_without_the_repeat(dsn, tmp_path):
    """A message-trace record carries no time, so the (call path, rank) rule cannot see it repeated: Caliper writes
    one record per key (every attribute that is not an aggregate), so a second is a repeat whose bytes would be
    summed twice. Refused in one line; with --allow-partial the matrix is caliper-reader's of the original files."""
    import shutil
    from caliperreader import read_caliper_contents
    original = DATA / "commgraph-pairs-n2.msgtrace"
    damaged = tmp_path / "pairs.msgtrace"
    shutil.copytree(original, damaged)
    rank0 = damaged / "rank-0.cali"
    lines = _lines(rank0)
    ctx = [i for i, ln in enumerate(lines) if ln.startswith("__rec=ctx")]
    records = read_caliper_contents(str(rank0))[0]
    assert len(records) == len(ctx)
    msg = next(i for i, rec in enumerate(records) if "mpi.msg.dst" in rec)
    rank0.write_text("".join(lines[:ctx[-1] + 1] + [lines[ctx[msg]]] + lines[ctx[-1] + 1:]))
    again = read_caliper_contents(str(rank0))[0]
    assert len(again) == len(records) + 1 and again[-1] == records[msg]
    assert _matrix(damaged) != _matrix(original)   # a plain sum over caliper-reader's records counts it twice
    before = counts(dsn)
    r = cli(dsn, "ingest", "-q", damaged)
    assert_one_clear_line(r, str(damaged), "rank 0", "records are duplicated", "count twice", "--allow-partial", code=2)
    assert counts(dsn) == before
    r = cli(dsn, "ingest", "-q", "--allow-partial", damaged)
    assert r.returncode == 0, r.stderr
    with psycopg.connect(dsn) as c:
        assert c.execute("SELECT status FROM runs").fetchall() == [("partial",)]
        got = {(s, d): (m, b) for s, d, m, b in c.execute("SELECT src, dst, messages, bytes FROM comm_matrix")}
    assert got == _matrix(original)


def test_a_ramble_experiment_without_its_profile_is_not_profiled_and_later_replaced(dsn, tmp_path):
    import shutil
    ws = tmp_path / "ws"
    shutil.copytree(DATA / "ramble" / "smoke-openmpi4-mpi", ws)
    doc = json.loads((ws / "results.latest.json").read_text())
    ok = [e for e in doc["experiments"] if e["RAMBLE_STATUS"] == "SUCCESS"]
    exp = ok[0]
    cali = next((ws / "experiments").rglob(f"{exp['experiment_name']}.cali"))
    kept = tmp_path / "kept.cali"
    shutil.move(cali, kept)
    r = cli(dsn, "ingest", "-q", ws)
    assert r.returncode == 0, r.stderr
    assert f"warning: experiment {exp['name']}: Caliper was on, but no profile" in r.stderr
    with psycopg.connect(dsn) as c:
        rows = c.execute("SELECT profile_kind, status, mpi_fraction_avg FROM runs WHERE metadata->>'ramble_experiment' "
                         "= %s", (exp["name"],)).fetchall()
        assert rows == [("none", "ok", None)]   # not profiled: MPI time unknown, not 0
        total = c.execute("SELECT count(*) FROM runs").fetchone()[0]
    assert total == len(doc["experiments"])
    shutil.move(kept, cali)   # the profile appears
    r = cli(dsn, "ingest", "-q", ws)
    assert r.returncode == 0 and "warning" not in r.stderr, r.stderr
    with psycopg.connect(dsn) as c:
        rows = c.execute("SELECT profile_kind, status FROM runs WHERE metadata->>'ramble_experiment' = %s",
                         (exp["name"],)).fetchall()
        assert rows == [("runtime-profile", "ok")]   # stored once, the profile replacing the run without it
        assert c.execute("SELECT count(*) FROM runs").fetchone()[0] == total
        assert c.execute("SELECT count(*) FROM runs WHERE experiment = %s AND profile_kind = 'none'",
                         (exp["name"],)).fetchone()[0] == 0


def test_a_profile_and_its_output_named_together_are_one_run(dsn, tmp_path):
    """`commscope ingest x.cali x.out` (what a shell's x.* gives): the .out is the profile's sidecar, so one run is
    stored, as for the folder holding both; before, the .out was stored again as a second, profile-less run in a
    series of its own."""
    history = Path(__file__).parent / "gate-history"
    for f in ("halo3d-blocking-24-n2.mpi.night1.cali", "halo3d-blocking-24-n2.mpi.night1.out"):
        (tmp_path / f).write_bytes((history / f).read_bytes())
    r = cli(dsn, "ingest", "-q", *sorted(tmp_path.iterdir()))
    assert r.returncode == 0, r.stderr
    after = counts(dsn)
    assert (after["runs"], after["series"]) == (1, 1), after
    with psycopg.connect(dsn) as c:
        (source, kind), = c.execute("SELECT source, profile_kind FROM runs").fetchall()
    assert source.endswith(".cali") and kind != "none", (source, kind)
