// Ephemeral keys: a session's connection never carries a long-lived key.
//
// The gateway mints keys that open exactly one session (POST /v1/realtime/client_secrets, with the
// long-lived client key). A page offers a session either such a key handed to it in its address
// (/voice#key=ek_..., never stored, never sent to the server in a URL) or, when the user stored the
// long-lived key in this browser, a fresh one it mints with that key for each session.

const LIFETIME_S = 60; // enough to connect with; a key is spent by the session it opens

/** The ephemeral key in this page's address (#key=ek_...), if any. */
export function linkKey() {
  const match = location.hash.match(/(?:^#|&)key=(ek_[A-Za-z0-9_-]+)/);
  return match ? match[1] : "";
}

export class KeyRefused extends Error {}

/** The key a new session offers: "" (none), an ephemeral key as given, or one minted with `key`. */
export async function sessionKey(key) {
  if (!key || key.startsWith("ek_")) return key || "";
  const resp = await fetch("/v1/realtime/client_secrets", {
    method: "POST",
    headers: { Authorization: `Bearer ${key}`, "Content-Type": "application/json" },
    body: JSON.stringify({ expires_after: { anchor: "created_at", seconds: LIFETIME_S } }),
  });
  if (!resp.ok) throw new KeyRefused(`the server did not accept the API key (HTTP ${resp.status})`);
  return (await resp.json()).value;
}
