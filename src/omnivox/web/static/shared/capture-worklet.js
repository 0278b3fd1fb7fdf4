// AudioWorklet processor: gathers microphone input into blocks of `blockSize` mono samples and posts
// each block (with its peak level) to the page. Resampling and encoding happen on the page side.
class CaptureProcessor extends AudioWorkletProcessor {
  constructor(options) {
    super();
    this.blockSize = options.processorOptions?.blockSize || 960;
    this.block = new Float32Array(this.blockSize);
    this.filled = 0;
  }

  process(inputs) {
    const channels = inputs[0];
    if (!channels || channels.length === 0) return true; // no input yet: keep the node alive
    const frames = channels[0].length;
    for (let i = 0; i < frames; i++) {
      let sum = 0;
      for (let c = 0; c < channels.length; c++) sum += channels[c][i];
      this.block[this.filled++] = sum / channels.length;
      if (this.filled === this.blockSize) this.flush();
    }
    return true;
  }

  flush() {
    let peak = 0;
    for (let i = 0; i < this.block.length; i++) peak = Math.max(peak, Math.abs(this.block[i]));
    this.port.postMessage({ samples: this.block, peak }, [this.block.buffer]);
    this.block = new Float32Array(this.blockSize);
    this.filled = 0;
  }
}

registerProcessor("omnivox-capture", CaptureProcessor);
