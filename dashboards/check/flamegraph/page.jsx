// The page render.js opens: Grafana's own flame graph (@grafana/flamegraph's FlameGraph, Apache-2.0) drawing one
// frame, exactly as given (window.FRAME: the call-tree panel's fields). The canvas's rect and fillText calls are
// recorded as the component makes them: each label with the bar it was drawn in (x, width), and the canvas width.
import React from 'react';
import { createRoot } from 'react-dom/client';
import { FlameGraph } from '@grafana/flamegraph';
import { createDataFrame, createTheme } from '@grafana/data';

const drawn = [];
let bar = null;
const ctx = CanvasRenderingContext2D.prototype;
const rect = ctx.rect;
ctx.rect = function (x, y, w, h) {
  bar = { x, y, width: w };
  return rect.call(this, x, y, w, h);
};
const fillText = ctx.fillText;
ctx.fillText = function (text, x, y, ...rest) {
  drawn.push({ text, bar, canvasWidth: this.canvas.width, dpr: window.devicePixelRatio });
  return fillText.call(this, text, x, y, ...rest);
};

const given = window.FRAME;
const frame = createDataFrame({
  fields: given.fields.map((f) => ({ name: f.name, type: f.type, values: f.values, config: f.config || {} })),
});
const theme = createTheme();
window.addEventListener('error', (e) => { document.body.dataset.error = String(e.message); });

function Done() {
  React.useEffect(() => {
    // two frames after mounting: the canvas has been drawn
    requestAnimationFrame(() => requestAnimationFrame(() => {
      window.DRAWN = drawn;
      document.body.dataset.done = 'yes';
    }));
  }, []);
  return null;
}

createRoot(document.getElementById('root')).render(
  <div style={{ width: '1600px', height: '900px' }}>
    <FlameGraph data={frame} getTheme={() => theme} disableCollapsing={true} />
    <Done />
  </div>
);
