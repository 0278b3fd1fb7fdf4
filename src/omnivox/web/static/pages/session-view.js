// One recorded session: its turns on a timeline, the transcript, reply latency, and the merged
// replay with a cursor that follows it (video beside it for omni sessions). Click a turn to seek.
import { bytes, clock, el, KIND_LABELS, ms, when } from "../shared/format.js";
import { apiKey, getJson, request, setApiKey } from "../shared/http.js";
import { renderNav } from "../shared/nav.js";
import { RecordingTimeline } from "./session-timeline.js";

const LIVE_POLL_MS = 2000;
const FIGURES = {
  voice_to_voice_s: "voice to voice",
  ttft_s: "first token",
  llm_ttft_s: "LLM first token",
  tts_ttfa_s: "TTS first audio",
  unit_wall_clock_s: "unit",
  elapsed_s: "whole reply",
};

// a reply's breakdown (recording "stages"): when it passed each stage, after the user's speech ended
const STAGES = {
  noticed: "pause noticed",
  decided: "turn decided",
  transcribed: "final transcript",
  llm_first_token: "LLM first token",
  first_words: "first words",
  tts_first_audio: "TTS first audio",
  first_audio_sent: "first audio sent",
};

const sessionId = decodeURIComponent(location.pathname.replace(/\/+$/, "").split("/").pop() || "");
let media = null; // the <audio> or <video> that plays the replay
let timeline = null;
let turns = [];
let frame = 0;

function stat(label, value, hint) {
  return el("div", { class: "stat", title: hint || null }, el("div", { class: "label", text: label }), el("div", { class: "value", text: String(value) }));
}

function seek(t) {
  if (!media || media.hidden) {
    timeline.move(t);
    highlight(t);
    return;
  }
  media.currentTime = Math.max(0, t);
  timeline.move(t);
  highlight(t);
  media.play().catch(() => {}); // autoplay rules may say no; the position is set either way
}

function highlight(t) {
  let current = null;
  for (const li of document.querySelectorAll("#transcript li")) {
    const on = t >= Number(li.dataset.start) && t <= Number(li.dataset.end);
    li.classList.toggle("now", on);
    if (on) current = li;
  }
  document.getElementById("position").textContent = `At ${clock(t)}${current ? ` — ${current.dataset.role === "user" ? "you" : "the assistant"}` : ""}`;
}

function follow() {
  cancelAnimationFrame(frame);
  const step = () => {
    timeline.move(media.currentTime);
    highlight(media.currentTime);
    if (!media.paused && !media.ended) frame = requestAnimationFrame(step);
  };
  step();
}

function renderSummary(meta, detail) {
  const outcome = meta.outcome || {};
  const kind = KIND_LABELS[meta.task_type] || KIND_LABELS[meta.kind] || meta.kind;
  const replies = turns.filter((t) => t.role === "assistant");
  const latencies = replies.map((t) => t.latency_s).filter((v) => typeof v === "number");
  const mean = latencies.length ? latencies.reduce((a, b) => a + b, 0) / latencies.length : null;
  document.getElementById("summary").replaceChildren(
    stat("Kind", kind),
    stat("Started", when(meta.started_at)),
    stat("Duration", clock(detail.timeline.duration_s ?? meta.duration_s)),
    stat("Replies", replies.length),
    stat("Barge-ins", replies.filter((t) => t.interrupted).length),
    stat("Mean reply latency", mean === null ? "–" : ms(mean * 1000), "from the end of the user's turn to the reply's first sound, as heard"),
    stat("Ended", detail.live ? "recording" : (outcome.reason || "–").replace("_", " "), (outcome.errors || []).join(", ") || null),
  );
  const lead = [];
  lead.push(`${kind} session${meta.engine ? ` on ${meta.engine}` : ""}`);
  if (meta.incomplete) lead.push(`${meta.dropped_frames} frames were not recorded (the disk could not keep up)`);
  if (meta.write_failed) lead.push("recording stopped early: the disk could not be written");
  document.getElementById("session-lead").textContent = `${lead.join("; ")}.`;
}

function renderTranscript() {
  const items = turns.map((turn) => {
    const who = turn.role === "user" ? "You" : "Assistant";
    const figures = [];
    if (typeof turn.latency_s === "number") figures.push(`replied after ${ms(turn.latency_s * 1000)}`);
    if (turn.interrupted) figures.push("cut off");
    return el(
      "li",
      { class: `line ${turn.role}${turn.interrupted ? " cut" : ""}`, "data-start": turn.start, "data-end": turn.end, "data-role": turn.role, "data-turn": turn.index },
      el("button", { type: "button", class: "rec-seek", "aria-label": `Play from ${clock(turn.start)}`, text: clock(turn.start), onclick: () => seek(turn.start) }),
      el("span", { class: "who", text: who }),
      el("span", { class: turn.text ? "said" : "said empty", text: turn.text || (turn.role === "user" ? "(speech)" : "(no words)") }),
      figures.length ? el("span", { class: "figures", text: figures.join(" · ") }) : null,
    );
  });
  const list = document.getElementById("transcript");
  if (items.length) list.replaceChildren(...items);
  else list.replaceChildren(el("li", { class: "empty", text: "Nothing was said." }));
}

function renderLatency() {
  const replies = turns.filter((t) => t.role === "assistant");
  const rows = replies.map((turn, i) => {
    const figures = Object.entries(turn.figures || {})
      .filter(([name, value]) => FIGURES[name] && typeof value === "number")
      .map(([name, value]) => `${FIGURES[name]} ${ms(value * 1000)}`);
    return el(
      "tr",
      { "data-turn": turn.index },
      el("td", { class: "num", text: String(i + 1) }),
      el("td", { class: "num" }, el("button", { type: "button", class: "rec-seek", text: clock(turn.start), onclick: () => seek(turn.start) })),
      el("td", { class: "num", text: typeof turn.latency_s === "number" ? ms(turn.latency_s * 1000) : "–" }),
      el("td", { text: figures.join(", ") || "–" }),
      el("td", { class: "wf-cell" }, waterfall(turn.stages)),
    );
  });
  const tbody = document.getElementById("latency");
  if (rows.length) tbody.replaceChildren(...rows);
  else tbody.replaceChildren(el("tr", {}, el("td", { colspan: 5, class: "empty", text: "No replies." })));
}

// A small waterfall: each stage a bar from the stage before it to its own mark, on one scale per reply.
function waterfall(stages) {
  const marks = Object.keys(STAGES).filter((name) => typeof stages?.[name] === "number").map((name) => [name, stages[name]]);
  if (!marks.length) return "–";
  const scale = Math.max(...marks.map(([, at]) => at), 0.001);
  const pct = (s) => `${Math.max(0, (100 * s) / scale).toFixed(1)}%`;
  let before = 0;
  const rows = marks.map(([name, at]) => {
    const from = Math.min(before, at);
    const bar = el("span", { class: `wf-bar${at < before ? " early" : ""}`, "data-stage": name });
    bar.style.left = pct(from);
    bar.style.width = pct(Math.abs(at - before));
    before = at;
    return el(
      "li",
      { class: "wf-row", "data-stage": name, title: `${STAGES[name]}: ${ms(at * 1000)} after the speech ended` },
      el("span", { class: "wf-label", text: STAGES[name] }),
      el("span", { class: "wf-track" }, bar),
      el("span", { class: "wf-ms", text: ms(at * 1000) }),
    );
  });
  return el("ol", { class: "waterfall", "aria-label": "Where the time went, after the user's speech ended" }, ...rows);
}

function renderDetails(meta) {
  const workers = (meta.workers || []).map((w) => `${w.worker_id} (${w.engine})`).join(", ");
  const rows = [
    ["Recording", meta.recording_id],
    ["Client's session id", meta.session_id],
    ["Task", meta.task_type],
    ["Workers", workers || "–"],
    ["Size", bytes(meta.bytes)],
    ["Files", Object.entries(meta.files || {}).map(([k, v]) => `${k}: ${v}`).join(", ") || "–"],
    ["Client address", meta.client_address || "not kept"],
  ];
  document.getElementById("details").replaceChildren(...rows.map(([k, v]) => el("tr", {}, el("th", { scope: "row", text: k }), el("td", { text: String(v ?? "–") }))));
}

function setupMedia(detail) {
  const panel = document.getElementById("replay-panel");
  const video = document.getElementById("replay-video");
  const audio = document.getElementById("replay-audio");
  const src = detail.media.mp4 || detail.media.wav;
  panel.hidden = !src;
  if (!src) return;
  media = detail.media.mp4 ? video : audio;
  (media === video ? audio : video).hidden = true;
  media.hidden = false;
  if (media.getAttribute("src") !== src) media.src = src;
  for (const name of ["play", "seeked", "timeupdate"]) media.addEventListener(name, follow);
}

async function load() {
  const resp = await getJson(`/api/recordings/${encodeURIComponent(sessionId)}`);
  const locked = resp.status === 401;
  document.getElementById("key-form").hidden = !locked;
  const alert = document.getElementById("view-error");
  alert.hidden = resp.ok;
  if (!resp.ok) {
    alert.textContent = locked
      ? "This recording needs the admin key: enter it below."
      : resp.status === 404
        ? "There is no recording of this session (it was not recorded, opted out, or was removed)."
        : `The recording could not be read (HTTP ${resp.status}).`;
    document.getElementById("session-lead").textContent = "";
    return;
  }
  const detail = resp.data;
  turns = detail.timeline.turns || [];
  timeline.render(detail.timeline);
  renderSummary(detail.meta, detail);
  renderTranscript();
  renderLatency();
  renderDetails(detail.meta);
  setupMedia(detail);
  document.getElementById("live-note").hidden = !detail.live;
  if (detail.live || detail.meta.status !== "complete") setTimeout(load, LIVE_POLL_MS);
}

async function remove() {
  if (!confirm(`Delete the recording of ${sessionId}? This cannot be undone.`)) return;
  const resp = await request(`/api/recordings/${encodeURIComponent(sessionId)}`, { method: "DELETE" });
  const status = document.getElementById("delete-status");
  if (resp.ok) location.assign("/sessions");
  else status.textContent = resp.status === 409 ? "It is still being recorded: end the session first." : `Could not delete it (HTTP ${resp.status}).`;
}

renderNav();
document.getElementById("session-id").textContent = sessionId;
document.title = `${sessionId} · Session replay · omnivox`;
timeline = new RecordingTimeline(document.getElementById("timeline"), document.getElementById("timeline-scroll"), seek);
document.getElementById("admin-key").value = apiKey();
document.getElementById("key-form").addEventListener("submit", (event) => {
  event.preventDefault();
  setApiKey(document.getElementById("admin-key").value.trim());
  load();
});
document.getElementById("delete").addEventListener("click", remove);
load();
