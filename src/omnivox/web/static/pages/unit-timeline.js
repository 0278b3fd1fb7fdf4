// The timeline of a duplex session's units: one cell per result (listen or speak), its wall-clock
// time, lagging units (chunks merged because the server fell behind) and turn ends marked.
import { el, ms } from "../shared/format.js";

export class UnitTimeline {
  constructor(list, { keep = 300 } = {}) {
    this.list = list;
    this.keep = keep; // cells kept on the page; older ones scroll away
  }

  clear() {
    this.list.replaceChildren();
  }

  add(result) {
    const speak = !result.is_listen;
    const kind = speak ? "speak" : "listen";
    const notes = [];
    if (result.lagging) notes.push(`lagging: ${result.merged_chunks || 2} chunks merged`);
    if (result.end_of_turn) notes.push("end of turn");
    const label = `Unit ${result.unit_index}: ${speak ? "spoke" : "listened"}, ${ms(result.wall_clock_ms)}${notes.length ? `, ${notes.join(", ")}` : ""}`;
    const classes = ["unit", kind, result.lagging ? "lagging" : "", result.end_of_turn ? "eot" : ""].filter(Boolean).join(" ");
    const cell = el(
      "li",
      { class: classes, "data-unit": result.unit_index, title: label },
      el("span", { class: "visually-hidden", text: label }),
      el("span", { class: "unit-kind", "aria-hidden": "true", text: speak ? "speak" : "listen" }),
      el("span", { class: "unit-ms", "aria-hidden": "true", text: ms(result.wall_clock_ms) }),
      result.lagging ? el("span", { class: "unit-lag", "aria-hidden": "true", text: "lag" }) : null,
    );
    this.list.append(cell);
    while (this.list.children.length > this.keep) this.list.firstElementChild.remove();
    this.list.scrollTop = this.list.scrollHeight;
    return cell;
  }
}
