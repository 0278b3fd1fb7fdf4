// Audio player for streamed replies: PCM16 chunks in, a jitter buffer (player-worklet.js) out.
// `stats` counts what arrived and what was played, so a person or a test can tell real playback
// from silence; `clear()` drops queued audio at once when the user interrupts.
import { pcm16ToFloat, Resampler } from "./pcm.js";

export class AudioPlayer {
  constructor({ rate = 24000, prebufferMs = 100, onStats = () => {} } = {}) {
    this.rate = rate;
    this.prebufferMs = prebufferMs;
    this.onStats = onStats;
    this.resamplers = new Map();
    this.stats = { received: 0, played: 0, peak: 0, underruns: 0, clears: 0, dropped: 0, buffered: 0, playing: false };
  }

  /** Call from a user gesture: browsers start audio output only after one. Safe to call twice. */
  async start() {
    if (this.starting) return this.starting;
    this.starting = (async () => {
      this.context = new AudioContext({ sampleRate: this.rate });
      await this.context.audioWorklet.addModule(new URL("./player-worklet.js", import.meta.url));
      this.node = new AudioWorkletNode(this.context, "omnivox-player", {
        outputChannelCount: [1],
        processorOptions: { prebuffer: Math.round((this.context.sampleRate * this.prebufferMs) / 1000) },
      });
      this.node.port.onmessage = (event) => {
        this.stats = event.data;
        this.onStats(this.stats);
      };
      this.node.connect(this.context.destination);
      await this.context.resume();
    })();
    return this.starting;
  }

  get bufferedMs() {
    return this.context ? (this.stats.buffered / this.context.sampleRate) * 1000 : 0;
  }

  /** Queue PCM16 samples recorded at `rate` Hz. */
  push(pcm, rate = this.rate) {
    if (!this.node || pcm.length === 0) return;
    let samples = pcm16ToFloat(pcm);
    const target = this.context.sampleRate;
    if (rate !== target) {
      if (!this.resamplers.has(rate)) this.resamplers.set(rate, new Resampler(rate, target));
      samples = this.resamplers.get(rate).process(samples);
    }
    this.stats.buffered += samples.length; // until the worklet reports back
    this.node.port.postMessage({ type: "push", samples }, [samples.buffer]);
  }

  /** The current reply is complete: play what is queued without waiting for the prebuffer. */
  end() {
    this.node?.port.postMessage({ type: "end" });
  }

  /** Drop everything queued, at once (the user barged in, or pressed stop). */
  clear() {
    this.resamplers.clear();
    this.stats.buffered = 0;
    this.node?.port.postMessage({ type: "clear" });
  }

  async close() {
    const context = this.context;
    this.node?.disconnect();
    this.node = this.context = this.starting = null;
    if (context && context.state !== "closed") await context.close();
  }
}
