// Recorded sessions: newest first, filtered by kind and by words in the transcripts, a page at a time.
import { bytes, clock, el, KIND_LABELS, when } from "../shared/format.js";
import { apiKey, getJson, setApiKey } from "../shared/http.js";
import { renderNav } from "../shared/nav.js";

const PAGE = 50;
let cursor = null;
let loading = false;
let stale = false; // the filters changed while a load was in flight: its answer is for the old ones

function query(next) {
  const params = new URLSearchParams({ limit: String(PAGE) });
  const kind = document.getElementById("kind").value;
  const q = document.getElementById("search").value.trim();
  if (kind) params.set("kind", kind);
  if (q) params.set("q", q);
  if (next) params.set("cursor", next);
  return `/api/recordings?${params}`;
}

function outcomeBadge(r) {
  if (r.live) return el("span", { class: "badge warn", text: "recording" });
  const tone = { closed: "ok", client_left: "ok" }[r.outcome] || "bad";
  const text = { closed: "closed", client_left: "client left", worker_lost: "worker lost" }[r.outcome] || r.outcome || "–";
  return el("span", { class: `badge ${tone}`, text });
}

function row(r) {
  const link = el("a", { href: `/sessions/${encodeURIComponent(r.session_id)}` }, el("code", { text: r.session_id }));
  return el(
    "tr",
    { "data-recording": r.session_id },
    el("td", { title: r.session_id }, link),
    el("td", { text: KIND_LABELS[r.task_type] || KIND_LABELS[r.kind] || r.kind || "–" }),
    el("td", { text: when(r.started_at) }),
    el("td", { class: "num", text: r.duration_s === null || r.duration_s === undefined ? "–" : clock(r.duration_s) }),
    el("td", { class: "num", text: String(r.turns ?? 0) }),
    el("td", { class: "num", text: bytes(r.bytes) }),
    el("td", {}, outcomeBadge(r), r.barge_ins ? el("span", { class: "muted", text: ` ${r.barge_ins} barge-in${r.barge_ins > 1 ? "s" : ""}` }) : null),
  );
}

async function load(next = null) {
  if (loading) {
    stale = true;
    return;
  }
  loading = true;
  const status = document.getElementById("list-status");
  const tbody = document.getElementById("recordings");
  status.textContent = "Loading…";
  const resp = await getJson(query(next));
  loading = false;
  if (stale) {
    stale = false;
    load(); // again, from the top, with the filters as they are now
    return;
  }
  const locked = resp.status === 401;
  document.getElementById("key-form").hidden = !locked;
  const alert = document.getElementById("list-error");
  alert.hidden = resp.ok;
  if (!resp.ok) {
    alert.textContent = locked ? "The recordings need the admin key: enter it below." : `The recordings could not be read (HTTP ${resp.status}).`;
    status.textContent = "";
    return;
  }
  const rows = resp.data.recordings.map(row);
  if (!next) tbody.replaceChildren(...rows);
  else tbody.append(...rows);
  if (!tbody.children.length) tbody.replaceChildren(el("tr", {}, el("td", { colspan: 7, class: "empty", text: "No recordings match." })));
  cursor = resp.data.next_cursor;
  document.getElementById("more").hidden = !cursor;
  const shown = tbody.querySelectorAll("tr[data-recording]").length;
  status.textContent = `${shown} recording${shown === 1 ? "" : "s"} shown${cursor ? " (more below)" : ""}.`;
}

renderNav();
document.getElementById("admin-key").value = apiKey();
document.getElementById("key-form").addEventListener("submit", (event) => {
  event.preventDefault();
  setApiKey(document.getElementById("admin-key").value.trim());
  load();
});
document.getElementById("filters").addEventListener("submit", (event) => {
  event.preventDefault();
  load();
});
document.getElementById("kind").addEventListener("change", () => load());
document.getElementById("more").addEventListener("click", () => load(cursor));
const params = new URLSearchParams(location.search);
if (params.get("kind")) document.getElementById("kind").value = params.get("kind");
if (params.get("q")) document.getElementById("search").value = params.get("q");
load();
