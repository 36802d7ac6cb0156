'use strict';
// Runs dashboard panels' transformations through Grafana's own @grafana/data (Apache-2.0): transformDataFrame
// with the standard transformers registered, as Grafana's frontend runs them.
//
//   node transform.js < cases.json > results.json
//
// Input: [{key, transformations, frames}], each frame {name, refId, fields: [{name, type, values, labels}]} as the
// PostgreSQL datasource returns it. Output: [{key, unknown, documented, error, frames}], each output field with
// the display name Grafana gives it. An id that is neither a standard transformer nor one of DOCUMENTED is
// reported in `unknown`: transformDataFrame would pass the data through unchanged.
const data = require('@grafana/data');
const { lastValueFrom } = require('rxjs');

// A dependency crashes if `window` exists while it loads; transformDataFrame reads it afterwards. With a scene
// context it runs as Grafana 11+ dashboards (Scenes) do: options are not interpolated again.
global.window = { __grafanaSceneContext: {} };

// Grafana 13's registry starts empty: register every standard transformer (two names export joinByField).
const standard = [...new Map(Object.values(data.standardTransformers).map((t) => [t.id, t])).values()];
data.standardTransformersRegistry.setInit(() =>
  standard.map((t) => ({ id: t.id, aliasIds: t.aliasIds, name: t.name, description: t.description,
                          transformation: () => t })));
for (const t of standard) {
  if (!data.standardTransformersRegistry.getIfExists(t.id)) {
    throw new Error(`standard transformer ${t.id} did not register`);
  }
}

// Transformations that live only in Grafana's application code (AGPL), not in @grafana/data. They are written
// here from Grafana's documentation ("Transform data"), not from its code, and reported as such.
const DOCUMENTED = {
  // "Prepare time series", format "multi" (the data plane's multi-frame time series): one frame per series, each
  // with the time field and one number field; a series is a number field and one distinct combination of the string
  // fields' values, which become its labels.
  prepareTimeSeries: (options, frames) => {
    if (options.format !== 'multi') {
      throw new Error(`prepareTimeSeries: format ${options.format} is not modelled`);
    }
    return frames.flatMap(toMultiFrame);
  },
};

function toMultiFrame(frame) {
  const time = frame.fields.find((f) => f.type === 'time');
  if (!time) {
    throw new Error(`prepareTimeSeries: no time field in ${frame.fields.map((f) => f.name)}`);
  }
  const keys = frame.fields.filter((f) => f.type === 'string');
  const groups = new Map();
  for (let i = 0; i < time.values.length; i++) {
    const k = JSON.stringify(keys.map((f) => f.values[i]));
    if (!groups.has(k)) groups.set(k, []);
    groups.get(k).push(i);
  }
  const out = [];
  for (const f of frame.fields.filter((x) => x.type === 'number')) {
    for (const [k, rows] of groups) {
      const vals = JSON.parse(k);
      const labels = { ...(f.labels || {}), ...Object.fromEntries(keys.map((x, j) => [x.name, String(vals[j])])) };
      out.push({ refId: frame.refId, length: rows.length,
                 fields: [{ ...time, values: rows.map((i) => time.values[i]) },
                          { ...f, labels, values: rows.map((i) => f.values[i]) }] });
    }
  }
  return out;
}

function names(frames) {
  return frames.flatMap((f) => f.fields.flatMap((x) => [x.name, data.getFieldDisplayName(x, f, frames)]));
}

function toFrame(f) {
  return data.createDataFrame({ name: f.name, refId: f.refId,
                                fields: f.fields.map((x) => ({ name: x.name, type: x.type, values: x.values,
                                                               labels: x.labels, config: x.config || {} })) });
}

async function run(c) {
  const out = { key: c.key, unknown: [], documented: [], error: null, steps: [], frames: [] };
  let frames = c.frames.map(toFrame);
  try {
    for (const t of c.transformations) {
      out.steps.push(names(frames));
      if (data.standardTransformersRegistry.getIfExists(t.id)) {
        frames = await lastValueFrom(data.transformDataFrame([t], frames));
      } else if (DOCUMENTED[t.id]) {
        out.documented.push(t.id);
        frames = DOCUMENTED[t.id](t.options || {}, frames).map(toFrame);
      } else {
        out.unknown.push(t.id);
      }
    }
  } catch (e) {
    out.error = String((e && e.stack) || e);
  }
  out.frames = frames.map((f) => ({
    name: f.name == null ? null : f.name,
    length: f.length,
    fields: f.fields.map((x) => ({ name: x.name, type: x.type, labels: x.labels || null,
                                   displayName: data.getFieldDisplayName(x, f, frames),
                                   values: Array.from(x.values) })),
  }));
  return out;
}

async function main() {
  const chunks = [];
  for await (const chunk of process.stdin) chunks.push(chunk);
  const cases = JSON.parse(Buffer.concat(chunks).toString('utf8'));
  const results = [];
  for (const c of cases) results.push(await run(c));
  process.stdout.write(JSON.stringify(results));
}

main().catch((e) => {
  process.stderr.write(`transform.js: ${e && e.stack ? e.stack : e}\n`);
  process.exit(1);
});
