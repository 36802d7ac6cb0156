#!/usr/bin/env bash
# Installs the pinned @grafana/data (package-lock.json) that tests/test_grafana_data.py runs the dashboards'
# transformations through. Quiet, and does nothing when node_modules already matches the lock file.
set -euo pipefail
cd "$(dirname "$0")"
if ! command -v npm >/dev/null; then
  echo "[setup] npm not found: tests/test_grafana_data.py will skip (install Node.js 20 and npm)" >&2
  exit 0
fi
if [ -f node_modules/.package-lock.json ] && cmp -s package-lock.json node_modules/.package-lock.json.commscope; then
  exit 0
fi
npm ci --no-audit --no-fund --loglevel=error >/dev/null
cp package-lock.json node_modules/.package-lock.json.commscope
