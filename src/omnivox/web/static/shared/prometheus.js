// Parses the Prometheus text exposition format (what GET /metrics returns) into samples.

/** "name{a=\"x\",b=\"y\"} 3" lines -> [{name, labels: {a: "x", b: "y"}, value: 3}] */
export function parseMetrics(text) {
  const samples = [];
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (!line || line.startsWith("#")) continue;
    const match = line.match(/^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)/);
    if (!match) continue;
    samples.push({ name: match[1], labels: parseLabels(match[3] || ""), value: Number(match[4]) });
  }
  return samples;
}

function parseLabels(text) {
  const labels = {};
  const re = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;
  let m;
  while ((m = re.exec(text)) !== null) {
    labels[m[1]] = m[2].replace(/\\n/g, "\n").replace(/\\"/g, '"').replace(/\\\\/g, "\\");
  }
  return labels;
}

/** Sum of the samples named `name` whose labels include `where`. */
export function total(samples, name, where = {}) {
  return samples
    .filter((s) => s.name === name && Object.entries(where).every(([k, v]) => s.labels[k] === v))
    .reduce((acc, s) => acc + s.value, 0);
}

/** {label value: sample value} for the samples named `name`, keyed by `label`. */
export function byLabel(samples, name, label) {
  const out = {};
  for (const s of samples) if (s.name === name) out[s.labels[label]] = (out[s.labels[label]] || 0) + s.value;
  return out;
}
