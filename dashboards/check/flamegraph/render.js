'use strict';
// Renders a flame graph frame with Grafana's own @grafana/flamegraph in headless Chromium and prints what it drew.
//
//   node render.js < frame.json > drawn.json
//
// Input: {fields: [{name, type, values, config}]} (the call-tree panel's frame). Output: {labels: [{text, x, y, width,
// canvasWidth, dpr}], table: [[cell, ...], ...], error}: each label the component wrote on its canvas with the bar
// it wrote it in, and the rows of its top table (symbol, self, total) as the page shows them. The browser is
// COMMSCOPE_CHROMIUM, else chromium or chromium-browser on PATH.
const fs = require('fs');
const path = require('path');
const { browserPath } = require('./chromium.js');
const esbuild = require('esbuild');
const puppeteer = require('puppeteer-core');

// @grafana/assistant is an optional peer of the flame graph (Grafana's AI assistant, not installed here): its one
// import, OpenAssistantButton, is drawn only for a frame that carries assistant context, which these frames lack.
const noAssistant = {
  name: 'no-assistant',
  setup(build) {
    build.onResolve({ filter: /^@grafana\/assistant$/ }, () => ({ path: 'assistant', namespace: 'no-assistant' }));
    build.onLoad({ filter: /.*/, namespace: 'no-assistant' }, () => ({
      contents: 'export const OpenAssistantButton = () => null;', loader: 'js' }));
  },
};

// Grafana builds its packages with webpack, which gives an ES module importing a CommonJS module with __esModule its
// exports.default; esbuild follows Node instead for imports from .mjs files (the whole exports object). These
// CommonJS packages are imported through a wrapper that hands over exports.default, as webpack does.
const BABEL_DEFAULT = ['react-custom-scrollbars-2'];
const babelDefault = {
  name: 'babel-default',
  setup(build) {
    const filter = new RegExp(`^(${BABEL_DEFAULT.join('|')})$`);
    build.onResolve({ filter }, (a) => (a.namespace === 'babel-default' ? undefined
      : { path: a.path, namespace: 'babel-default', pluginData: a.resolveDir }));
    build.onLoad({ filter: /.*/, namespace: 'babel-default' }, (a) => ({
      contents: `import * as m from ${JSON.stringify(a.path)}; export * from ${JSON.stringify(a.path)};\n` +
                `export default (m.default && m.default.default) || m.default;`,
      loader: 'js', resolveDir: a.pluginData }));
  },
};

// The top table's rows (header first), scrolled through (@grafana/ui's Table in its custom scroll view): it draws
// only the rows in view.
async function topTable(page) {
  const rows = new Map();
  for (let step = 0; step < 1000; step++) {
    const seen = await page.evaluate(async () => {
      await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
      const grid = [...document.querySelectorAll('.scrollbar-view')].filter((e) => e.querySelector('[role="row"]'))
        .sort((a, b) => (b.scrollHeight - b.clientHeight) - (a.scrollHeight - a.clientHeight))[0];
      const cells = [...document.querySelectorAll('[role="row"]')].map(
        (r) => [...r.querySelectorAll('[role="cell"], [role="gridcell"], [role="columnheader"]')].map(
          (c) => c.textContent.trim()));
      const end = !grid || grid.scrollTop + grid.clientHeight >= grid.scrollHeight - 1;
      if (grid) grid.scrollTop += Math.max(1, grid.clientHeight / 2);
      return { cells, end };
    });
    for (const r of seen.cells) rows.set(JSON.stringify(r), r);
    if (seen.end) break;
  }
  return [...rows.values()];
}

async function main() {
  const frame = JSON.parse(fs.readFileSync(0, 'utf8'));
  const bundle = await esbuild.build({
    entryPoints: [path.join(__dirname, 'page.jsx')], bundle: true, write: false, format: 'iife',
    platform: 'browser', logLevel: 'error', define: { 'process.env.NODE_ENV': '"production"', global: 'window' },
    loader: { '.css': 'empty', '.svg': 'text', '.woff2': 'empty', '.woff': 'empty', '.ttf': 'empty', '.png': 'empty' },
    plugins: [noAssistant, babelDefault],
  });
  const html = `<!doctype html><html><head><meta charset="utf-8"></head><body><div id="root"></div>
<script>window.FRAME = ${JSON.stringify(frame).replace(/</g, '\\u003c')};</script>
<script>${bundle.outputFiles[0].text.replace(/<\/script/gi, '<\\/script')}</script></body></html>`;
  const dir = fs.mkdtempSync(path.join(require('os').tmpdir(), 'flamegraph-'));
  const page_file = path.join(dir, 'page.html');
  fs.writeFileSync(page_file, html);
  const browser = await puppeteer.launch({
    executablePath: browserPath(), headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--force-device-scale-factor=1'],
  });
  try {
    const page = await browser.newPage();
    await page.setViewport({ width: 1700, height: 1000, deviceScaleFactor: 1 });
    const errors = [];
    page.on('pageerror', (e) => errors.push(String(e.message || e)));
    await page.goto('file://' + page_file);
    await page.waitForFunction(() => document.body.dataset.done || document.body.dataset.error, { timeout: 60000 });
    const out = await page.evaluate(() => ({
      labels: (window.DRAWN || []).map((d) => ({ text: d.text, x: d.bar && d.bar.x, y: d.bar && d.bar.y,
                                                 width: d.bar && d.bar.width, canvasWidth: d.canvasWidth,
                                                 dpr: d.dpr })),
      error: document.body.dataset.error || null,
    }));
    out.table = await topTable(page);
    if (errors.length && !out.error) out.error = errors.join('\n');
    process.stdout.write(JSON.stringify(out));
  } finally {
    await browser.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((e) => { process.stderr.write(String(e.stack || e) + '\n'); process.exit(1); });
