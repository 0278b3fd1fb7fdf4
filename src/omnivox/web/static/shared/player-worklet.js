// AudioWorklet processor: a jitter buffer in front of the speakers.
// Playback starts once `prebuffer` samples are queued (or the stream is marked complete), pauses
// to refill on an underrun, and "clear" drops everything queued at once (barge-in, stop).
class PlayerProcessor extends AudioWorkletProcessor {
  constructor(options) {
    super();
    this.prebuffer = options.processorOptions?.prebuffer || 2400;
    this.queue = [];
    this.offset = 0; // read position in queue[0]
    this.buffered = 0;
    this.playing = false;
    this.complete = false; // no more audio is coming for now: play out the tail without waiting
    this.stats = { received: 0, played: 0, peak: 0, underruns: 0, clears: 0, dropped: 0 };
    this.sinceReport = 0;
    this.port.onmessage = (event) => this.command(event.data);
  }

  command(msg) {
    if (msg.type === "push") {
      this.queue.push(msg.samples);
      this.buffered += msg.samples.length;
      this.stats.received += msg.samples.length;
      this.complete = false;
    } else if (msg.type === "end") {
      this.complete = true;
    } else if (msg.type === "clear") {
      this.stats.dropped += this.buffered;
      if (this.buffered > 0) this.stats.clears += 1;
      this.queue = [];
      this.offset = 0;
      this.buffered = 0;
      this.playing = false;
      this.report();
    }
  }

  process(_inputs, outputs) {
    const out = outputs[0][0];
    if (!this.playing && this.buffered > 0 && (this.buffered >= this.prebuffer || this.complete)) {
      this.playing = true;
    }
    let written = 0;
    if (this.playing) written = this.fill(out);
    if (this.playing && written < out.length) {
      this.playing = false;
      if (!this.complete) this.stats.underruns += 1; // ran dry mid-stream: refill before resuming
    }
    for (let c = 1; c < outputs[0].length; c++) outputs[0][c].set(out);
    if (++this.sinceReport >= 8 || (written && this.buffered === 0)) this.report();
    return true;
  }

  fill(out) {
    let written = 0;
    let peak = this.stats.peak;
    while (written < out.length && this.queue.length) {
      const head = this.queue[0];
      const take = Math.min(head.length - this.offset, out.length - written);
      for (let i = 0; i < take; i++) {
        const s = head[this.offset + i];
        out[written + i] = s;
        if (s > peak) peak = s;
        else if (-s > peak) peak = -s;
      }
      written += take;
      this.offset += take;
      if (this.offset === head.length) {
        this.queue.shift();
        this.offset = 0;
      }
    }
    this.buffered -= written;
    this.stats.played += written;
    this.stats.peak = peak;
    return written;
  }

  report() {
    this.sinceReport = 0;
    this.port.postMessage({ ...this.stats, buffered: this.buffered, playing: this.playing });
  }
}

registerProcessor("omnivox-player", PlayerProcessor);
