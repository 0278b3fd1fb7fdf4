// The conversation as the chat page shows it: one bubble per message, figures under each reply.
import { el, ms, seconds, shortId } from "../shared/format.js";

export class ChatView {
  constructor(log) {
    this.log = log;
  }

  scroll() {
    this.log.scrollTop = this.log.scrollHeight;
  }

  /** A user bubble; `audioSeconds` marks a spoken message, `imageUrl` shows the attached image. */
  addUser(text, { imageUrl = null, audioSeconds = null } = {}) {
    const bubble = el("div", { class: "msg user" });
    if (imageUrl) bubble.append(el("img", { src: imageUrl, alt: "Attached image" }));
    if (audioSeconds !== null) {
      bubble.append(el("span", { class: "voice-note", text: `Voice message (${seconds(audioSeconds)})` }));
    }
    if (text) bubble.append(el("span", { class: "text", text: audioSeconds !== null ? `\n${text}` : text }));
    this.log.append(bubble);
    this.scroll();
    return {
      bubble,
      heard: (transcript) => bubble.append(el("span", { class: "transcript figures", text: `Heard: “${transcript}”` })),
      failed: (reason) => {
        bubble.classList.add("failed");
        bubble.append(el("span", { class: "figures", text: `Not answered: ${reason}` }));
      },
    };
  }

  addAssistant() {
    const text = el("span", { class: "text" });
    const figures = el("span", { class: "figures", text: "…" });
    const bubble = el("div", { class: "msg assistant", "aria-busy": "true" }, text, figures);
    this.log.append(bubble);
    this.scroll();
    return {
      bubble,
      append: (delta) => {
        text.textContent += delta;
        this.scroll();
      },
      status: (note) => (figures.textContent = note),
      finish: ({ text: full, stopped, error, figures: f }) => {
        bubble.removeAttribute("aria-busy");
        if (full && !text.textContent) text.textContent = full;
        bubble.dataset.stopped = String(Boolean(stopped));
        if (f.ttftPageMs !== null) bubble.dataset.ttftPageMs = String(Math.round(f.ttftPageMs));
        if (f.cachedTokens !== undefined) bubble.dataset.cachedTokens = String(f.cachedTokens);
        figures.textContent = describe({ stopped, error, ...f });
        this.scroll();
      },
      remove: () => bubble.remove(),
    };
  }

  clear() {
    this.log.replaceChildren();
  }
}

function describe(f) {
  const parts = [];
  if (f.stopped) parts.push(f.error ? `stopped by an error (${f.error})` : "stopped");
  if (f.cachedTokens !== undefined) {
    parts.push(`${f.cacheHit ? "cache hit" : "cache miss"}: ${f.cachedTokens} cached, ${f.inputTokens} new tokens`);
  }
  if (f.ttftPageMs !== null) parts.push(`first token ${ms(f.ttftPageMs)} in the page`);
  if (f.ttftServerMs !== null) parts.push(`${ms(f.ttftServerMs)} on the worker`);
  if (f.waitedS) parts.push(`waited ${seconds(f.waitedS)} in the queue`);
  parts.push(`turn ${seconds(f.elapsedMs / 1000)}`);
  if (f.workerId) parts.push(`worker ${shortId(f.workerId)}`);
  return parts.join(" · ");
}
