// Admin: the scheduler store and its gateways, workers, queue (with cancel), sessions and key
// metrics, polled about once a second.
import { capabilityBadges, el, seconds, shortId, stateBadge } from "../shared/format.js";
import { apiKey, getJson, request, setApiKey } from "../shared/http.js";
import { renderNav } from "../shared/nav.js";
import { byLabel, parseMetrics, total } from "../shared/prometheus.js";

const POLL_MS = 1000;
let timer = null;

function rows(tbody, items, columns, empty) {
  if (!items.length) {
    tbody.replaceChildren(el("tr", {}, el("td", { colspan: columns, class: "empty", text: empty })));
    return;
  }
  tbody.replaceChildren(...items);
}

function workerLoad(w) {
  if (w.ticket_id || w.busy_for_s !== null) {
    return `${w.task_type || "busy"} for ${seconds(w.busy_for_s)}`;
  }
  return w.state === "IDLE" ? "idle" : "–";
}

function renderWorkers(workers) {
  const items = workers.map((w) =>
    el(
      "tr",
      { "data-worker": w.worker_id },
      el("td", { title: w.url }, el("code", { text: shortId(w.worker_id) }), el("div", { class: "muted", text: w.url })),
      el("td", {}, stateBadge(w.state), w.error ? el("div", { class: "muted", text: w.error }) : null),
      el("td", { text: w.engine || "–" }),
      el("td", {}, capabilityBadges(w.capabilities)),
      el("td", { text: workerLoad(w) }),
      el("td", { class: "num", text: w.cached_hash ? `${w.kv_length} tokens, used ${seconds(w.cache_age_s)} ago` : "empty" }),
      el("td", { class: "num", text: String(w.sessions_served) }),
    ),
  );
  rows(document.getElementById("workers"), items, 7, "No workers registered.");
}

function renderStore(health) {
  const store = health.store || { kind: "memory", up: true, gateways: [] };
  const where = store.kind === "memory" ? "in this gateway's memory (one gateway)" : `${store.kind} at ${store.url}`;
  const state = store.up ? "reachable" : "UNREACHABLE: new sessions are refused, running ones go on";
  const pending = store.pending_operations ? `, ${store.pending_operations} operations waiting to be retried` : "";
  const draining = health.draining ? "; this gateway is draining" : "";
  document.getElementById("store-summary").textContent = `(${where}, ${state}${pending}${draining})`;
  const items = (store.gateways || []).map((g) =>
    el(
      "tr",
      { "data-gateway": g.gateway_id },
      el("td", {}, el("code", { text: shortId(g.gateway_id) }), g.self ? el("span", { class: "muted", text: " (this one)" }) : null),
      el("td", { text: g.url || "–" }),
      el("td", { class: "num", text: g.lease_left_s !== undefined ? `${seconds(g.lease_left_s)} left` : "–" }),
    ),
  );
  rows(document.getElementById("gateways"), items, 3, "No gateway holds a lease.");
}

function renderStages(data) {
  const section = document.getElementById("stages-section");
  section.hidden = !data.pipeline;
  if (!data.pipeline) return;
  const used = data.session_slots_used ?? 0;
  const slots = data.session_slots ?? "–";
  const stale = data.stale ? ` (no report for ${seconds(data.reported_s_ago)})` : "";
  document.getElementById("stages-summary").textContent =
    `${data.pipeline}: ${used} of ${slots} session slots taken, ${data.clients} clients${stale}`;
  const items = data.stages.map((s) => {
    const load = s.load || {};
    const steps = load.steps || load.batches || 0;
    const items = load.decode_items || load.batch_items || 0;
    const calls = load.decode_calls || steps;
    return el(
      "tr",
      { "data-stage": s.name },
      el("td", {}, el("code", { text: s.name }), el("div", { class: "muted", text: s.address || "" })),
      el("td", { text: s.alive ? "alive" : "down" }),
      el("td", { text: `${s.model} (${s.scheduler})` }),
      el("td", { class: "num", text: load.slots_total ? `${load.slots_used || 0} / ${load.slots_total}` : "–" }),
      el("td", { class: "num", text: String(load.queue ?? 0) }),
      el("td", { class: "num", text: calls ? `${calls}, mean ${(items / calls).toFixed(2)}` : "–" }),
      el("td", { class: "num", text: String(s.lost) }),
    );
  });
  rows(document.getElementById("stages"), items, 7, "No stages.");
}

async function cancel(ticketId, button) {
  button.disabled = true;
  const resp = await request(`/api/queue/${encodeURIComponent(ticketId)}`, { method: "DELETE" });
  const status = document.getElementById("queue-status");
  status.textContent = resp.ok
    ? `Cancelled ticket ${shortId(ticketId)}.`
    : resp.status === 404
      ? `Ticket ${shortId(ticketId)} was no longer waiting.`
      : `Could not cancel ticket ${shortId(ticketId)} (HTTP ${resp.status}).`;
  button.closest("tr")?.remove();
  refreshNow();
}

function renderQueue(queue) {
  document.getElementById("queue-summary").textContent = `(${queue.queue_length} waiting, at most ${queue.max_queue_size})`;
  const items = queue.tickets.map((t) =>
    el(
      "tr",
      { "data-ticket": t.ticket_id },
      el("td", { class: "num", text: String(t.position) }),
      el("td", {}, el("code", { text: t.ticket_id })),
      el("td", { text: t.task_type }),
      el("td", { class: "num", text: seconds(t.waited_s) }),
      el("td", { class: "num", text: t.estimated_wait_s > 0 ? seconds(t.estimated_wait_s) : "not known yet" }),
      el(
        "td",
        {},
        el("button", {
          class: "danger",
          type: "button",
          text: "Cancel",
          "aria-label": `Cancel ticket ${t.ticket_id}`,
          onclick: (event) => cancel(t.ticket_id, event.currentTarget),
        }),
      ),
    ),
  );
  rows(document.getElementById("queue"), items, 6, "Nobody is waiting.");
}

function renderSessions(data) {
  document.getElementById("sessions-summary").textContent = `(${data.active_sessions} connected)`;
  const items = data.sessions.map((s) =>
    el(
      "tr",
      { "data-session": s.session_key },
      el(
        "td",
        { title: s.session_key },
        el("a", { href: `/sessions/${encodeURIComponent(s.session_id)}`, title: "Its recording (when it is recorded)" }, el("code", { text: s.session_id })),
        s.gateway ? el("div", { class: "muted", text: `on ${shortId(s.gateway)}` }) : null,
      ),
      el("td", { text: s.kind }),
      el("td", {}, stateBadge(s.state)),
      el("td", {}, s.worker_id ? el("code", { text: shortId(s.worker_id) }) : "–"),
      el("td", { class: "num", text: String(s.turns) }),
      el("td", { class: "num", text: seconds(s.duration_s, 0) }),
    ),
  );
  rows(document.getElementById("sessions"), items, 6, "No sessions connected.");
}

function stat(label, value, hint) {
  return el(
    "div",
    { class: "stat", title: hint || null },
    el("div", { class: "label", text: label }),
    el("div", { class: "value", text: String(value) }),
  );
}

function renderMetrics(text) {
  const samples = parseMetrics(text);
  const errors = byLabel(samples, "omnivox_errors_total", "code");
  const errorHint = Object.entries(errors).map(([code, n]) => `${code}: ${n}`).join(", ");
  const ttftCount = total(samples, "omnivox_time_to_first_token_seconds_count");
  const ttftSum = total(samples, "omnivox_time_to_first_token_seconds_sum");
  const hits = total(samples, "omnivox_cache_hits_total");
  const misses = total(samples, "omnivox_cache_misses_total");
  document.getElementById("metrics").replaceChildren(
    stat("Sessions started", total(samples, "omnivox_sessions_total")),
    stat("Active sessions", total(samples, "omnivox_active_sessions")),
    stat("Queue length", total(samples, "omnivox_queue_length")),
    stat("Errors", total(samples, "omnivox_errors_total"), errorHint || "none"),
    stat("Turns served", total(samples, "omnivox_streaming_turns_total")),
    stat("Cache hit rate", hits + misses ? `${Math.round((100 * hits) / (hits + misses))} %` : "–"),
    stat("Mean TTFT", ttftCount ? `${Math.round((1000 * ttftSum) / ttftCount)} ms` : "–"),
  );
}

async function refresh() {
  const [health, workers, queue, sessions, metrics, stages] = await Promise.all([
    getJson("/health"),
    getJson("/api/workers"),
    getJson("/api/queue"),
    getJson("/api/sessions"),
    request("/metrics", { text: true }),
    getJson("/api/stages"),
  ]);
  const failed = [workers, queue, sessions, metrics].filter((r) => !r.ok);
  const locked = failed.some((r) => r.status === 401);
  document.getElementById("key-form").hidden = !locked;
  const alert = document.getElementById("admin-error");
  alert.hidden = failed.length === 0;
  alert.textContent = locked
    ? "The admin API needs the admin key: enter it below."
    : failed.length
      ? "Some of the gateway's figures could not be read; retrying."
      : "";
  if (health.data) renderStore(health.data); // (a draining gateway answers 503 with its figures)
  if (workers.ok) renderWorkers(workers.data.workers);
  if (queue.ok) renderQueue(queue.data);
  if (sessions.ok) renderSessions(sessions.data);
  if (metrics.ok) renderMetrics(metrics.data);
  if (stages.ok) renderStages(stages.data);
  document.getElementById("updated").textContent = `Updated ${new Date().toLocaleTimeString()}`;
}

function schedule() {
  clearTimeout(timer);
  if (document.getElementById("live").checked && !document.hidden) timer = setTimeout(refreshNow, POLL_MS);
}

async function refreshNow() {
  clearTimeout(timer);
  try {
    await refresh();
  } finally {
    schedule();
  }
}

renderNav();
document.getElementById("admin-key").value = apiKey();
document.getElementById("key-form").addEventListener("submit", (event) => {
  event.preventDefault();
  setApiKey(document.getElementById("admin-key").value.trim());
  refreshNow();
});
document.getElementById("live").addEventListener("change", schedule);
document.addEventListener("visibilitychange", () => (document.hidden ? clearTimeout(timer) : refreshNow()));
refreshNow();
