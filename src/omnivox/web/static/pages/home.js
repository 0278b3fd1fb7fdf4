// Home: what this server offers (from the workers' capabilities), links, health at a glance.
import { capabilityBadges, CAPABILITY_LABELS, el, shortId, stateBadge } from "../shared/format.js";
import { getJson } from "../shared/http.js";
import { renderNav } from "../shared/nav.js";

const REFRESH_MS = 3000;

function offers(workers) {
  const caps = {};
  const engines = new Set();
  for (const w of workers) {
    if (w.engine) engines.add(w.engine);
    for (const [name, on] of Object.entries(w.capabilities || {})) if (on) caps[name] = true;
  }
  return { caps, engines: [...engines] };
}

function renderOffers(workers) {
  const box = document.getElementById("offers");
  if (!workers) {
    box.replaceChildren(el("p", { class: "alert", text: "The gateway did not answer. Is it running?" }));
    return;
  }
  if (!workers.length) {
    box.replaceChildren(el("p", { class: "muted", text: "No workers have registered yet: nothing can be served." }));
    return;
  }
  const { caps, engines } = offers(workers);
  const missing = Object.keys(CAPABILITY_LABELS).filter((n) => !caps[n]);
  box.replaceChildren(
    el("p", {}, "Engines: ", el("strong", { text: engines.join(", ") || "unknown" })),
    el("p", {}, "Available: ", capabilityBadges(caps)),
    missing.length ? el("p", { class: "muted", text: `Not available here: ${missing.map((n) => CAPABILITY_LABELS[n]).join(", ")}.` }) : null,
  );
  note("card-turnbased", caps.streaming ? (caps.audio_in ? "" : "Text only: no worker takes audio input.") : "No worker serves turn-based chat.");
  note("card-voice", caps.realtime ? "" : "Needs a worker with realtime voice (e.g. the cascade engine).");
  note("card-duplex", caps.duplex ? "" : "Needs a worker with full duplex (e.g. the cascade engine).");
  note(
    "card-omni",
    !caps.duplex ? "Needs a worker with full duplex (e.g. the cascade engine)." : caps.vision ? "" : "No worker here sees images: frames are sent but not used.",
  );
}

function note(cardId, text) {
  document.querySelector(`#${cardId} .card-note`).textContent = text;
}

function stat(label, value) {
  return el("div", { class: "stat" }, el("div", { class: "label", text: label }), el("div", { class: "value", text: String(value) }));
}

function renderHealth(health) {
  const box = document.getElementById("health");
  if (!health) {
    box.replaceChildren(stat("Gateway", "unreachable"));
    return;
  }
  box.replaceChildren(
    stat("Status", health.status),
    stat("Workers usable", `${health.workers_usable} / ${health.workers}`),
    stat("Idle", health.workers_idle),
    stat("Queue", health.queue_length),
    stat("Version", health.version),
  );
}

function renderWorkers(workers) {
  const body = document.getElementById("workers");
  if (!workers || !workers.length) {
    body.replaceChildren(el("tr", {}, el("td", { colspan: 4, class: "empty", text: "No workers." })));
    return;
  }
  body.replaceChildren(
    ...workers.map((w) =>
      el(
        "tr",
        {},
        el("td", { title: w.url, text: shortId(w.worker_id) }),
        el("td", {}, stateBadge(w.state)),
        el("td", { text: w.engine || "–" }),
        el("td", {}, capabilityBadges(w.capabilities)),
      ),
    ),
  );
}

async function refresh() {
  const [health, workers] = await Promise.all([getJson("/health"), getJson("/api/workers")]);
  const list = workers.ok ? workers.data.workers : null;
  renderHealth(health.ok ? health.data : null);
  renderOffers(list);
  renderWorkers(list);
  document.getElementById("updated").textContent = `Updated ${new Date().toLocaleTimeString()}`;
  setTimeout(refresh, REFRESH_MS);
}

renderNav();
refresh();
