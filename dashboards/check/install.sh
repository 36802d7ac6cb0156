#!/usr/bin/env bash
# Installs the pinned @grafana/data (package-lock.json) that tests/test_grafana_data.py runs the dashboards'
# transformations through, and in flamegraph/ the pinned @grafana/flamegraph, React, esbuild and puppeteer-core that
# tests/test_flamegraph_render.py draws the call tree with (its own lock: the flame graph needs React 18, @grafana/data
# 13.2.3 React 19). Quiet, and does nothing where node_modules already matches the lock file.
set -euo pipefail
cd "$(dirname "$0")"
if ! command -v npm >/dev/null; then
  echo "[setup] npm not found: tests/test_grafana_data.py will skip (install Node.js 20 and npm)" >&2
  exit 0
fi
for dir in . flamegraph; do
  if [ -f "$dir/node_modules/.package-lock.json" ] && \
      cmp -s "$dir/package-lock.json" "$dir/node_modules/.package-lock.json.commscope"; then
    continue
  fi
  # @grafana/flamegraph 13.0.1 runs on React 18, but its assistant peer pulls @grafana/runtime 13.2.3, which asks
  # for React 19: npm's strict peer check refuses that lock (ERESOLVE), so flamegraph/ installs with legacy peers
  peers=(); [ "$dir" = flamegraph ] && peers=(--legacy-peer-deps)
  (cd "$dir" && npm ci "${peers[@]}" --no-audit --no-fund --loglevel=error >/dev/null)
  cp "$dir/package-lock.json" "$dir/node_modules/.package-lock.json.commscope"
done
