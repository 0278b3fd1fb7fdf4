// Images for chat messages: PNG or JPEG as base64, scaled down so a conversation stays small.
import { bytesToBase64 } from "./pcm.js";

const MAX_SIDE = 1024;

/** A File -> {data: base64 without the data: prefix, mime, url: an object URL for a preview}. */
export async function imageFileToPart(file, maxSide = MAX_SIDE) {
  const bitmap = await createImageBitmap(file);
  const scale = Math.min(1, maxSide / Math.max(bitmap.width, bitmap.height));
  const keep = scale === 1 && (file.type === "image/png" || file.type === "image/jpeg");
  let blob = file;
  if (!keep) {
    const canvas = document.createElement("canvas");
    canvas.width = Math.max(1, Math.round(bitmap.width * scale));
    canvas.height = Math.max(1, Math.round(bitmap.height * scale));
    canvas.getContext("2d").drawImage(bitmap, 0, 0, canvas.width, canvas.height);
    blob = await new Promise((resolve) => canvas.toBlob(resolve, "image/jpeg", 0.9));
  }
  bitmap.close();
  const data = bytesToBase64(new Uint8Array(await blob.arrayBuffer()));
  return { data, mime: blob.type, url: URL.createObjectURL(blob) };
}
