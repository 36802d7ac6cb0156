"""Hostile input, round two (issue 46), in what commscope writes: a dump or a report goes only to a regular file; a
store URL's password is never printed, however malformed the URL; names cannot forge lines or markup in check's
JUnit and Markdown. Every bad input ends in one line naming it, a non-zero exit and nothing written. Everything
runs through the real command, in a process of its own, against a real PostgreSQL.
(Impossible values in what is read: test_hostile_values.py.)"""
from __future__ import annotations

import os
import re
import socket
import stat
import xml.etree.ElementTree as ET
from pathlib import Path

import psycopg
import pytest
from helpers import assert_one_clear_line, cli_in_process, outside_code_spans

DATA = Path(__file__).parent / "data"
PROFILE = DATA / "halo3d-overlap-n2.runtime-profile.cali"


def cli(dsn: str | None, *args, timeout: int = 300):
    """The real command in this process (cli_in_process), with DSN as COMMSCOPE_DB_URL and no PG* variables."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG") and k != "COMMSCOPE_DB_URL"}
    if dsn:
        env["COMMSCOPE_DB_URL"] = dsn
    return cli_in_process(args, env, timeout=timeout)


# ---- 1. a dump or a report goes only to a regular file ------------------------------------------------------------

def _not_files(tmp: Path) -> dict[str, Path]:
    """A FIFO, a directory, a unix socket, a character device when this user may make one, and links to them."""
    out = {"fifo": tmp / "fifo", "directory": tmp / "dir", "socket": tmp / "sock"}
    os.mkfifo(out["fifo"])
    out["directory"].mkdir()
    (out["directory"] / "kept").write_text("kept")
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(out["socket"]))
    s.close()
    try:
        os.mknod(tmp / "null", 0o600 | stat.S_IFCHR, os.makedev(1, 3))   # the same device as /dev/null
        out["character device"] = tmp / "null"
    except PermissionError:
        pass
    for name in list(out):
        (tmp / f"link-to-{name.replace(' ', '-')}").symlink_to(out[name])
        out[f"link to {name}"] = tmp / f"link-to-{name.replace(' ', '-')}"
    return out


def _state(tmp: Path) -> dict:
    return {p.name: (stat.S_IFMT(p.lstat().st_mode), sorted(os.listdir(p)) if p.is_dir() and not p.is_symlink()
                     else None) for p in tmp.iterdir()}


def test_a_dump_or_report_to_anything_but_a_regular_file_is_refused_and_replaces_nothing(dsn, tmp_path):
    targets = _not_files(tmp_path)
    before = _state(tmp_path)
    for what, target in targets.items():
        for command in (["db", "dump", target], ["report", "-o", target]):
            r = cli(dsn, *command, timeout=120)
            assert_one_clear_line(r, str(target), "not a regular file", "nothing was written")
            assert _state(tmp_path) == before, (what, command)


def test_check_writes_its_junit_and_markdown_only_to_regular_files(dsn, tmp_path):
    """check's --junit and --markdown are outputs too: anything but a regular file is refused in one line before
    anything is judged (no annotation written), and replaces nothing; a regular file is replaced whole."""
    assert cli(dsn, "ingest", "-q", PROFILE).returncode == 0
    targets = _not_files(tmp_path)
    before = _state(tmp_path)
    for what, target in targets.items():
        for option in ("--junit", "--markdown"):
            r = cli(dsn, "check", option, target, timeout=120)
            assert_one_clear_line(r, str(target), "not a regular file", "nothing was written")
            assert _state(tmp_path) == before, (what, option)
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT count(*) FROM annotations").fetchone()[0] == 0
    junit = tmp_path / "check.xml"
    junit.write_text("last night's")
    r = cli(dsn, "check", "--junit", junit)
    assert r.returncode in (0, 1), r.stderr
    assert junit.read_text().startswith("<?xml") and not list(tmp_path.glob(".check.xml*"))


def test_dev_null_is_refused_before_anything_is_opened(tmp_path):
    """/dev/null is checked by the refusal itself first (so the command never runs where it could replace it),
    then through the commands, whose store is unreachable: the refusal comes before any connection."""
    from commscope.store import db, files
    with pytest.raises(db.DBError, match="character device"):
        files.output_file(Path("/dev/null"), "report")
    nowhere = "postgresql://nobody@127.0.0.1:1/commscope?connect_timeout=2"
    for command in (["db", "dump", "/dev/null"], ["report", "-o", "/dev/null"]):
        r = cli(nowhere, *command)
        assert_one_clear_line(r, "/dev/null", "character device")
        assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_a_regular_file_is_replaced_whole_and_a_link_to_one_keeps_its_link(dsn, tmp_path):
    assert cli(dsn, "ingest", "-q", PROFILE).returncode == 0
    report, link = tmp_path / "report.html", tmp_path / "latest.html"
    report.write_text("last week's report")
    link.symlink_to(report)
    r = cli(dsn, "report", "-o", link)
    assert r.returncode == 0, r.stderr
    assert link.is_symlink() and "<!DOCTYPE html>" in report.read_text()
    dump = tmp_path / "store.dump"
    dump.write_text("an older dump")
    assert cli(dsn, "db", "dump", dump).returncode == 0
    assert dump.read_bytes().startswith(b"PGDMP")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["latest.html", "report.html", "store.dump"]


# ---- 2. a store URL's password is never printed ----------------------------------------------------------------

SECRET = "s3cret"
BAD_URLS = ["postgresql://alice:s3cretpw@127.0.0.1:notaport/commscope",
            "postgresql://alice:s3cretpw@[bad/commscope",
            "postgresql://alice:s3cret%zzpw@127.0.0.1:1/commscope",
            "postgresql://alice:s3cret pw@127.0.0.1:1/commscope?connect_timeout=2",
            "postgresql://alice:s3cretpw@127.0.0.1:1/commscope?no_such_option=1",
            "host=127.0.0.1 port=1 user=alice password='s3cret pw",
            "host=127.0.0.1 port=1 user=alice password=s3cretpw garbage",
            "s3cretpw",                 # a password pasted alone: neither a URI nor key=value, shown not at all
            "alice s3cret pw"]


@pytest.mark.parametrize("url", BAD_URLS)
def test_a_malformed_store_url_gives_one_line_without_its_password(url, tmp_path):
    for command in (["check"], ["report", "-o", tmp_path / "r.html"], ["db", "migrate"],
                    ["db", "dump", tmp_path / "s.dump"], ["db", "url"]):
        r = cli(url, *command, timeout=60)
        assert SECRET not in r.stdout + r.stderr, (command, r.stdout, r.stderr)
        if command != ["db", "url"]:
            assert_one_clear_line(r)
    assert not list(tmp_path.iterdir())


# ---- 3. names cannot forge lines or markup in check's JUnit and Markdown --------------------------------------------

HOSTILE = ("evil\n| **regression** | `forged` | time_s | 1 | 2 | +100% | 0 | 3 / 9 | – |",
           "a`[link](https://evil.example/x)`b",
           "``![image](https://evil.example/i.png)``",
           "bell\x07 and escape\x1b[31m | pipe")


def test_names_cannot_forge_lines_or_markup_in_junit_and_markdown(dsn, tmp_path):
    import json
    import random

    from commscope.store.ingest import Provenance, ingest_records
    from helpers import synthetic
    rnd = random.Random(46)
    with psycopg.connect(dsn) as conn:
        for night in range(15):
            # the first steady, the second a regression (five nights slower), the others suspect (the last night)
            level = [1.0, 1.3 if night >= 10 else 1.0, 1.25 if night == 14 else 1.0, 1.25 if night == 14 else 1.0]
            recs = [synthetic(app, night, i, 10.0 * level[k] * (1 + rnd.gauss(0, .02)))
                    for k, app in enumerate(HOSTILE) for i in range(3)]
            ingest_records(conn, iter(recs), Provenance(), f"night {night}")
    md, junit = tmp_path / "check.md", tmp_path / "check.xml"
    r = cli(dsn, "check", "--no-annotate", "--format", "json", "--markdown", md, "--junit", junit)
    assert r.returncode in (0, 1), r.stderr
    series = json.loads(r.stdout)["series"]
    assert {s["app"] for s in series} == set(HOSTILE)
    cases = ET.parse(junit).getroot().findall(".//testcase")   # well-formed XML, whatever the names hold
    assert len(cases) == len(series)
    for case in cases:
        assert case.get("name").isprintable(), case.get("name")
    # outputs.markdown's part; the change points' section after it is outputs.change_points_markdown's
    text = md.read_text().split("\nChange points this campaign completes")[0]
    rows = [ln for ln in text.splitlines() if ln.startswith("|")]
    assert len(rows) == 2 + len(series), rows   # the header, its rule, one row per series: none forged
    for row in rows[2:]:
        assert len(re.findall(r"(?<!\\)\|", row)) == 10, row   # nine cells, none split or added
    for line in text.splitlines():
        assert "evil.example" not in outside_code_spans(line), line
    assert "\x1b" not in text and "\x07" not in text
    # outputs.change_points_markdown's section: one list item per change point, each a code span, nothing outside it
    points = md.read_text().partition("\nChange points this campaign completes")[2]
    items = [ln for ln in points.splitlines()[1:] if ln.strip()]
    assert items and all(ln.startswith("- ") for ln in items), points
    for line in items:
        assert "evil.example" not in outside_code_spans(line) and "\x1b" not in line, line
    assert "Suspect or cannot tell:" in text and "**regression**" in text
