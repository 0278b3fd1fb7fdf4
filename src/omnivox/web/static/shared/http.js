// JSON over HTTP to the gateway, with a timeout and an API key when the user stored one.
/** A setting kept in this browser ("" when unset, or when storage is disabled in private mode). */
export function loadSetting(name) {
  try {
    return localStorage.getItem(`omnivox.${name}`) || "";
  } catch {
    return "";
  }
}

export function saveSetting(name, value) {
  try {
    if (value) localStorage.setItem(`omnivox.${name}`, value);
    else localStorage.removeItem(`omnivox.${name}`);
  } catch {
    /* storage disabled: the setting lasts only for this page */
  }
}

export const apiKey = () => loadSetting("apiKey");
export const setApiKey = (key) => saveSetting("apiKey", key);

/** WebSocket subprotocols that carry the key (browsers cannot set headers on a WebSocket; the
 * gateway never takes a key from a query string, which would end up in access logs). */
export function keyProtocols(key = apiKey()) {
  return key ? [`openai-insecure-api-key.${key}`] : [];
}

/** fetch `path`; resolves to {ok, status, data} and never rejects (network errors give status 0). */
export async function request(path, { method = "GET", timeoutMs = 5000, text = false } = {}) {
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), timeoutMs);
  const headers = {};
  const key = apiKey();
  if (key) headers.Authorization = `Bearer ${key}`;
  try {
    const resp = await fetch(path, { method, headers, signal: controller.signal, cache: "no-store" });
    let data = null;
    try {
      data = text ? await resp.text() : await resp.json();
    } catch {
      data = null; // an empty or non-JSON body
    }
    return { ok: resp.ok, status: resp.status, data };
  } catch (err) {
    return { ok: false, status: 0, data: null, error: String(err) };
  } finally {
    clearTimeout(timer);
  }
}

export const getJson = (path, opts) => request(path, opts);

/** ws:// or wss:// URL of `path` on this page's host. */
export function wsUrl(path) {
  const scheme = location.protocol === "https:" ? "wss:" : "ws:";
  return `${scheme}//${location.host}${path}`;
}
