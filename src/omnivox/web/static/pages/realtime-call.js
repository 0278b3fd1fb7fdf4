// A realtime session over WebRTC (POST /v1/realtime/calls), as OpenAI serves it: the microphone goes
// out as an Opus track, the reply comes back as one (played by an <audio> element, so the browser's
// echo canceller knows what the speakers play), and the JSON events travel on the "oai-events" data
// channel.
//
// CallSocket looks like JsonSocket to RealtimeSession (open, send, close, isOpen; events "open",
// "message", "close"), so the session's event handling is the same over either transport. Extra:
//   "remote-stream" {stream}   the reply's audio track, to play
//   audioClockStart            when the call's audio began to reach the server (the origin of the
//                              server's audio_start_ms / audio_end_ms), for latency figures
import { sessionKey } from "../shared/client-secret.js";

const GATHER_LIMIT_MS = 2000; // the gateway takes no trickled candidates: wait for them, at most this

export class CallSocket extends EventTarget {
  constructor({ stream, key = "" }) {
    super();
    this.stream = stream;
    this.key = key;
    this.pc = null;
    this.channel = null;
    this.audioClockStart = null;
    this.opened = false;
    this.byUser = false;
    this.closed = false;
  }

  get isOpen() {
    return this.channel !== null && this.channel.readyState === "open";
  }

  emit(type, detail = {}) {
    this.dispatchEvent(new CustomEvent(type, { detail }));
  }

  async open() {
    const pc = new RTCPeerConnection();
    this.pc = pc;
    for (const track of this.stream.getAudioTracks()) pc.addTrack(track, this.stream);
    pc.ontrack = (e) => this.emit("remote-stream", { stream: e.streams[0] || new MediaStream([e.track]) });
    pc.onconnectionstatechange = () => {
      if (pc.connectionState === "connected" && this.audioClockStart === null) this.audioClockStart = performance.now();
      if (["failed", "closed"].includes(pc.connectionState)) this.ended(1011, `connection ${pc.connectionState}`);
    };
    const channel = pc.createDataChannel("oai-events");
    this.channel = channel;
    const ready = new Promise((resolve, reject) => {
      channel.onopen = () => {
        this.opened = true;
        resolve();
        this.dispatchEvent(new Event("open"));
      };
      channel.onclose = () => {
        if (!this.opened) reject(new Error("the data channel closed before it opened"));
        this.ended(this.byUser ? 1000 : 1011, "data channel closed");
      };
    });
    channel.onmessage = (event) => {
      try {
        this.emit("message", JSON.parse(event.data));
      } catch {
        /* every event is JSON */
      }
    };
    await pc.setLocalDescription(await pc.createOffer());
    await this.gathered();
    const headers = { "Content-Type": "application/sdp" };
    let key = "";
    try {
      key = await sessionKey(this.key);
    } catch (err) {
      this.emit("message", { type: "error", error: { code: "unauthorized", message: err.message } });
      this.ended(1008, err.message);
      throw err;
    }
    if (key) headers.Authorization = `Bearer ${key}`;
    const resp = await fetch("/v1/realtime/calls?omnivox_events=true", { method: "POST", body: pc.localDescription.sdp, headers });
    if (!resp.ok) {
      let error = {};
      try {
        error = (await resp.json()).error || {};
      } catch {
        /* no JSON body */
      }
      if (error.code) this.emit("message", { type: "error", error });
      // as a WebSocket would have closed: 1008 for refusals (key, capacity), 1011 otherwise
      this.ended([401, 403, 429].includes(resp.status) ? 1008 : 1011, error.message || `HTTP ${resp.status}`);
      throw new Error(`the call was refused (HTTP ${resp.status})`);
    }
    await pc.setRemoteDescription({ type: "answer", sdp: await resp.text() });
    await ready;
  }

  gathered() {
    const pc = this.pc;
    if (pc.iceGatheringState === "complete") return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, GATHER_LIMIT_MS);
      pc.addEventListener("icegatheringstatechange", () => {
        if (pc.iceGatheringState === "complete") {
          clearTimeout(timer);
          resolve();
        }
      });
    });
  }

  send(message) {
    if (this.isOpen) this.channel.send(JSON.stringify(message));
  }

  close(code = 1000, reason = "") {
    this.byUser = true;
    this.ended(code, reason);
  }

  ended(code, reason) {
    if (this.closed) return;
    this.closed = true;
    try {
      this.channel?.close();
      this.pc?.close();
    } catch {
      /* already closed */
    }
    this.emit("close", { code, reason, byUser: this.byUser, wasOpen: this.opened, retryInMs: null });
  }
}
