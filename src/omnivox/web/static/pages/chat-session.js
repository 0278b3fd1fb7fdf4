// Turn-based chat over WS /ws/streaming/{session_id}: the page owns the conversation.
//
// Each turn sends the whole conversation in `prefill` (the gateway routes it by the hash of the
// history and forwards only the new message on a cache hit), then `generate` once the worker has
// prefilled. The reply joins the conversation exactly as `done.text` says, so the next turn's
// history hashes the same as what the worker caches.
//
// Events (CustomEvent, detail in brackets): "queue" {position, queue_length, estimated_wait_s,
// ticket_id}, "started" {worker_id, waited_s}, "prefill" (the prefill_done message), "chunk"
// {text, audio: Int16Array | null, rate}, "done" {text, stopped, error, figures}, "failed" {code,
// message}, "notice" {code, message} (an error that did not end the turn), "connection" {open, code}.
import { keyProtocols, request, wsUrl } from "../shared/http.js";
import { base64ToPcm16 } from "../shared/pcm.js";
import { JsonSocket } from "../shared/ws-client.js";

// errors after which the gateway has ended the turn without a `done`
const TURN_ENDERS = new Set([
  "worker_lost",
  "ticket_cancelled",
  "queue_full",
  "session_limit_reached",
  "no_capable_worker",
]);

export function newSessionId() {
  return globalThis.crypto?.randomUUID?.() ?? `web-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 10)}`;
}

export class StreamingChat extends EventTarget {
  constructor(sessionId = newSessionId()) {
    super();
    this.sessionId = sessionId;
    this.messages = []; // the conversation as the workers cache it
    this.turn = null;
    this.socket = new JsonSocket(wsUrl(`/ws/streaming/${encodeURIComponent(sessionId)}`), {
      protocols: keyProtocols(),
    });
    this.socket.addEventListener("message", (e) => this.receive(e.detail));
    this.socket.addEventListener("open", () => this.emit("connection", { open: true }));
    this.socket.addEventListener("close", (e) => this.onClose(e.detail));
  }

  emit(type, detail = {}) {
    this.dispatchEvent(new CustomEvent(type, { detail }));
  }

  get busy() {
    return this.turn !== null;
  }

  /** Starts a turn with `message` ({role: "user", content}); resolves once it is sent. */
  async send(message, { maxNewTokens = 256, generateAudio = false, voice = "" } = {}) {
    if (this.turn) throw new Error("a turn is already running");
    const params = { max_new_tokens: maxNewTokens, generate_audio: generateAudio };
    if (generateAudio && voice) params.voice = voice;
    const turn = { message, params, phase: "connecting" };
    turn.sentAt = performance.now();
    this.turn = turn;
    try {
      await this.socket.open();
    } catch {
      this.fail({ code: "connection_failed", message: "Could not reach the server. Check that it is running, then send again." });
      return;
    }
    turn.phase = "prefill";
    this.socket.send({ type: "prefill", messages: [...this.messages, message] });
  }

  /** Stops the running turn: leaves the queue if still waiting, else stops generation at once. */
  async stop() {
    const turn = this.turn;
    if (!turn) return;
    turn.stopRequested = true;
    if (turn.phase === "queued" && turn.ticketId) {
      await request(`/api/queue/${encodeURIComponent(turn.ticketId)}`, { method: "DELETE" });
    } else if (turn.phase === "generating") {
      this.socket.send({ type: "stop" });
    } // during prefill: stopped as soon as prefill_done arrives
  }

  receive(msg) {
    const turn = this.turn;
    switch (msg.type) {
      case "queued":
      case "queue_update":
        if (!turn) return;
        turn.phase = "queued";
        turn.ticketId = msg.ticket_id;
        this.emit("queue", msg);
        if (turn.stopRequested && msg.type === "queued") this.stop(); // stop was pressed before the ticket
        return;
      case "queue_done":
        if (!turn) return;
        turn.phase = "prefill";
        turn.waitedS = msg.waited_s;
        this.emit("started", msg);
        return;
      case "prefill_done":
        return this.onPrefillDone(msg);
      case "chunk":
        return this.onChunk(msg);
      case "done":
        return this.onDone(msg);
      case "error":
        return this.onError(msg);
      default:
        return; // a message type this page does not know yet
    }
  }

  onPrefillDone(msg) {
    const turn = this.turn;
    if (!turn) return;
    turn.prefill = msg;
    turn.phase = "generating";
    this.emit("prefill", msg);
    turn.generateAt = performance.now();
    this.socket.send({ type: "generate", ...turn.params });
    if (turn.stopRequested) this.socket.send({ type: "stop" });
  }

  onChunk(msg) {
    const turn = this.turn;
    if (!turn) return;
    const audio = msg.audio_data ? base64ToPcm16(msg.audio_data) : null;
    if (turn.firstChunkAt === undefined && (msg.text_delta || audio)) turn.firstChunkAt = performance.now();
    this.emit("chunk", { text: msg.text_delta || "", audio, rate: msg.audio_sample_rate || 24000, final: msg.is_final });
  }

  onDone(msg) {
    const turn = this.turn;
    if (!turn) return;
    this.turn = null;
    this.messages.push(turn.message, { role: "assistant", content: msg.text || "" });
    const prefill = turn.prefill || {};
    const figures = {
      cachedTokens: prefill.cached_tokens,
      inputTokens: prefill.input_tokens,
      cacheHit: prefill.cache_hit,
      workerId: prefill.worker_id,
      waitedS: turn.waitedS,
      ttftPageMs: turn.firstChunkAt !== undefined ? turn.firstChunkAt - turn.generateAt : null,
      ttftServerMs: msg.ttft_ms ?? null,
      elapsedMs: performance.now() - turn.sentAt,
      generatedTokens: msg.token_stats?.generated_tokens,
    };
    this.emit("done", { text: msg.text || "", stopped: msg.stopped, error: msg.error || null, figures });
  }

  onError(msg) {
    const turn = this.turn;
    const generating = turn && turn.phase === "generating";
    if (!turn || (generating && !TURN_ENDERS.has(msg.code))) {
      this.emit("notice", msg); // the turn goes on: `done` follows an engine error
      return;
    }
    this.fail(msg);
    // an error before the worker answered may leave the gateway mid-turn: start the next turn afresh
    if (!TURN_ENDERS.has(msg.code)) this.socket.close();
  }

  fail(error) {
    this.turn = null;
    this.emit("failed", error);
  }

  onClose({ code, byUser }) {
    this.emit("connection", { open: false, code });
    if (this.turn && !byUser) {
      this.fail({ code: code === 1008 ? "policy" : "connection_lost", message: "The connection to the server was lost. Send again to retry." });
    }
  }

  close() {
    this.socket.send({ type: "close" });
    this.socket.close();
  }
}
