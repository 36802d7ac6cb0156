'use strict';
// Shows annotation texts as Grafana's annotation tooltip does, in headless Chromium, and prints what a reader sees.
//
//   node annotation_text.js < texts.json > shown.json
//
// Grafana's annotation tooltip (time series panels) renders an annotation's text and title as HTML:
// dangerouslySetInnerHTML={{ __html: textUtil.sanitize(text) }}. textUtil.sanitize is @grafana/data's own (the
// pinned 13.2.3 in ./node_modules, DOMPurify with Grafana's options), bundled here by esbuild and run in Chromium,
// where DOMPurify has a real DOM. Input: ["text", ...]. Output: [{html, shown, elements}]: what sanitize returned,
// the text a reader sees once it is set as a div's innerHTML, and the elements it made (a link, an image...).
// esbuild and puppeteer-core come from ./flamegraph (its own lock); the browser is COMMSCOPE_CHROMIUM, else
// chromium or chromium-browser on PATH.
const fs = require('fs');
const path = require('path');
const { browserPath } = require(path.join(__dirname, 'flamegraph', 'chromium.js'));
const esbuild = require(path.join(__dirname, 'flamegraph', 'node_modules', 'esbuild'));
const puppeteer = require(path.join(__dirname, 'flamegraph', 'node_modules', 'puppeteer-core'));

async function main() {
  const texts = JSON.parse(fs.readFileSync(0, 'utf8'));
  const sanitize = path.join(__dirname, 'node_modules', '@grafana', 'data', 'dist', 'esm', 'text', 'sanitize.mjs');
  const bundle = await esbuild.build({
    stdin: { contents: `import { sanitize } from ${JSON.stringify(sanitize)}; window.grafanaSanitize = sanitize;`,
             resolveDir: __dirname, loader: 'js' },
    bundle: true, write: false, format: 'iife', platform: 'browser', logLevel: 'error',
    define: { 'process.env.NODE_ENV': '"production"', global: 'window' },
  });
  const browser = await puppeteer.launch({ executablePath: browserPath(), headless: true,
                                           args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'] });
  try {
    const page = await browser.newPage();
    await page.setContent('<!doctype html><html><body></body></html>');
    await page.addScriptTag({ content: bundle.outputFiles[0].text });
    const shown = await page.evaluate((all) => all.map((text) => {
      const html = window.grafanaSanitize(text);
      const div = document.createElement('div');
      div.innerHTML = html;   // what React's dangerouslySetInnerHTML does
      return { html, shown: div.textContent, elements: [...div.querySelectorAll('*')].map((e) => e.tagName) };
    }), texts);
    process.stdout.write(JSON.stringify(shown));
  } finally {
    await browser.close();
  }
}

main().catch((e) => { console.error(e.stack || String(e)); process.exit(1); });
