// The full-duplex pages (/duplex: audio, /omni: audio and camera; <body data-mode>):
// microphone (and camera) -> one chunk per unit -> DuplexSession -> player, transcript and timeline.
import { AudioPlayer } from "../shared/audio-player.js";
import { Camera, CameraError } from "../shared/camera.js";
import { el, eta, ms } from "../shared/format.js";
import { apiKey, setApiKey } from "../shared/http.js";
import { Microphone, MicrophoneError } from "../shared/microphone.js";
import { renderNav } from "../shared/nav.js";
import { DuplexSession, INPUT_RATE } from "./duplex-session.js";
import { TranscriptView } from "./transcript-view.js";
import { UnitTimeline } from "./unit-timeline.js";

const $ = (id) => document.getElementById(id);
const MODE = document.body.dataset.mode === "omni" ? "omni" : "audio";
const OUTPUT_RATE = 24000;
// a reply's first audio waits this long behind silence, so units that arrive a little late
// (the server's time per unit varies) do not run the speakers dry between units
const LEAD_MS = 120;

const player = new AudioPlayer({ rate: OUTPUT_RATE, prebufferMs: 100 });
const transcript = new TranscriptView($("transcript"));
const timeline = new UnitTimeline($("timeline"));
const camera = MODE === "omni" ? new Camera($("camera-preview")) : null;
const units = []; // {unit_index, is_listen, wall_clock_ms, lagging, end_of_turn} of this session
let session = null;
let mic = null;
let running = false;
let turn = null; // the model's turn being spoken: {id, text}
let turns = 0;

globalThis.omnivox = {
  ...globalThis.omnivox,
  player,
  units,
  get session() {
    return session;
  },
};

function status(text) {
  $("duplex-status").textContent = text;
}

function showError(text, { reconnect = false, info = false } = {}) {
  $("duplex-error-text").textContent = text;
  $("duplex-error").hidden = !text;
  $("duplex-error").classList.toggle("info", info);
  $("reconnect").hidden = !reconnect;
}

function setRunning(on) {
  running = on;
  $("start").textContent = on ? "Stop session" : "Start session";
  $("start").setAttribute("aria-pressed", String(on));
  $("start").classList.toggle("danger", on);
  $("start").classList.toggle("primary", !on);
  if (!on) setPauseButton({ enabled: false, paused: false });
}

function setPauseButton({ enabled, paused }) {
  const button = $("pause");
  button.disabled = !enabled;
  button.textContent = paused ? "Resume" : "Pause";
  button.setAttribute("aria-pressed", String(paused));
}

function stat(label, value) {
  return el("div", { class: "stat" }, el("div", { class: "label", text: label }), el("div", { class: "value", text: String(value) }));
}

function renderFigures() {
  const times = units.map((u) => u.wall_clock_ms).sort((a, b) => a - b);
  const median = times.length ? times[Math.floor((times.length - 1) / 2)] : null;
  $("duplex-figures").replaceChildren(
    stat("Units", units.length),
    stat("Spoken", units.filter((u) => !u.is_listen).length),
    stat("Lagging", units.filter((u) => u.lagging).length),
    stat("Median unit time", ms(median)),
  );
}

// ---- the model's turns

function say(text) {
  if (!turn) {
    turns += 1;
    turn = { id: `turn-${turns}`, text: "" };
  }
  if (!text) return;
  // a unit's text is a delta: the units' texts concatenated are what was said
  transcript.delta(turn.id, "assistant", text);
  turn.text += text;
}

function onResult(r) {
  units.push({ unit_index: r.unit_index, is_listen: r.is_listen, wall_clock_ms: r.wall_clock_ms, lagging: !!r.lagging, end_of_turn: !!r.end_of_turn });
  timeline.add(r);
  renderFigures();
  if (!r.is_listen) {
    const starting = !turn;
    say(r.text || "");
    if (r.pcm && r.pcm.length) {
      if (starting) player.push(new Int16Array(Math.round((OUTPUT_RATE * LEAD_MS) / 1000)), OUTPUT_RATE);
      player.push(r.pcm, r.audio_sample_rate || OUTPUT_RATE);
    }
    status("Speaking… (talk over it to interrupt)");
    if (r.end_of_turn) {
      player.end(); // the reply is complete: play out what is queued
      turn = null;
      status("Listening.");
    }
  } else if (r.end_of_turn && turn) {
    // the model yielded before its reply was over (you talked over it): drop what is still queued
    const cut = player.stats.buffered > 0;
    player.clear();
    if (cut) transcript.interrupted([turn.id]);
    turn = null;
    status("Listening.");
  }
  if (units.length % 10 === 0) {
    const { underruns, played, dropped, clears } = player.stats;
    session?.diagnostic({ playback_underruns: underruns, played_samples: played, dropped_samples: dropped, clears, buffered_ms: Math.round(player.bufferedMs) });
  }
}

// ---- the session

function onServerError({ code, message }) {
  const text = message ? `Server: ${message} (${code})` : `Server error: ${code}`;
  if (code === "session_limit_reached" || code === "queue_full") {
    showError("The server is at capacity: every duplex worker is busy. Try again in a minute.", { reconnect: true });
  } else if (code === "no_capable_worker") {
    showError("No worker here serves full duplex (it needs an engine such as cascade).");
  } else {
    showError(text, { reconnect: code === "worker_lost" });
  }
}

function onConnection({ code, wasOpen, expected }, s) {
  if (session !== s) return; // an earlier session's socket
  if (expected || !running) {
    end({ keepError: true });
    return;
  }
  const shown = !$("duplex-error").hidden;
  if (!wasOpen) {
    showError("Could not connect to the duplex endpoint. Is the server running, and does it serve /ws/duplex?", { reconnect: true });
  } else if (code === 1008) {
    if (!shown) showError("The server refused the session: it is at capacity (or needs an API key, see Settings).", { reconnect: true });
    else $("reconnect").hidden = false;
  } else if (code === 1000 && shown) {
    $("reconnect").hidden = false; // the server said why before it closed
  } else {
    showError("The connection to the server was lost, and the session with it. Reconnect to start a new one.", { reconnect: true });
    transcript.note("— connection lost —");
  }
  end({ keepError: true });
}

function newSession() {
  const s = new DuplexSession({
    mode: MODE,
    systemPrompt: $("system-prompt").value.trim(),
    apiKey: $("api-key").value.trim(),
    config: {
      chunk_ms: Number($("chunk-ms").value) || 1000,
      force_listen_count: Math.max(0, Number($("force-listen").value) || 0),
      generate_audio: true,
    },
  });
  s.addEventListener("state", (e) => {
    const state = e.detail.state;
    if (state === "connecting") status("Connecting…");
    if (state === "preparing") status("A worker is ready; preparing the session…");
  });
  s.addEventListener("queue", (e) => {
    const q = e.detail;
    status(`Waiting for a worker: position ${q.position} of ${q.queue_length}, ${eta(q.estimated_wait_s)}.`);
  });
  s.addEventListener("prepared", (e) => {
    const p = e.detail;
    setPauseButton({ enabled: true, paused: false });
    status(MODE === "omni" ? "Live: speak and show. The model answers when you pause." : "Live: speak whenever you like. The model answers when you pause.");
    if (MODE === "omni") $("vision-note").textContent = p.vision ? "" : " (this server's model does not see them)";
    const warnings = (p.warnings || []).filter((w) => !/frame|vision|image/i.test(w) || MODE !== "omni");
    if (warnings.length) transcript.note(`Server notes: ${warnings.join("; ")}`);
  });
  s.addEventListener("result", (e) => onResult(e.detail));
  s.addEventListener("paused", (e) => {
    setPauseButton({ enabled: true, paused: true });
    player.end();
    status(`Paused. Resume within ${Math.round(e.detail.timeout_s)} s, or the server ends the session.`);
    transcript.note("— paused —");
  });
  s.addEventListener("resumed", () => {
    setPauseButton({ enabled: true, paused: false });
    status("Live again.");
    transcript.note("— resumed —");
  });
  s.addEventListener("timeout", (e) => {
    const why = e.detail.reason === "pause_timeout" ? "The pause ran out, so the server ended the session." : `The server ended the session (${e.detail.reason}).`;
    showError(`${why} Press Start for a new one.`, { info: true });
  });
  s.addEventListener("stopped", (e) => (s.ended = `The session ended after ${e.detail.units} units.`));
  s.addEventListener("server-error", (e) => onServerError(e.detail));
  s.addEventListener("connection", (e) => onConnection(e.detail, s));
  return s;
}

function onChunk(audio) {
  const s = session;
  if (!s) return;
  const frames = [];
  if (camera && (s.live || s.state === "connecting" || s.state === "queued" || s.state === "preparing")) {
    const frame = camera.frame();
    if (frame) frames.push(frame);
  }
  s.sendChunk(audio, frames);
  if (camera) $("frames-sent").textContent = String(s.sent.frames);
}

async function start() {
  showError("");
  setRunning(true);
  player.start(); // inside the click: browsers let audio start after a user gesture
  setApiKey($("api-key").value.trim());
  units.length = 0;
  timeline.clear();
  renderFigures();
  turn = null;
  const s = newSession();
  session = s;
  if (camera) $("frames-sent").textContent = "0";
  const chunkMs = s.config.chunk_ms;
  mic = new Microphone({
    rate: INPUT_RATE,
    chunkMs,
    format: $("audio-format").value === "pcm16" ? "pcm16" : "float32",
    onChunk,
    onLevel: (peak) => ($("level").value = peak),
  });
  try {
    if (camera) {
      status("Starting the camera…");
      await camera.start();
    }
    status("Starting the microphone…");
    await mic.start();
  } catch (err) {
    const known = err instanceof MicrophoneError || err instanceof CameraError;
    showError(known ? err.message : String(err));
    await end({ keepError: true });
    return;
  }
  if (session !== s) return; // stopped while the devices were starting
  await s.connect().catch(() => {}); // a failed connection is reported by onConnection
}

async function end({ keepError = false } = {}) {
  if (running) setRunning(false);
  const s = session;
  s?.stop(); // the session stays the page's until its socket has closed (for its last words)
  const m = mic;
  mic = null;
  player.clear();
  turn = null;
  camera?.stop();
  await m?.stop();
  $("level").value = 0;
  if (!keepError) showError("");
  if (!s || s.state === "closed") status(`${s?.ended ? `${s.ended} ` : ""}Press Start for a new session.`);
  else status("Ending the session…");
}

renderNav();
renderFigures();
$("api-key").value = apiKey();
$("start").addEventListener("click", () => (running ? end() : start()));
$("pause").addEventListener("click", () => {
  if (!session) return;
  if (session.state === "paused") {
    $("pause").disabled = true; // until the server says resumed
    session.resume();
  } else if (session.live) {
    setPauseButton({ enabled: false, paused: true });
    status("Pausing…");
    session.pause(Number($("pause-timeout").value) || null);
  }
});
$("reconnect").addEventListener("click", () => {
  if (!running) start();
});
window.addEventListener("pagehide", () => session?.close());
