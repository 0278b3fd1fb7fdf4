// Camera capture: getUserMedia -> a <video> preview, and still frames from it as JPEG (base64).

/** Why the camera could not start: "permission", "no-device", "insecure" or "other". */
export class CameraError extends Error {
  constructor(kind, message) {
    super(message);
    this.kind = kind;
  }
}

function explain(err) {
  const name = err && err.name;
  if (name === "NotAllowedError" || name === "SecurityError") {
    return new CameraError("permission", "Camera permission was denied. Allow it in the browser's site settings, then try again.");
  }
  if (name === "NotFoundError" || name === "OverconstrainedError") {
    return new CameraError("no-device", "No camera was found. Connect one and try again.");
  }
  if (name === "NotReadableError") {
    return new CameraError("other", "The camera is busy in another application.");
  }
  return new CameraError("other", `The camera could not start: ${err?.message || err}`);
}

export class Camera {
  /**
   * @param {HTMLVideoElement} video  where the preview plays (muted, inline)
   * @param {object} [opts]
   * @param {number} [opts.maxSide]   frames are scaled down to at most this many pixels a side
   * @param {number} [opts.quality]   JPEG quality, 0..1
   */
  constructor(video, { maxSide = 640, quality = 0.75 } = {}) {
    this.video = video;
    this.maxSide = maxSide;
    this.quality = quality;
    this.canvas = document.createElement("canvas");
    this.stream = null;
  }

  async start() {
    if (!navigator.mediaDevices?.getUserMedia) {
      throw new CameraError("insecure", "This browser gives camera access only to pages served over HTTPS or from localhost.");
    }
    try {
      this.stream = await navigator.mediaDevices.getUserMedia({
        video: { width: { ideal: 640 }, height: { ideal: 480 }, facingMode: "user" },
      });
    } catch (err) {
      throw explain(err);
    }
    this.video.muted = true;
    this.video.playsInline = true;
    this.video.srcObject = this.stream;
    await this.video.play().catch(() => {}); // a preview that cannot autoplay still gives frames once it can
  }

  get ready() {
    return this.stream !== null && this.video.readyState >= HTMLMediaElement.HAVE_CURRENT_DATA && this.video.videoWidth > 0;
  }

  /** The current picture as base64 JPEG (no data: prefix), or null before the first frame. */
  frame() {
    if (!this.ready) return null;
    const { videoWidth: w, videoHeight: h } = this.video;
    const scale = Math.min(1, this.maxSide / Math.max(w, h));
    this.canvas.width = Math.max(1, Math.round(w * scale));
    this.canvas.height = Math.max(1, Math.round(h * scale));
    this.canvas.getContext("2d").drawImage(this.video, 0, 0, this.canvas.width, this.canvas.height);
    return this.canvas.toDataURL("image/jpeg", this.quality).split(",", 2)[1];
  }

  stop() {
    this.stream?.getTracks().forEach((track) => track.stop());
    this.stream = null;
    this.video.srcObject = null;
  }
}
