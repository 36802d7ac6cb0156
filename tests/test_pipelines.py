"""The facility pipeline templates in ci/pipelines: valid YAML, the stages a
facility expects, and every commscope command they call exists and accepts
those arguments (parsed by the real command-line parser, not run)."""
from __future__ import annotations

import re
import shlex
from pathlib import Path

import click
import pytest
import yaml

from commscope.cli import main

ROOT = Path(__file__).resolve().parent.parent
PIPELINES = ROOT / "ci" / "pipelines"
STAGES = ["setup", "run", "ingest", "check", "report"]


def gitlab_scripts(doc: dict) -> dict[str, list[str]]:
    return {name: job["script"] for name, job in doc.items() if isinstance(job, dict) and "script" in job}


def github_scripts(doc: dict) -> dict[str, list[str]]:
    steps = doc["jobs"]["nightly"]["steps"]
    return {s.get("name", s.get("uses", "")): s["run"].splitlines() for s in steps if "run" in s}


def commscope_calls(lines: list[str]) -> list[list[str]]:
    calls = []
    for line in lines:
        for part in re.split(r";|&&|\bdo\b|\bdone\b", line):
            part = part.strip()
            if part.startswith("commscope "):
                # shell variables stand for strings; a placeholder keeps the argument count
                calls.append(shlex.split(re.sub(r"\$\{?\w+\}?", "X", part)))
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
                         if line.strip() and not re.search(r"\bcommscope\b", line) and not re.match(r"\s*(done|fi)\b", line)]
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
