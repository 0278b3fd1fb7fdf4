// A small JSON WebSocket client: one socket at a time, open() on demand, optional automatic retries.
//
// Events: "open"; "message" (detail: the parsed object); "close" (detail: {code, reason, byUser,
// wasOpen, retryInMs}); "retry" (detail: {attempt, delayMs}). Only a connection that was open and got lost
// is retried; never after close code 1000, 1008 (policy: capacity, auth) or a close by the page.
export class JsonSocket extends EventTarget {
  constructor(url, { protocols = [], retries = 0, backoffMs = 1000 } = {}) {
    super();
    this.url = url;
    this.protocols = protocols;
    this.retries = retries;
    this.backoffMs = backoffMs;
    this.attempt = 0;
    this.ws = null;
    this.opening = null;
    this.retryTimer = null;
  }

  get isOpen() {
    return this.ws !== null && this.ws.readyState === WebSocket.OPEN;
  }

  /** Resolves once the socket is open (at once if it already is); rejects if it cannot open. */
  open() {
    if (this.isOpen) return Promise.resolve();
    if (this.opening) return this.opening;
    clearTimeout(this.retryTimer);
    this.byUser = false;
    this.opening = this.connect().catch((err) => {
      this.opening = null;
      throw err;
    });
    return this.opening;
  }

  /** The subprotocols of a new connection: fixed, or asked afresh each time (a one-use key). */
  async connect() {
    let protocols = this.protocols;
    if (typeof protocols === "function") {
      try {
        protocols = await protocols();
      } catch (err) {
        // no key to connect with (the server refused to mint one): said as a refused connection
        const detail = { code: 1008, reason: String(err.message || err), byUser: false, wasOpen: false, retryInMs: null };
        this.dispatchEvent(new CustomEvent("close", { detail }));
        throw err;
      }
    }
    return this.socketOpen(protocols);
  }

  socketOpen(protocols) {
    return new Promise((resolve, reject) => {
      const ws = new WebSocket(this.url, protocols);
      this.ws = ws;
      let opened = false;
      ws.onopen = () => {
        opened = true;
        this.attempt = 0;
        this.opening = null;
        resolve();
        this.dispatchEvent(new Event("open"));
      };
      ws.onmessage = (event) => {
        let msg;
        try {
          msg = JSON.parse(event.data);
        } catch {
          return; // every server message is JSON; ignore anything else
        }
        this.dispatchEvent(new CustomEvent("message", { detail: msg }));
      };
      ws.onclose = (event) => {
        if (this.ws === ws) this.ws = null;
        this.opening = null;
        if (!opened) reject(new Error(`could not connect to ${this.url} (code ${event.code})`));
        this.closed(event, opened);
      };
      ws.onerror = () => {}; // a close event with the details always follows
    });
  }

  closed(event, opened) {
    // a first connection that fails is the caller's to handle (open() rejects); a lost one is retried
    const lost = opened || this.attempt > 0;
    const retry =
      lost && !this.byUser && event.code !== 1008 && event.code !== 1000 && this.attempt < this.retries;
    const delayMs = retry ? this.backoffMs * 2 ** this.attempt : null;
    this.dispatchEvent(
      new CustomEvent("close", {
        detail: { code: event.code, reason: event.reason, byUser: this.byUser, wasOpen: opened, retryInMs: delayMs },
      }),
    );
    if (!retry) return;
    this.attempt += 1;
    this.dispatchEvent(new CustomEvent("retry", { detail: { attempt: this.attempt, delayMs } }));
    this.retryTimer = setTimeout(() => this.open().catch(() => {}), delayMs);
  }

  /** Sends `msg` as JSON; false when the socket is not open. */
  send(msg) {
    if (!this.isOpen) return false;
    this.ws.send(JSON.stringify(msg));
    return true;
  }

  close(code = 1000, reason = "") {
    this.byUser = true;
    clearTimeout(this.retryTimer);
    if (this.ws && this.ws.readyState <= WebSocket.OPEN) this.ws.close(code, reason);
  }
}
