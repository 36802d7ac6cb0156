#!/usr/bin/env bash
# Installs the CI tools tests/test_pipelines.py runs the pipeline templates with, pinned:
# - gitlab-ci-local (package-lock.json, npm ci into node_modules here): runs gitlab-ci.yml with the shell executor;
# - actionlint (Go module, built into $COMMSCOPE_TOOLS, default ~/.cache/commscope/tools): checks github-actions.yml.
# Quiet, and does nothing for a tool already installed at its pinned version. Without npm or Go the tool is left
# out, and its test skips saying so.
set -euo pipefail
cd "$(dirname "$0")"
ACTIONLINT_VERSION=v1.7.12
tools="${COMMSCOPE_TOOLS:-$HOME/.cache/commscope/tools}"

if ! command -v npm >/dev/null; then
  echo "[setup] npm not found: the gitlab-ci-local test of ci/pipelines will skip (install Node.js 20 and npm)" >&2
elif ! { [ -f node_modules/.package-lock.json ] && cmp -s package-lock.json node_modules/.package-lock.json.commscope; }; then
  npm ci --no-audit --no-fund --loglevel=error >/dev/null
  cp package-lock.json node_modules/.package-lock.json.commscope
fi

if ! command -v go >/dev/null; then
  echo "[setup] go not found: the actionlint test of ci/pipelines will skip (install Go)" >&2
elif ! "$tools/actionlint" -version 2>/dev/null | grep -qx "$ACTIONLINT_VERSION"; then
  mkdir -p "$tools"
  (cd "$tools" && GOBIN="$tools" go install "github.com/rhysd/actionlint/cmd/actionlint@$ACTIONLINT_VERSION")
fi
