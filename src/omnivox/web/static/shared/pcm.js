// PCM16 <-> float32 <-> base64, and a streaming resampler (windowed sinc) for microphone and replies.

export function floatToPcm16(samples) {
  // as omnivox.audio.pcm does it: clip, scale by 32767 (so +1 cannot wrap), round
  const out = new Int16Array(samples.length);
  for (let i = 0; i < samples.length; i++) out[i] = Math.round(Math.max(-1, Math.min(1, samples[i])) * 0x7fff);
  return out;
}

export function pcm16ToFloat(pcm) {
  const out = new Float32Array(pcm.length);
  for (let i = 0; i < pcm.length; i++) out[i] = pcm[i] / 0x8000;
  return out;
}

export function bytesToBase64(bytes) {
  // btoa takes a binary string; build it in slices so large buffers do not overflow the call stack
  let binary = "";
  for (let i = 0; i < bytes.length; i += 0x8000) {
    binary += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000));
  }
  return btoa(binary);
}

export function base64ToBytes(b64) {
  const binary = atob(b64);
  const out = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) out[i] = binary.charCodeAt(i);
  return out;
}

/** Int16Array -> base64 of little-endian PCM16 (every browser we target is little-endian). */
export function pcm16ToBase64(pcm) {
  return bytesToBase64(new Uint8Array(pcm.buffer, pcm.byteOffset, pcm.byteLength));
}

export function base64ToPcm16(b64) {
  const bytes = base64ToBytes(b64);
  return new Int16Array(bytes.buffer, 0, bytes.length >> 1);
}

const TABLE_STEPS = 128; // kernel samples per input sample; linear interpolation in between

/**
 * Streaming sample-rate converter. Feed blocks of float32 samples to `process`; it returns what
 * can be computed so far and keeps the tail it needs for the next block, so blocks join seamlessly.
 * The low-pass cutoff follows the lower of the two rates, so downsampling does not alias.
 */
export class Resampler {
  constructor(fromRate, toRate, zeroCrossings = 8) {
    this.fromRate = fromRate;
    this.toRate = toRate;
    this.step = fromRate / toRate; // input samples per output sample
    const cutoff = Math.min(1, toRate / fromRate) * 0.92; // a little below Nyquist for the roll-off
    this.half = Math.ceil(zeroCrossings / cutoff); // kernel half-width, in input samples
    this.table = kernelTable(cutoff, this.half);
    this.buf = new Float32Array(this.half); // leading zeros: the first output sits on input 0
    this.t = this.half; // position of the next output sample in `buf`
  }

  process(input) {
    if (this.fromRate === this.toRate) return Float32Array.from(input);
    const buf = new Float32Array(this.buf.length + input.length);
    buf.set(this.buf);
    buf.set(input, this.buf.length);
    const out = [];
    const { half, table, step } = this;
    let t = this.t;
    while (t + half < buf.length) {
      const first = Math.ceil(t - half);
      const last = Math.floor(t + half);
      let acc = 0;
      for (let i = first; i <= last; i++) {
        const x = Math.abs(t - i) * TABLE_STEPS;
        const j = x | 0;
        acc += buf[i] * (table[j] + (x - j) * (table[j + 1] - table[j]));
      }
      out.push(acc);
      t += step;
    }
    const keep = Math.max(0, Math.floor(t) - half);
    this.buf = buf.slice(keep);
    this.t = t - keep;
    return Float32Array.from(out);
  }
}

function kernelTable(cutoff, half) {
  // cutoff * sinc(cutoff * x) under a Hann window of half-width `half` (unit gain at DC)
  const table = new Float32Array(half * TABLE_STEPS + 2);
  for (let j = 0; j < table.length; j++) {
    const x = j / TABLE_STEPS;
    if (x >= half) break;
    const arg = Math.PI * cutoff * x;
    const sinc = x === 0 ? 1 : Math.sin(arg) / arg;
    table[j] = cutoff * sinc * (0.5 + 0.5 * Math.cos((Math.PI * x) / half));
  }
  return table;
}
