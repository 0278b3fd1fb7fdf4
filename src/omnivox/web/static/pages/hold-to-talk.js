// Press-and-hold on a button, by pointer (mouse, touch, pen) or keyboard (Space or Enter).
export function bindHoldToTalk(button, { onStart, onEnd }) {
  let held = false;
  const start = () => {
    if (held || button.disabled) return;
    held = true;
    button.setAttribute("aria-pressed", "true");
    onStart();
  };
  const end = () => {
    if (!held) return;
    held = false;
    button.setAttribute("aria-pressed", "false");
    onEnd();
  };
  button.addEventListener("pointerdown", (event) => {
    if (event.button !== 0) return;
    event.preventDefault(); // no text selection or focus juggling while held
    button.setPointerCapture?.(event.pointerId);
    start();
  });
  button.addEventListener("pointerup", end);
  button.addEventListener("pointercancel", end);
  button.addEventListener("lostpointercapture", end);
  button.addEventListener("keydown", (event) => {
    if ((event.key === " " || event.key === "Enter") && !event.repeat) {
      event.preventDefault();
      start();
    }
  });
  button.addEventListener("keyup", (event) => {
    if (event.key === " " || event.key === "Enter") {
      event.preventDefault();
      end();
    }
  });
  button.addEventListener("blur", end);
  button.addEventListener("contextmenu", (event) => event.preventDefault()); // long-press on phones
}
