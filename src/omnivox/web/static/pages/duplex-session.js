// A full-duplex session over WS /ws/duplex/{session_id} (the MiniCPM-o demo's protocol).
//
// connect() opens the socket; the server says where the session waits (queued, queue_update) and
// queue_done once a worker holds it; the session then sends `prepare`, and once `prepared` arrives
// the page sends one `audio_chunk` per unit (sendChunk), each answered by one `result`.
// Events (CustomEvent, detail in brackets):
//   "state" {state}      connecting | queued | preparing | active | pausing | paused | stopping | closed
//   "queue" {position, queue_length, estimated_wait_s}
//   "prepared"           the prepared message (effective config, vision, warnings)
//   "result"             the result message, plus pcm (Int16Array of audio_data, or null)
//   "paused" {timeout_s}, "resumed", "stopped" {units}, "timeout" {reason}
//   "server-error" {code, message}
//   "connection" {code, reason, wasOpen, expected}   the socket closed; expected after stop,
//                                                    a pause timeout, or close() by the page
import { keyProtocols, wsUrl } from "../shared/http.js";
import { base64ToPcm16, bytesToBase64, pcm16ToBase64 } from "../shared/pcm.js";
import { JsonSocket } from "../shared/ws-client.js";
import { newSessionId } from "./chat-session.js";

export const INPUT_RATE = 16000; // what the page sends (the protocol's default sample_rate)
const MAX_PENDING_CHUNKS = 3; // audio captured before the session is ready, oldest dropped first
const STOP_GRACE_MS = 3000; // how long to wait for `stopped` before closing anyway

export class DuplexSession extends EventTarget {
  /**
   * @param {object} opts
   * @param {"audio" | "omni"} opts.mode
   * @param {string} [opts.systemPrompt]
   * @param {object} [opts.config]  prepare.config (chunk_ms, force_listen_count, generate_audio, ...)
   * @param {string} [opts.apiKey]
   */
  constructor({ mode = "audio", systemPrompt = "", config = {}, apiKey = "" } = {}) {
    super();
    this.mode = mode;
    this.sessionId = (mode === "omni" ? "omni_" : "") + newSessionId();
    this.systemPrompt = systemPrompt;
    this.config = { sample_rate: INPUT_RATE, ...config };
    const path = `/ws/duplex/${encodeURIComponent(this.sessionId)}`;
    this.socket = new JsonSocket(wsUrl(path), { protocols: keyProtocols(apiKey) });
    this.socket.addEventListener("message", (e) => this.receive(e.detail));
    this.socket.addEventListener("close", (e) => this.onClose(e.detail));
    this.state = "new";
    this.expectClose = false;
    this.pending = [];
    this.sent = { chunks: 0, frames: 0, bytes: 0 };
    this.prepared = null;
  }

  emit(type, detail = {}) {
    this.dispatchEvent(new CustomEvent(type, { detail }));
  }

  setState(state) {
    if (this.state === state) return;
    this.state = state;
    this.emit("state", { state });
  }

  /** Resolves once the socket is open; rejects if it cannot open (also reported as "connection"). */
  connect() {
    this.setState("connecting");
    return this.socket.open();
  }

  get live() {
    return this.state === "active";
  }

  /**
   * One unit's input: `audio` (Float32Array, or Int16Array sent as pcm16, at INPUT_RATE) and, in
   * omni mode, base64 JPEG/PNG frames. Held back (the last few) until the session is prepared;
   * dropped while paused or ending. Returns whether it was sent now.
   */
  sendChunk(audio, frames = []) {
    if (this.state === "connecting" || this.state === "queued" || this.state === "preparing") {
      this.pending.push([audio, frames]);
      if (this.pending.length > MAX_PENDING_CHUNKS) this.pending.shift();
      return false;
    }
    if (!this.live) return false;
    const msg =
      audio instanceof Int16Array
        ? { type: "audio_chunk", audio_base64: pcm16ToBase64(audio), format: "pcm16" }
        : {
            type: "audio_chunk",
            audio_base64: bytesToBase64(new Uint8Array(audio.buffer, audio.byteOffset, audio.byteLength)),
          };
    if (frames.length) msg.frame_base64_list = frames;
    if (!this.socket.send(msg)) return false;
    this.sent.chunks += 1;
    this.sent.frames += frames.length;
    this.sent.bytes += msg.audio_base64.length + frames.reduce((n, f) => n + f.length, 0);
    return true;
  }

  /** Stop sending audio; the server releases the session if no resume comes within `timeout` s. */
  pause(timeout = null) {
    if (!this.live) return;
    this.setState("pausing");
    const msg = { type: "pause" };
    if (timeout) msg.timeout = timeout;
    this.socket.send(msg);
  }

  resume() {
    if (this.state !== "paused") return;
    this.socket.send({ type: "resume" });
  }

  /** Ends the session: `stop` (answered by `stopped`, then the server closes), or a plain close. */
  stop() {
    this.pending = [];
    if (this.state === "closed") return;
    if (this.state === "new") {
      this.setState("closed"); // never connected: nothing to tell anyone
      return;
    }
    this.expectClose = true;
    if (["active", "pausing", "paused", "preparing"].includes(this.state) && this.socket.send({ type: "stop" })) {
      this.setState("stopping");
      this.stopTimer = setTimeout(() => this.close(), STOP_GRACE_MS);
    } else {
      this.close(); // still waiting in the queue (or not connected): leaving is enough
    }
  }

  close() {
    this.expectClose = true;
    clearTimeout(this.stopTimer);
    this.socket.close(1000, "session ended by the page");
  }

  /** Playback figures for the server's records (`client_diagnostic`, never answered). */
  diagnostic(metrics) {
    if (this.live) this.socket.send({ type: "client_diagnostic", metrics });
  }

  onClose(detail) {
    clearTimeout(this.stopTimer);
    this.pending = [];
    const expected = this.expectClose || detail.byUser;
    this.setState("closed");
    this.emit("connection", { code: detail.code, reason: detail.reason, wasOpen: detail.wasOpen, expected });
  }

  receive(msg) {
    const handler = this.handlers[msg.type];
    if (handler) handler.call(this, msg);
  }

  handlers = {
    queued(msg) {
      this.setState("queued");
      this.emit("queue", msg);
    },
    queue_update(msg) {
      this.emit("queue", msg);
    },
    queue_done() {
      if (this.state === "stopping" || this.state === "closed") return;
      this.setState("preparing");
      this.socket.send({ type: "prepare", system_prompt: this.systemPrompt, config: this.config, deferred_finalize: true });
    },
    prepared(msg) {
      if (this.state !== "preparing") return;
      this.prepared = msg;
      this.setState("active");
      this.emit("prepared", msg);
      const pending = this.pending;
      this.pending = [];
      for (const [audio, frames] of pending) this.sendChunk(audio, frames);
    },
    result(msg) {
      const pcm = msg.audio_data ? base64ToPcm16(msg.audio_data) : null;
      this.emit("result", { ...msg, pcm });
    },
    paused(msg) {
      if (this.state === "stopping") return;
      this.setState("paused");
      this.emit("paused", msg);
    },
    resumed() {
      if (this.state === "stopping") return;
      this.setState("active");
      this.emit("resumed");
    },
    stopped(msg) {
      this.expectClose = true;
      this.emit("stopped", msg);
    },
    timeout(msg) {
      this.expectClose = true;
      this.emit("timeout", msg);
    },
    error(msg) {
      this.emit("server-error", { code: msg.code, message: msg.message });
    },
  };
}
