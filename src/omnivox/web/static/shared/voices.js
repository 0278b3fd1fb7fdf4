// The voice picker: fills a <select> from GET /v1/voices and remembers the choice in this browser.
import { el } from "./format.js";
import { getJson, loadSetting, saveSetting } from "./http.js";

/** Fills `select`; it keeps a single "Server default" option (value "") when no voices are listed. */
export async function fillVoicePicker(select, onChange = () => {}) {
  select.addEventListener("change", () => {
    saveSetting("voice", select.value);
    onChange(select.value);
  });
  const resp = await getJson("/v1/voices");
  const voices = resp.ok && Array.isArray(resp.data?.voices) ? resp.data.voices : [];
  if (!voices.length) {
    select.disabled = true;
    select.title = resp.ok ? "The workers report no voices to choose from" : "This server does not list its voices";
    return;
  }
  select.replaceChildren(...voices.map((v) => el("option", { value: v.id, text: v.default ? `${v.id} (default)` : v.id })));
  const saved = loadSetting("voice");
  select.value = (voices.find((v) => v.id === saved) || voices.find((v) => v.default) || voices[0]).id;
}
