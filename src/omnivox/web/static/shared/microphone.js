// Microphone capture: getUserMedia -> AudioWorklet -> resampled chunks (PCM16, or float32) at the rate
// and chunk length a protocol wants.
import { floatToPcm16, Resampler } from "./pcm.js";

/** Why the microphone could not start: "permission", "no-device", "insecure" or "other". */
export class MicrophoneError extends Error {
  constructor(kind, message) {
    super(message);
    this.kind = kind;
  }
}

function explain(err) {
  const name = err && err.name;
  if (name === "NotAllowedError" || name === "SecurityError") {
    return new MicrophoneError("permission", "Microphone permission was denied. Allow it in the browser's site settings, then try again.");
  }
  if (name === "NotFoundError" || name === "OverconstrainedError") {
    return new MicrophoneError("no-device", "No microphone was found. Connect one and try again.");
  }
  if (name === "NotReadableError") {
    return new MicrophoneError("other", "The microphone is busy in another application.");
  }
  return new MicrophoneError("other", `The microphone could not start: ${err?.message || err}`);
}

export class Microphone {
  /**
   * @param {object} opts
   * @param {number} opts.rate       sample rate of the chunks handed to onChunk
   * @param {number} opts.chunkMs    length of each chunk
   * @param {"pcm16" | "float32"} [opts.format]  what onChunk gets: Int16Array or Float32Array samples
   * @param {(pcm: Int16Array | Float32Array) => void} opts.onChunk
   * @param {(peak: number) => void} [opts.onLevel]  peak of the latest block, 0..1
   */
  constructor({ rate, chunkMs = 40, format = "pcm16", onChunk, onLevel = () => {} }) {
    this.rate = rate;
    this.format = format;
    this.chunkSamples = Math.round((rate * chunkMs) / 1000);
    this.onChunk = onChunk;
    this.onLevel = onLevel;
    this.pending = [];
    this.pendingLength = 0;
    this.samplesSent = 0;
  }

  /** Must run from a user gesture (a click or key press) so the browser lets audio start. */
  start() {
    this.starting = this.open();
    return this.starting;
  }

  async open() {
    if (!navigator.mediaDevices?.getUserMedia) {
      throw new MicrophoneError("insecure", "This browser gives microphone access only to pages served over HTTPS or from localhost.");
    }
    this.context = new AudioContext();
    try {
      this.stream = await navigator.mediaDevices.getUserMedia({
        audio: { channelCount: 1, echoCancellation: true, noiseSuppression: true, autoGainControl: true },
      });
    } catch (err) {
      await this.context.close();
      this.context = null;
      throw explain(err);
    }
    await this.context.audioWorklet.addModule(new URL("./capture-worklet.js", import.meta.url));
    const inputRate = this.context.sampleRate;
    this.resampler = new Resampler(inputRate, this.rate);
    this.source = this.context.createMediaStreamSource(this.stream);
    this.node = new AudioWorkletNode(this.context, "omnivox-capture", {
      processorOptions: { blockSize: Math.round(inputRate / 50) }, // 20 ms blocks
      numberOfOutputs: 1,
    });
    this.node.port.onmessage = (event) => this.onBlock(event.data);
    this.source.connect(this.node);
    this.node.connect(this.context.destination); // the processor writes nothing: silence, but it keeps running
    await this.context.resume();
  }

  onBlock({ samples, peak }) {
    this.onLevel(peak);
    const block = this.resampler.process(samples);
    this.pending.push(block);
    this.pendingLength += block.length;
    while (this.pendingLength >= this.chunkSamples) this.emit(this.chunkSamples);
  }

  emit(length) {
    const chunk = new Float32Array(length);
    let filled = 0;
    while (filled < length) {
      const head = this.pending[0];
      const take = Math.min(head.length, length - filled);
      chunk.set(head.subarray(0, take), filled);
      filled += take;
      if (take === head.length) this.pending.shift();
      else this.pending[0] = head.subarray(take);
    }
    this.pendingLength -= length;
    this.samplesSent += length;
    this.onChunk(this.format === "float32" ? chunk : floatToPcm16(chunk));
  }

  /** Stops capture; what is still pending goes out as a last, shorter chunk. */
  async stop() {
    await this.starting?.catch(() => {}); // a release during start-up stops once it has started
    if (this.pendingLength > 0) this.emit(this.pendingLength);
    this.stream?.getTracks().forEach((track) => track.stop());
    this.source?.disconnect();
    this.node?.disconnect();
    if (this.node) this.node.port.onmessage = null;
    if (this.context && this.context.state !== "closed") await this.context.close();
    this.stream = this.source = this.node = this.context = null;
    this.onLevel(0);
  }
}
