// The chat page: wires the composer, the microphone and the player to a StreamingChat.
import { AudioPlayer } from "../shared/audio-player.js";
import { eta, seconds } from "../shared/format.js";
import { getJson } from "../shared/http.js";
import { imageFileToPart } from "../shared/image.js";
import { Microphone, MicrophoneError } from "../shared/microphone.js";
import { renderNav } from "../shared/nav.js";
import { fillVoicePicker } from "../shared/voices.js";
import { pcm16ToBase64 } from "../shared/pcm.js";
import { ChatView } from "./chat-view.js";
import { StreamingChat } from "./chat-session.js";
import { bindHoldToTalk } from "./hold-to-talk.js";

const MIC_RATE = 16000; // the streaming protocol's audio parts are 16 kHz PCM16
const $ = (id) => document.getElementById(id);

const view = new ChatView($("messages"));
const player = new AudioPlayer({ rate: 24000 });
let chat = newChat();
let image = null; // {data, url} of the image to send with the next message
let recording = null; // {mic, chunks} while the talk button is held
let current = null; // {user, reply} bubbles of the running turn

globalThis.omnivox = { ...globalThis.omnivox, player, get chat() { return chat; } };

function newChat() {
  const c = new StreamingChat();
  c.addEventListener("queue", (e) => {
    const q = e.detail;
    status(`Waiting for a worker: position ${q.position} of ${q.queue_length}, ${eta(q.estimated_wait_s)}. Stop leaves the queue.`);
    current?.reply.status(`queued (#${q.position})`);
  });
  c.addEventListener("started", (e) => status(e.detail.waited_s > 0.05 ? `A worker took the turn after ${seconds(e.detail.waited_s)}.` : ""));
  c.addEventListener("prefill", (e) => {
    if (e.detail.transcript) current?.user.heard(e.detail.transcript);
    current?.reply.status("thinking…");
  });
  c.addEventListener("chunk", (e) => {
    const { text, audio, rate } = e.detail;
    if (text) current?.reply.append(text);
    if (audio) player.push(audio, rate);
  });
  c.addEventListener("done", (e) => {
    player.end();
    current?.reply.finish(e.detail);
    current = null;
    status("");
    setBusy(false);
  });
  c.addEventListener("failed", (e) => {
    showError(describeError(e.detail));
    current?.reply.remove();
    current?.user.failed(e.detail.code);
    current = null;
    status("");
    setBusy(false);
  });
  c.addEventListener("notice", (e) => showError(describeError(e.detail)));
  return c;
}

function describeError({ code, message }) {
  if (code === "ticket_cancelled") return "You left the queue (or an admin cancelled the ticket). Send again to retry.";
  if (code === "queue_full") return "The server is at capacity and its queue is full. Try again in a minute.";
  if (code === "session_limit_reached") return "The server is at capacity: no worker came free in time. Try again in a minute.";
  if (code === "no_capable_worker") return "No worker can serve this message (for example audio or images on a text-only engine).";
  return message ? `${message} (${code})` : `Error: ${code}`;
}

function status(text) {
  $("queue-status").textContent = text;
}

function showError(text) {
  $("chat-error").textContent = text;
  $("chat-error").hidden = !text;
}

function setBusy(busy) {
  $("send").disabled = busy;
  $("talk").disabled = busy;
  $("stop").disabled = !busy;
}

async function send({ audio = null } = {}) {
  const text = $("message-input").value.trim();
  if (chat.busy || (!text && !audio && !image)) return;
  showError("");
  const parts = [];
  if (image) parts.push({ type: "image", data: image.data });
  if (audio) parts.push({ type: "audio", data: pcm16ToBase64(audio), format: "pcm16", sample_rate: MIC_RATE });
  if (text) parts.push({ type: "text", text });
  const content = parts.length === 1 && text ? text : parts;
  const speak = $("speak-replies").checked;
  if (speak) await player.start(); // in the click's user gesture: browsers allow audio to start
  player.clear();
  const user = view.addUser(text, { imageUrl: image?.url, audioSeconds: audio ? audio.length / MIC_RATE : null });
  current = { user, reply: view.addAssistant() };
  $("message-input").value = "";
  clearImage({ revoke: false });
  setBusy(true);
  const maxNewTokens = Math.max(1, Number($("max-tokens").value) || 256);
  await chat.send({ role: "user", content }, { maxNewTokens, generateAudio: speak, voice: $("voice-select").value });
}

async function startTalking() {
  if (chat.busy) return;
  showError("");
  const chunks = [];
  const mic = new Microphone({
    rate: MIC_RATE,
    chunkMs: 100,
    onChunk: (pcm) => chunks.push(pcm),
    onLevel: (peak) => ($("mic-level").value = peak),
  });
  recording = { mic, chunks };
  $("mic-level").hidden = false;
  if ($("speak-replies").checked) player.start(); // still inside the press gesture
  try {
    await mic.start();
    status("Listening… release to send.");
  } catch (err) {
    recording = null;
    $("mic-level").hidden = true;
    showError(err instanceof MicrophoneError ? err.message : String(err));
  }
}

async function stopTalking() {
  const rec = recording;
  recording = null;
  if (!rec) return;
  await rec.mic.stop();
  $("mic-level").hidden = true;
  status("");
  const length = rec.chunks.reduce((n, c) => n + c.length, 0);
  if (length < MIC_RATE * 0.3) {
    showError("That was too short: hold the button while you speak.");
    return;
  }
  const audio = new Int16Array(length);
  let offset = 0;
  for (const c of rec.chunks) {
    audio.set(c, offset);
    offset += c.length;
  }
  await send({ audio });
}

function clearImage({ revoke = true } = {}) {
  if (revoke && image) URL.revokeObjectURL(image.url);
  image = null;
  $("attachment").hidden = true;
  $("image-input").value = "";
}

async function attachImage(file) {
  try {
    clearImage();
    image = await imageFileToPart(file);
    $("attachment-preview").src = image.url;
    $("attachment").hidden = false;
  } catch {
    showError("That file could not be read as an image.");
  }
}

async function describeWorkers() {
  const resp = await getJson("/api/workers");
  if (!resp.ok) return;
  const workers = resp.data.workers.filter((w) => w.capabilities?.streaming);
  const has = (cap) => workers.some((w) => w.capabilities[cap]);
  const engines = [...new Set(workers.map((w) => w.engine))].join(", ") || "none";
  const notes = [];
  if (!has("audio_in")) notes.push("voice messages are not understood");
  if (!has("audio_out")) notes.push("replies come as text only");
  if (!has("vision")) notes.push("images are not seen");
  $("capabilities").textContent = `Engines: ${engines}.${notes.length ? ` On these workers ${notes.join(", ")}.` : ""}`;
}

renderNav();
setBusy(false);
$("composer").addEventListener("submit", (event) => {
  event.preventDefault();
  send();
});
$("message-input").addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
    event.preventDefault();
    send();
  }
});
$("stop").addEventListener("click", () => {
  player.clear();
  chat.stop();
});
$("attach").addEventListener("click", () => $("image-input").click());
$("image-input").addEventListener("change", (event) => event.target.files[0] && attachImage(event.target.files[0]));
$("remove-image").addEventListener("click", () => clearImage());
$("new-chat").addEventListener("click", () => {
  if (chat.busy) chat.stop();
  chat.close();
  player.clear();
  view.clear();
  chat = newChat();
  current = null;
  setBusy(false);
  showError("");
  status("");
});
bindHoldToTalk($("talk"), { onStart: startTalking, onEnd: stopTalking });
describeWorkers();
fillVoicePicker($("voice-select"));
