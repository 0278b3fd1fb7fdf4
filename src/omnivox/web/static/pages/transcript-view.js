// The live transcript: one line per conversation item, filled in as deltas arrive.
import { el } from "../shared/format.js";

export class TranscriptView {
  constructor(box) {
    this.box = box;
    this.lines = new Map(); // item id -> {line, text}
  }

  line(itemId, role) {
    let entry = this.lines.get(itemId);
    if (!entry) {
      const text = el("span", { class: "said" });
      const line = el("p", { class: `line ${role}`, "data-item": itemId }, el("span", { class: "who", text: role === "user" ? "You:" : "Assistant:" }), text);
      this.box.querySelector(".empty")?.remove();
      this.box.append(line);
      entry = { line, text, final: false };
      this.lines.set(itemId, entry);
    }
    this.box.scrollTop = this.box.scrollHeight;
    return entry;
  }

  /** The user started speaking: a placeholder keeps the line in conversation order. */
  userStarted(itemId) {
    const entry = this.line(itemId, "user");
    if (!entry.text.textContent) entry.text.textContent = "…";
  }

  delta(itemId, role, delta) {
    const entry = this.line(itemId, role);
    if (entry.final) return;
    if (entry.text.textContent === "…") entry.text.textContent = "";
    entry.text.textContent += delta;
  }

  final(itemId, role, transcript) {
    const entry = this.line(itemId, role);
    entry.final = true;
    entry.text.textContent = transcript || (role === "user" ? "(nothing recognised)" : entry.text.textContent);
  }

  interrupted(itemIds) {
    for (const id of itemIds) {
      const entry = this.lines.get(id);
      if (entry && !entry.line.querySelector(".interrupted")) {
        entry.line.append(el("span", { class: "interrupted", text: " (interrupted)" }));
      }
    }
  }

  note(text) {
    this.box.append(el("p", { class: "line muted", text }));
  }
}
