// Small formatting and DOM helpers shared by the pages.
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (name === "class") node.className = value;
    else if (name === "text") node.textContent = value;
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value === true ? "" : value);
  }
  node.append(...children.filter((c) => c !== null && c !== undefined));
  return node;
}

export function seconds(value, digits = 1) {
  if (value === null || value === undefined) return "–";
  if (value >= 120) return `${Math.floor(value / 60)} min ${Math.round(value % 60)} s`;
  return `${Number(value).toFixed(digits)} s`;
}

/** A queue ETA: the gateway says 0 until it has timed a few turns. */
export function eta(value) {
  return value > 0 ? `about ${seconds(value)}` : "no estimate yet";
}

export function ms(value) {
  if (value === null || value === undefined) return "–";
  return `${Math.round(value)} ms`;
}

export function shortId(id) {
  return id ? String(id).slice(0, 12) : "–";
}

/** A badge for a worker or session state: green when it can take work, orange busy, red broken. */
export function stateBadge(state) {
  const s = String(state || "").toUpperCase();
  const tone =
    s === "IDLE" || s === "ACTIVE"
      ? "ok"
      : s.startsWith("BUSY") || s.startsWith("DUPLEX") || s === "QUEUED" || s === "LOADING"
        ? "warn"
        : s === "ERROR" || s === "OFFLINE"
          ? "bad"
          : "off";
  return el("span", { class: `badge ${tone}`, text: String(state || "unknown") });
}

export const CAPABILITY_LABELS = {
  streaming: "turn-based streaming",
  realtime: "realtime voice",
  duplex: "full duplex",
  audio_in: "audio in",
  audio_out: "audio out",
  vision: "vision",
};

export function capabilityBadges(caps = {}) {
  const names = Object.keys(CAPABILITY_LABELS).filter((name) => caps[name]);
  if (!names.length) return el("span", { class: "muted", text: "none" });
  return el("span", { class: "caps" }, ...names.map((n) => el("span", { class: "badge", text: CAPABILITY_LABELS[n] })));
}

/** A time on a recording's clock: m:ss.s (h:mm:ss past an hour). */
export function clock(value) {
  if (value === null || value === undefined || !Number.isFinite(value)) return "–";
  const s = Math.max(0, value);
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const sec = s % 60;
  if (h) return `${h}:${String(m).padStart(2, "0")}:${String(Math.floor(sec)).padStart(2, "0")}`;
  return `${m}:${sec.toFixed(1).padStart(4, "0")}`;
}

/** A size in bytes, in the unit that reads best. */
export function bytes(value) {
  if (!value) return "0 B";
  const units = ["B", "kB", "MB", "GB"];
  let n = value;
  let i = 0;
  while (n >= 1000 && i < units.length - 1) {
    n /= 1000;
    i += 1;
  }
  return `${n >= 100 || i === 0 ? Math.round(n) : n.toFixed(1)} ${units[i]}`;
}

/** A wall-clock time (seconds since the epoch) in the reader's own time zone. */
export function when(epochSeconds) {
  if (!epochSeconds) return "–";
  return new Date(epochSeconds * 1000).toLocaleString(undefined, { dateStyle: "medium", timeStyle: "medium" });
}

/** What each kind of session is called on the pages (by protocol or by task type). */
export const KIND_LABELS = {
  streaming: "Turn-based chat",
  realtime: "Live voice",
  duplex: "Duplex",
  audio_duplex: "Duplex (audio)",
  omni_duplex: "Omni (video)",
};
