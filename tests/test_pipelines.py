"""The facility pipeline templates in ci/pipelines: valid YAML, the stages a facility expects, and every commscope
command they call exists and accepts those arguments (parsed by the real command-line parser). The ingest and check
stages also run for real, with bash, against a real PostgreSQL and a real Ramble workspace: the campaign id ingest
prints reaches check through the CI system's hand-off (GitLab's dotenv report, GitHub's step output), and check
judges that campaign though another pipeline stored a newer one, and writes JUnit XML and Markdown that the
templates publish."""
from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import click
import psycopg
import pytest
import yaml

from commscope.store import db
from commscope.cli import main
from conftest import grant_local

ROOT = Path(__file__).resolve().parent.parent
PIPELINES = ROOT / "ci" / "pipelines"
STAGES = ["setup", "run", "ingest", "check", "report"]


def gitlab_scripts(doc: dict) -> dict[str, list[str]]:
    return {name: job["script"] for name, job in doc.items() if isinstance(job, dict) and "script" in job}


def github_scripts(doc: dict) -> dict[str, list[str]]:
    steps = doc["jobs"]["nightly"]["steps"]
    return {s.get("name", s.get("uses", "")): s["run"].splitlines() for s in steps if "run" in s}


# The only shell besides commscope commands: handing the campaign id from ingest to check, and publishing the
# check's Markdown as the GitHub job summary.
PLUMBING = [r'echo "COMMSCOPE_CAMPAIGN=\$campaign" > campaign\.env',
            r'echo "campaign=\$campaign" >> "\$GITHUB_OUTPUT"',
            r'if \[ -f check\.md \]; then cat check\.md >> "\$GITHUB_STEP_SUMMARY"; fi']


def commscope_calls(lines: list[str]) -> list[list[str]]:
    calls = []
    for line in lines:
        # `campaign=$(commscope ingest ...)`: the command inside the substitution
        line = re.sub(r"^\s*\w+=\$\((commscope .*)\)\s*$", r"\1", line)
        for part in re.split(r";|&&|\bdo\b|\bdone\b", line):
            part = part.strip()
            if part.startswith("commscope "):
                # shell variables stand for strings (a campaign id for an integer); a placeholder keeps the
                # argument count
                calls.append(shlex.split(re.sub(r"\$\{?(\w+)\}?", lambda m: "7" if "CAMPAIGN" in m[1] else "X", part)))
    return calls


def parse(argv: list[str]) -> click.Context:
    ctx = main.make_context("commscope", argv[1:])
    name, cmd, rest = main.resolve_command(ctx, ctx.protected_args + ctx.args)
    return cmd.make_context(name, rest, parent=ctx)


@pytest.mark.parametrize("name,scripts", [("gitlab-ci.yml", gitlab_scripts), ("github-actions.yml", github_scripts)])
def test_pipeline_calls_only_commscope_commands_with_valid_arguments(name, scripts):
    doc = yaml.safe_load((PIPELINES / name).read_text())
    jobs = scripts(doc)
    assert set(STAGES) <= set(jobs), f"{name}: stages {sorted(jobs)}"
    if name == "gitlab-ci.yml":
        assert doc["stages"] == STAGES
        assert all(doc[s]["stage"] == s for s in STAGES)
    used = set()
    for stage in STAGES:
        calls = commscope_calls(jobs[stage])
        assert calls, f"{name}: stage {stage} calls no commscope command"
        non_commscope = [line for line in jobs[stage]
                         if line.strip() and not re.search(r"\bcommscope\b", line) and not re.match(r"\s*(done|fi)\b", line)
                         and not any(re.fullmatch(p, line.strip()) for p in PLUMBING)]
        assert not non_commscope, f"{name}: stage {stage} runs other commands: {non_commscope}"
        for argv in calls:
            ctx = parse(argv)
            used.add(ctx.command.name)
            if ctx.command.name == "run":
                assert (ROOT / "ramble" / "studies" / ctx.params["study"]).is_dir()
    assert used == {"setup", "run", "ingest", "check", "report"}


def test_the_run_uses_a_study_and_site_that_exist():
    text = (PIPELINES / "gitlab-ci.yml").read_text()
    site = yaml.safe_load(text)["variables"]["COMMSCOPE_SITE"]
    assert (ROOT / "ramble" / "sites" / site).is_dir()
    assert (ROOT / "ramble" / "studies" / "nightly" / "ramble.yaml").is_file()


def test_a_wrong_option_would_be_caught():
    with pytest.raises(click.exceptions.NoSuchOption):
        parse(["commscope", "check", "--treshold", "5"])
    with pytest.raises(click.exceptions.BadParameter):
        parse(["commscope", "check", "--baseline", "0"])


# ---- the campaign id, JUnit XML and Markdown: declared --------------------------------------------------------

def check_call(name: str) -> click.Context:
    doc = yaml.safe_load((PIPELINES / name).read_text())
    jobs = gitlab_scripts(doc) if name == "gitlab-ci.yml" else github_scripts(doc)
    (argv,) = commscope_calls(jobs["check"])
    return parse(argv)


def test_gitlab_hands_the_campaign_id_to_check_and_publishes_junit_and_markdown():
    doc = yaml.safe_load((PIPELINES / "gitlab-ci.yml").read_text())
    ingest = doc["ingest"]
    assert re.fullmatch(r"campaign=\$\(commscope ingest .* --quiet\)", ingest["script"][0])
    dotenv = ingest["artifacts"]["reports"]["dotenv"]
    assert f"> {dotenv}" in ingest["script"][1] and "COMMSCOPE_CAMPAIGN=$campaign" in ingest["script"][1]
    assert '--campaign "$COMMSCOPE_CAMPAIGN"' in doc["check"]["script"][0]
    ctx = check_call("gitlab-ci.yml")
    junit, md = str(ctx.params["junit"]), str(ctx.params["markdown"])
    art = doc["check"]["artifacts"]
    assert art["reports"]["junit"] == junit and {junit, md} <= set(art["paths"]) and art["when"] == "always"
    assert set(ctx.params["metrics"]) == {"wall_time", "mpi_fraction_avg"}


def test_github_hands_the_campaign_id_to_check_and_publishes_junit_and_markdown():
    doc = yaml.safe_load((PIPELINES / "github-actions.yml").read_text())
    steps = {s.get("name"): s for s in doc["jobs"]["nightly"]["steps"]}
    ingest, check = steps["ingest"], steps["check"]
    assert re.fullmatch(r"campaign=\$\(commscope ingest .* --quiet\)", ingest["run"].splitlines()[0])
    assert 'echo "campaign=$campaign" >> "$GITHUB_OUTPUT"' in ingest["run"]
    assert check["env"]["COMMSCOPE_CAMPAIGN"] == "${{ steps.%s.outputs.campaign }}" % ingest["id"]
    assert '--campaign "$COMMSCOPE_CAMPAIGN"' in check["run"]
    ctx = check_call("github-actions.yml")
    junit, md = str(ctx.params["junit"]), str(ctx.params["markdown"])
    assert steps["check summary"]["if"] == "always()" and f"cat {md} >> \"$GITHUB_STEP_SUMMARY\"" in steps["check summary"]["run"]
    uploaded = next(s for s in doc["jobs"]["nightly"]["steps"] if str(s.get("uses", "")).startswith("actions/upload-artifact"))
    assert {junit, md} <= set(uploaded["with"]["path"].split()) and uploaded["if"] == "always()"


# ---- the ingest and check stages, run for real ----------------------------------------------------------------

WORKSPACE = ROOT / "tests" / "data" / "ramble" / "smoke-openmpi4-mpi"
OTHER_OUTPUT = ROOT / "tests" / "gate-history" / "halo3d-blocking-24-n2.mpi.night1.out"
VENV_BIN = Path(sys.executable).parent   # where commscope is installed


def bash(lines: list[str], cwd: Path, env: dict, flags: str) -> subprocess.CompletedProcess:
    """The stage's script as the CI system runs it: GitLab with `set -eo pipefail`, GitHub's bash with -e."""
    return subprocess.run(["bash", *flags.split(), "-c", "\n".join(lines)], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=600)


def expand(value: str, outputs: dict, secrets: dict) -> str:
    """GitHub's ${{ ... }} expressions the templates use: step outputs and secrets."""
    value = re.sub(r"\$\{\{\s*steps\.\w+\.outputs\.(\w+)\s*\}\}", lambda m: outputs[m[1]], value)
    return re.sub(r"\$\{\{\s*secrets\.(\w+)\s*\}\}", lambda m: secrets[m[1]], value)


@pytest.mark.parametrize("name", ["gitlab-ci.yml", "github-actions.yml"])
def test_ingest_and_check_stages_judge_this_pipeline_s_campaign(dsn, tmp_path, name):
    """The templates' own ingest and check lines, run by bash as the pipeline's writer role (commscope db
    grant-writer). Between them another pipeline stores a newer campaign of another system; check still judges
    the campaign ingest printed, one JUnit test case per series and metric of the workspace's successful
    experiments (from its results.latest.json), and writes the Markdown summary."""
    writer = grant_local(dsn, "ci_ingest", db.grant_writer)
    project = tmp_path / "project"
    ws = project / ".commscope" / "workspaces" / "nightly-20261125-021700"
    shutil.copytree(WORKSPACE, ws)
    env = {**os.environ, "PATH": f"{VENV_BIN}:{os.environ['PATH']}", "COMMSCOPE_DB_URL": writer,
           "COMMSCOPE_HOME": str(project / ".commscope"), "CI_COMMIT_SHA": "0123abc", "CI_PIPELINE_ID": "4711",
           "GITHUB_SHA": "0123abc", "GITHUB_RUN_ID": "4711", "GITHUB_OUTPUT": str(tmp_path / "github-output"),
           "GITHUB_STEP_SUMMARY": str(tmp_path / "step-summary.md")}
    doc = yaml.safe_load((PIPELINES / name).read_text())
    flags = "-eo pipefail" if name == "gitlab-ci.yml" else "-e"
    if name == "gitlab-ci.yml":
        r = bash(doc["ingest"]["script"], project, env, flags)
        assert r.returncode == 0, r.stderr
        handed = dict(line.split("=", 1) for line in (project / doc["ingest"]["artifacts"]["reports"]["dotenv"])
                      .read_text().splitlines() if line.strip())
        check_env = {**env, **handed}
        check_lines = doc["check"]["script"]
    else:
        steps = {s.get("name"): s for s in doc["jobs"]["nightly"]["steps"]}
        r = bash(steps["ingest"]["run"].splitlines(), project, env, flags)
        assert r.returncode == 0, r.stderr
        outputs = dict(line.split("=", 1) for line in Path(env["GITHUB_OUTPUT"]).read_text().splitlines())
        secrets = {"COMMSCOPE_DB_URL": writer, "PGPASSWORD": ""}
        check_env = {**env, **{k: expand(v, outputs, secrets) for k, v in steps["check"]["env"].items()}}
        check_lines = steps["check"]["run"].splitlines()
    with psycopg.connect(dsn) as conn:
        (ours,) = conn.execute("SELECT DISTINCT campaign_id FROM runs WHERE source LIKE %s",
                               (f"%{ws.name}%",)).fetchone()
        # another pipeline, on another system, stores a newer campaign before this one's check runs
        other = tmp_path / "other" / OTHER_OUTPUT.name
        other.parent.mkdir()
        shutil.copy(OTHER_OUTPUT, other)
        from commscope.store.ingest import Provenance, ingest
        newer = ingest(conn, [other], Provenance(system="other-box")).campaign_id
    assert newer > ours
    r = bash(check_lines, project, check_env, flags)
    # every series of this campaign is new (no earlier runs): nothing can regress
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"campaign {ours}: time_s" in r.stdout and f"campaign {ours}: mpi_fraction_avg" in r.stdout

    ctx = check_call(name)
    tree = ET.parse(project / ctx.params["junit"])
    succeeded = [e for e in json.loads((WORKSPACE / "results.latest.json").read_text())["experiments"]
                 if e["RAMBLE_STATUS"] == "SUCCESS"]
    suites = tree.getroot().findall("testsuite")
    assert len(suites) == 2
    for suite in suites:
        assert suite.get("name").endswith(f"campaign {ours}")
        cases = suite.findall("testcase")
        assert len(cases) == len(succeeded) == int(suite.get("tests"))
        assert all(c.find("skipped") is not None and "earlier runs" in c.find("skipped").get("message")
                   for c in cases)
        assert not any("other-box" in c.get("name") for c in cases)
        labels = sorted(c.get("name").split(" ")[1] for c in cases)
        assert labels == sorted(e["application_name"] for e in succeeded)
    md = (project / ctx.params["markdown"]).read_text()
    assert f"campaign {ours}" in md and f"{2 * len(succeeded)} series" in md and md.count("**no baseline**") == 2 * len(succeeded)
