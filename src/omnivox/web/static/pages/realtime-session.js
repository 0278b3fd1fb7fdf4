// A live voice session over WS /v1/realtime (OpenAI Realtime API, GA event names).
//
// Configures the session once the server says `session.created`, streams microphone audio as
// `input_audio_buffer.append`, and turns server events into a few page-level events:
//   "state" {state}                 connecting | configuring | ready | closed
//   "speech-started" / "speech-stopped" {itemId}
//   "user-delta" {itemId, delta}, "user-final" {itemId, transcript}
//   "assistant-delta" {itemId, delta}, "assistant-final" {itemId, transcript}
//   "audio" {pcm: Int16Array, itemId}
//   "latency" {ms}                  end of user speech -> first reply audio, measured here: the
//                                   end is where the server's VAD put it (audio_end_ms, on the
//                                   clock of the audio this page sent), mapped back to the moment
//                                   the page captured that sample
//   "response-done" {status, itemIds}
//   "queue" {position, queue_length, estimated_wait_s}
//   "playback" {state, responseId}  WebRTC: the call's reply audio started | stopped | cleared
//   "remote-stream" {stream}        WebRTC: the reply's audio track, to play
//   "server-error" {code, message, type}
//   "connection" {open, code, reason, retryInMs, byUser}
import { sessionKey } from "../shared/client-secret.js";
import { wsUrl } from "../shared/http.js";
import { base64ToPcm16, pcm16ToBase64 } from "../shared/pcm.js";
import { JsonSocket } from "../shared/ws-client.js";

export const RATE = 24000; // audio/pcm in both directions
const MAX_PENDING = RATE * 3; // microphone audio kept while the session is not ready yet

// beta event names a server may still send
const ALIASES = {
  "response.audio.delta": "response.output_audio.delta",
  "response.audio.done": "response.output_audio.done",
  "response.audio_transcript.delta": "response.output_audio_transcript.delta",
  "response.audio_transcript.done": "response.output_audio_transcript.done",
  "response.text.delta": "response.output_text.delta",
};

export class RealtimeSession extends EventTarget {
  /** `socket`: a CallSocket for WebRTC; else a WebSocket, whose every connection offers a key of
   * its own (an ephemeral key: a long-lived `apiKey` never goes on the connection itself). */
  constructor({ voice = "", instructions = "", apiKey = "", retries = 2, socket = null } = {}) {
    super();
    this.voice = voice;
    this.instructions = instructions;
    const protocols = async () => {
      const key = await sessionKey(apiKey);
      return key ? ["realtime", `openai-insecure-api-key.${key}`] : ["realtime"];
    };
    this.socket = socket || new JsonSocket(wsUrl("/v1/realtime?omnivox_events=true"), { protocols, retries });
    this.socket.addEventListener("remote-stream", (e) => this.emit("remote-stream", e.detail));
    this.socket.addEventListener("message", (e) => this.receive(e.detail));
    this.socket.addEventListener("open", () => this.setState("configuring"));
    this.socket.addEventListener("close", (e) => {
      this.ready = false;
      this.setState("closed");
      this.emit("connection", { open: false, ...e.detail });
    });
    this.socket.addEventListener("retry", () => this.setState("connecting"));
    this.ready = false;
    this.pending = [];
    this.pendingLength = 0;
    this.speechStoppedAt = null;
    this.samplesSent = 0; // the server's audio clock, in samples
    this.captureMarks = []; // [samplesSent after a chunk, when that chunk was captured], recent ones
    this.assistantItems = new Set(); // items of the response being spoken
  }

  emit(type, detail = {}) {
    this.dispatchEvent(new CustomEvent(type, { detail }));
  }

  setState(state) {
    this.state = state;
    this.emit("state", { state });
  }

  connect() {
    this.setState("connecting");
    return this.socket.open();
  }

  close() {
    this.socket.close(1000, "user ended the call");
  }

  sessionConfig() {
    const output = { format: { type: "audio/pcm", rate: RATE } };
    if (this.voice) output.voice = this.voice;
    const session = {
      type: "realtime",
      output_modalities: ["audio"],
      audio: {
        input: {
          format: { type: "audio/pcm", rate: RATE },
          turn_detection: { type: "server_vad", silence_duration_ms: 500 },
          transcription: { model: "default" },
        },
        output,
      },
    };
    if (this.instructions) session.instructions = this.instructions;
    return session;
  }

  setVoice(voice) {
    this.voice = voice;
    if (this.ready && voice) {
      this.socket.send({ type: "session.update", session: { type: "realtime", audio: { output: { voice } } } });
    }
  }

  /** Microphone audio (PCM16 at 24 kHz); held back (up to 3 s) until the session is configured. */
  appendAudio(pcm, capturedAt = performance.now()) {
    if (this.ready && this.socket.isOpen) {
      this.socket.send({ type: "input_audio_buffer.append", audio: pcm16ToBase64(pcm) });
      this.samplesSent += pcm.length;
      this.captureMarks.push([this.samplesSent, capturedAt]);
      if (this.captureMarks.length > 500) this.captureMarks.shift();
      return;
    }
    this.pending.push([pcm, capturedAt]);
    this.pendingLength += pcm.length;
    while (this.pendingLength > MAX_PENDING) this.pendingLength -= this.pending.shift()[0].length;
  }

  flushPending() {
    const pending = this.pending;
    this.pending = [];
    this.pendingLength = 0;
    for (const [pcm, capturedAt] of pending) this.appendAudio(pcm, capturedAt);
  }

  /** When the page captured the sample at `ms` of the audio it sent (null if long forgotten). Over
   * WebRTC the audio clock starts when the call connected (jitter buffers add tens of ms). */
  capturedAt(ms) {
    if (this.socket.audioClockStart != null) return this.socket.audioClockStart + ms;
    const sample = (ms * RATE) / 1000;
    const mark = this.captureMarks.find(([sent]) => sent >= sample);
    return mark ? mark[1] - ((mark[0] - sample) * 1000) / RATE : null;
  }

  receive(event) {
    const type = ALIASES[event.type] || event.type;
    const handler = this.handlers[type];
    if (handler) handler.call(this, event);
  }

  handlers = {
    "session.created"() {
      this.socket.send({ type: "session.update", session: this.sessionConfig() });
    },
    "session.updated"() {
      if (this.ready) return; // a later update (voice change)
      this.ready = true;
      this.setState("ready");
      this.flushPending();
    },
    "input_audio_buffer.speech_started"(e) {
      this.speechStoppedAt = null; // still talking: a measurement starts when the speech ends
      this.emit("speech-started", { itemId: e.item_id });
    },
    "input_audio_buffer.speech_stopped"(e) {
      this.speechStoppedAt = this.capturedAt(e.audio_end_ms) ?? performance.now();
      this.emit("speech-stopped", { itemId: e.item_id });
    },
    "conversation.item.input_audio_transcription.delta"(e) {
      this.emit("user-delta", { itemId: e.item_id, delta: e.delta || "" });
    },
    "conversation.item.input_audio_transcription.completed"(e) {
      this.emit("user-final", { itemId: e.item_id, transcript: e.transcript || "" });
    },
    "response.created"() {
      this.assistantItems = new Set();
    },
    "response.output_audio.delta"(e) {
      if (this.speechStoppedAt !== null) {
        this.emit("latency", { ms: performance.now() - this.speechStoppedAt });
        this.speechStoppedAt = null;
      }
      this.assistantItems.add(e.item_id);
      this.emit("audio", { pcm: base64ToPcm16(e.delta), itemId: e.item_id });
    },
    "response.output_audio_transcript.delta"(e) {
      this.assistantItems.add(e.item_id);
      this.emit("assistant-delta", { itemId: e.item_id, delta: e.delta || "" });
    },
    "response.output_text.delta"(e) {
      this.assistantItems.add(e.item_id);
      this.emit("assistant-delta", { itemId: e.item_id, delta: e.delta || "" });
    },
    "response.output_audio_transcript.done"(e) {
      this.emit("assistant-final", { itemId: e.item_id, transcript: e.transcript || "" });
    },
    "response.done"(e) {
      const response = e.response || {};
      this.emit("response-done", { status: response.status, itemIds: [...this.assistantItems] });
    },
    "output_audio_buffer.started"(e) {
      if (this.speechStoppedAt !== null) {
        this.emit("latency", { ms: performance.now() - this.speechStoppedAt });
        this.speechStoppedAt = null;
      }
      this.emit("playback", { state: "started", responseId: e.response_id });
    },
    "output_audio_buffer.stopped"(e) {
      this.emit("playback", { state: "stopped", responseId: e.response_id });
    },
    "output_audio_buffer.cleared"(e) {
      this.emit("playback", { state: "cleared", responseId: e.response_id });
    },
    "omnivox.queue"(e) {
      this.emit("queue", e);
    },
    error(e) {
      const err = e.error || {};
      this.emit("server-error", { code: err.code, message: err.message, type: err.type });
    },
  };
}
