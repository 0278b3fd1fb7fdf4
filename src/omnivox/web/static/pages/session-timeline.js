// A recording's turns on a time axis: a lane per speaker, bars where each spoke (cut-off replies
// marked), barge-ins and errors, and a cursor that follows the replay. Clicking seeks.
import { clock, el } from "../shared/format.js";

const ROLE = { user: "You", assistant: "Assistant" };
const TICKS = [0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 1800];
const PX_PER_S = 40; // the axis's scale before it is squeezed to fit
const MAX_PX = 16000;

/** Width of the axis in pixels for a session of `duration` seconds, at least `min` (the view's width). */
export function axisWidth(duration, min) {
  return Math.max(min, Math.min(MAX_PX, Math.ceil(duration * PX_PER_S)));
}

/** The tick step (seconds) that puts ticks about `every` pixels apart. */
export function tickStep(duration, width, every = 90) {
  const perPx = duration / Math.max(1, width);
  return TICKS.find((s) => s / perPx >= every) || TICKS[TICKS.length - 1];
}

export class RecordingTimeline {
  /** `onSeek(seconds)`: the user asked to play from there. */
  constructor(root, scroller, onSeek) {
    this.root = root;
    this.scroller = scroller;
    this.onSeek = onSeek;
    this.duration = 1;
    this.bars = [];
  }

  render(timeline) {
    const turns = timeline.turns || [];
    const events = timeline.events || [];
    this.duration = Math.max(0.5, timeline.duration_s || 0, ...turns.map((t) => t.end));
    const width = axisWidth(this.duration, this.scroller.clientWidth || 600);
    this.root.style.width = `${width}px`;
    const pct = (t) => `${(100 * Math.min(Math.max(t, 0), this.duration)) / this.duration}%`;
    const axis = el("div", { class: "rec-axis", "aria-hidden": "true" });
    const step = tickStep(this.duration, width);
    for (let t = 0; t <= this.duration + 1e-6; t += step) {
      axis.append(el("span", { class: "rec-tick", style: `left: ${pct(t)}`, text: clock(t).replace(/\.0$/, "") }));
    }
    const lanes = ["user", "assistant"].map((role) => {
      const lane = el("div", { class: `rec-lane ${role}`, "data-role": role }, el("span", { class: "rec-lane-name", text: ROLE[role] }));
      lane.addEventListener("click", (event) => {
        if (event.target !== lane) return;
        const box = lane.getBoundingClientRect();
        this.onSeek(((event.clientX - box.left) / box.width) * this.duration);
      });
      return lane;
    });
    this.bars = turns.map((turn) => {
      const span = Math.max(turn.end - turn.start, 0);
      const label = `${ROLE[turn.role]}, ${clock(turn.start)} to ${clock(turn.end)}${turn.interrupted ? ", cut off" : ""}: ${turn.text || "(no words)"}`;
      const bar = el("button", {
        type: "button",
        class: `rec-bar ${turn.role}${turn.interrupted ? " cut" : ""}`,
        style: `left: ${pct(turn.start)}; width: max(6px, ${(100 * span) / this.duration}%)`,
        title: label,
        "aria-label": label,
        "data-turn": turn.index,
        onclick: () => this.onSeek(turn.start),
      });
      lanes[turn.role === "user" ? 0 : 1].append(bar);
      return { turn, bar };
    });
    const marks = [];
    for (const e of events) {
      if (e.type === "barge_in") {
        marks.push(el("span", { class: "rec-mark barge", style: `left: ${pct(e.t)}`, title: `barge-in at ${clock(e.t)}`, "data-t": e.t }));
      } else if (e.type === "error") {
        marks.push(el("span", { class: "rec-mark err", style: `left: ${pct(e.t)}`, title: `error ${e.code} at ${clock(e.t)}`, "data-t": e.t }));
      }
    }
    this.cursor = el("span", { class: "rec-cursor", "aria-hidden": "true" });
    this.root.replaceChildren(axis, ...lanes, ...marks, this.cursor);
    this.move(0);
  }

  /** The replay is at `t`: the cursor moves there, the turns being heard light up. */
  move(t) {
    if (!this.cursor) return;
    const x = (100 * Math.min(Math.max(t, 0), this.duration)) / this.duration;
    this.cursor.style.left = `${x}%`;
    for (const { turn, bar } of this.bars) bar.classList.toggle("now", t >= turn.start && t <= turn.end);
    const px = (x / 100) * this.root.clientWidth;
    const view = this.scroller;
    if (px < view.scrollLeft + 20 || px > view.scrollLeft + view.clientWidth - 20) {
      view.scrollLeft = Math.max(0, px - view.clientWidth / 3);
    }
  }
}
