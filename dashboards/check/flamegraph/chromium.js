'use strict';
// The headless browser both checks (render.js, ../annotation_text.js) draw in: COMMSCOPE_CHROMIUM, else chromium,
// chromium-browser or google-chrome on PATH.
const { execFileSync } = require('child_process');

function browserPath() {
  if (process.env.COMMSCOPE_CHROMIUM) return process.env.COMMSCOPE_CHROMIUM;
  for (const name of ['chromium', 'chromium-browser', 'google-chrome']) {
    try {
      return execFileSync('sh', ['-c', `command -v ${name}`]).toString().trim();
    } catch (e) { /* next */ }
  }
  throw new Error('no Chromium: install chromium or set COMMSCOPE_CHROMIUM');
}

module.exports = { browserPath };
