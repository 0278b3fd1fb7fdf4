// The live voice page: microphone -> RealtimeSession -> player, transcript and latency figures.
import { AudioPlayer } from "../shared/audio-player.js";
import { el, eta, ms } from "../shared/format.js";
import { linkKey } from "../shared/client-secret.js";
import { apiKey, loadSetting, saveSetting, setApiKey } from "../shared/http.js";
import { Microphone, MicrophoneError } from "../shared/microphone.js";
import { renderNav } from "../shared/nav.js";
import { fillVoicePicker } from "../shared/voices.js";
import { CallSocket } from "./realtime-call.js";
import { RATE, RealtimeSession } from "./realtime-session.js";
import { TranscriptView } from "./transcript-view.js";

const $ = (id) => document.getElementById(id);

const player = new AudioPlayer({ rate: RATE, prebufferMs: 120 });
const transcript = new TranscriptView($("transcript"));
const latencies = [];
let session = null;
let mic = null;
let running = false;

const playback = []; // WebRTC: output_audio_buffer.* as they came, [state, responseId]

globalThis.omnivox = {
  ...globalThis.omnivox,
  player,
  latencies,
  playback,
  get session() {
    return session;
  },
  /** WebRTC: what the reply track received so far ({packets, energy}); null over a WebSocket. */
  async callStats() {
    const pc = session?.socket?.pc;
    if (!pc) return null;
    let packets = 0;
    let energy = 0;
    (await pc.getStats()).forEach((r) => {
      if (r.type === "inbound-rtp" && r.kind === "audio") {
        packets += r.packetsReceived || 0;
        energy += r.totalAudioEnergy || 0;
      }
    });
    return { packets, energy };
  },
};

const useWebRtc = () => $("transport").value === "webrtc" && "RTCPeerConnection" in globalThis;
/** The key sessions offer: a one-use key from this page's link, else the one stored here. */
const pageKey = () => linkKey() || $("api-key").value.trim();

function status(text) {
  $("voice-status").textContent = text;
}

function showError(text, { reconnect = false } = {}) {
  $("voice-error-text").textContent = text;
  $("voice-error").hidden = !text;
  $("reconnect").hidden = !reconnect;
}

function setRunning(on) {
  running = on;
  $("start").textContent = on ? "Stop conversation" : "Start conversation";
  $("start").setAttribute("aria-pressed", String(on));
  $("start").classList.toggle("danger", on);
  $("start").classList.toggle("primary", !on);
}

function addLatency(value) {
  latencies.push(value);
  $("latencies").append(el("li", { class: "latency", text: `Turn ${latencies.length}: ${ms(value)}` }));
  const sorted = [...latencies].sort((a, b) => a - b);
  const median = sorted[Math.floor((sorted.length - 1) / 2)];
  $("latency-summary").textContent = `Median ${ms(median)} over ${latencies.length} turn${latencies.length > 1 ? "s" : ""}.`;
}

function interrupt() {
  const speaking = player.stats.buffered > 0;
  player.clear();
  return speaking;
}

function onServerError({ code, message }) {
  if (code === "session_limit_reached") {
    showError("The server is at capacity: every voice worker is busy. Try again in a minute.", { reconnect: true });
    end({ keepError: true });
  } else {
    showError(message ? `Server: ${message} (${code})` : `Server error: ${code}`);
  }
}

function onConnection({ code, byUser, wasOpen, retryInMs }) {
  if (byUser || !running) return;
  if (retryInMs !== null && retryInMs !== undefined) {
    status(`Connection lost; reconnecting in ${Math.round(retryInMs / 1000)} s…`);
    transcript.note("— connection lost; a new session starts when it reconnects —");
    return;
  }
  if (!wasOpen && code !== 1008) {
    showError("Could not connect to the voice endpoint. Is the server running, and does it serve /v1/realtime?", { reconnect: true });
  } else if (code === 1008) {
    showError("The server refused the session: it is at capacity (or needs an API key, see Settings).", { reconnect: true });
  } else if (code !== 1000) {
    showError("The connection to the server was lost.", { reconnect: true });
  } else {
    showError("The server ended the session.", { reconnect: true });
  }
  end({ keepError: true });
}

function newSession(stream) {
  const socket = stream ? new CallSocket({ stream, key: pageKey() }) : null;
  const s = new RealtimeSession({
    voice: $("voice-select").value,
    instructions: $("instructions").value.trim(),
    apiKey: pageKey(),
    socket,
  });
  s.addEventListener("remote-stream", (e) => {
    const audio = $("remote-audio");
    audio.srcObject = e.detail.stream;
    audio.play().catch(() => {}); // started inside the click, so the browser lets it play
  });
  s.addEventListener("playback", (e) => {
    playback.push([e.detail.state, e.detail.responseId]);
    if (e.detail.state === "started") status("Speaking… (talk to interrupt)");
  });
  s.addEventListener("state", (e) => {
    const state = e.detail.state;
    if (state === "connecting") status("Connecting…");
    if (state === "ready") status("Listening. Speak whenever you like.");
  });
  s.addEventListener("queue", (e) => {
    const q = e.detail;
    status(`Waiting for a voice worker: position ${q.position} of ${q.queue_length}, ${eta(q.estimated_wait_s)}.`);
  });
  s.addEventListener("speech-started", (e) => {
    if (interrupt()) transcript.note("— you interrupted —");
    transcript.userStarted(e.detail.itemId);
    status("Hearing you…");
  });
  s.addEventListener("speech-stopped", () => status("Thinking…"));
  s.addEventListener("user-delta", (e) => transcript.delta(e.detail.itemId, "user", e.detail.delta));
  s.addEventListener("user-final", (e) => transcript.final(e.detail.itemId, "user", e.detail.transcript));
  s.addEventListener("assistant-delta", (e) => transcript.delta(e.detail.itemId, "assistant", e.detail.delta));
  s.addEventListener("assistant-final", (e) => transcript.final(e.detail.itemId, "assistant", e.detail.transcript));
  s.addEventListener("audio", (e) => {
    status("Speaking… (talk to interrupt)");
    player.push(e.detail.pcm, RATE);
  });
  s.addEventListener("latency", (e) => addLatency(e.detail.ms));
  s.addEventListener("response-done", (e) => {
    if (e.detail.status === "cancelled") {
      player.clear();
      transcript.interrupted(e.detail.itemIds);
    } else {
      player.end();
    }
    status("Listening.");
  });
  s.addEventListener("server-error", (e) => onServerError(e.detail));
  s.addEventListener("connection", (e) => onConnection(e.detail));
  return s;
}

async function start() {
  showError("");
  setRunning(true);
  status("Starting the microphone…");
  player.start(); // inside the click: browsers let audio start after a user gesture
  setApiKey($("api-key").value.trim());
  saveSetting("transport", $("transport").value);
  const webrtc = useWebRtc();
  let s = null;
  const m = new Microphone({
    rate: RATE,
    chunkMs: 40,
    onChunk: (pcm) => s?.appendAudio(pcm), // over WebRTC the track carries the audio: nothing to send
    onLevel: (peak) => ($("level").value = peak),
  });
  mic = m;
  if (!webrtc) s = session = newSession();
  try {
    await m.start();
  } catch (err) {
    showError(err instanceof MicrophoneError ? err.message : String(err));
    await end({ keepError: true });
    return;
  }
  if (mic !== m) return; // stopped while the microphone was starting
  if (webrtc) {
    m.onChunk = () => {};
    s = session = newSession(m.stream);
  }
  await s.connect().catch(() => {}); // a failed connection is reported by onConnection
}

async function end({ keepError = false } = {}) {
  setRunning(false);
  const s = session;
  session = null;
  s?.close();
  const m = mic;
  mic = null;
  player.clear();
  $("remote-audio").srcObject = null;
  await m?.stop();
  $("level").value = 0;
  if (!keepError) showError("");
  status("Press Start to talk again.");
}

renderNav();
$("api-key").value = apiKey();
$("transport").value = loadSetting("transport") || "webrtc";
$("start").addEventListener("click", () => (running ? end() : start()));
$("reconnect").addEventListener("click", () => {
  if (!running) start();
});
window.addEventListener("pagehide", () => session?.close());
fillVoicePicker($("voice-select"), (voice) => session?.setVoice(voice));
