// The signed-in session (docs/protocol.md "Signing in the browser"; README "Try it in a
// browser"): read from the implicit-flow fragment that Supabase Auth (or `whereabot token
// --app-link`) puts after /app/#, kept in localStorage, refreshed 60 s before it expires when a
// refresh token exists. The fragment never reaches a server.
//
// A token in the URL is taken only for a sign-in this page started (login CSRF): before it
// sends the person to Supabase it stores a random `state` and puts it in redirect_to
// (`/app/?state=…`, a query Supabase keeps); the returning fragment counts only with that
// state, which is then consumed. A `whereabot token --app-link` link is marked
// (`whereabot_link=1`) and is only offered, behind a confirmation naming the account. Any
// other fragment is removed from the URL and never stored.

const KEY = "whereabot.session";
const STATES = "whereabot.signin_states";
const STATE_LIFETIME_MS = 60 * 60 * 1000;  // a Google round trip, or an email link (valid an hour) opened in another tab (README "Try it in a browser")
const MAX_STATES = 5;                      // a few sign-ins started in parallel (tabs, resent emails)

/** The JWT's claims (no verification: the relay verifies). */
export function claimsOf(token) {
  try {
    const part = token.split(".")[1].replace(/-/g, "+").replace(/_/g, "/");
    return JSON.parse(atob(part + "=".repeat((4 - (part.length % 4)) % 4)));
  } catch {
    return null;
  }
}

/** `{sub, email}` of a session (the email falls back to the sub), or null. */
export function accountOf(session) {
  const claims = session && claimsOf(session.access_token);
  if (!claims || typeof claims.sub !== "string") return null;
  return { sub: claims.sub, email: typeof claims.email === "string" && claims.email ? claims.email : claims.sub };
}

function storedStates() {
  try {
    const list = JSON.parse(localStorage.getItem(STATES) || "[]");
    return Array.isArray(list) ? list.filter((s) => s && typeof s.state === "string" && s.expires_ms > Date.now()) : [];
  } catch {
    return [];
  }
}

/** A fresh random state, stored (with its expiry) before the page leaves for Supabase. */
export function newState() {
  const bytes = crypto.getRandomValues(new Uint8Array(32));
  const state = btoa(String.fromCharCode(...bytes)).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
  const list = [...storedStates(), { state, expires_ms: Date.now() + STATE_LIFETIME_MS }].slice(-MAX_STATES);
  localStorage.setItem(STATES, JSON.stringify(list));
  return state;
}

/** Whether `state` is one this page stored and that has not expired; a match is consumed. */
function consumeState(state) {
  const list = storedStates();
  const index = state ? list.findIndex((s) => s.state === state) : -1;
  if (index >= 0) list.splice(index, 1);
  if (list.length) localStorage.setItem(STATES, JSON.stringify(list));
  else localStorage.removeItem(STATES);
  return index >= 0;
}

/**
 * Takes sign-in data out of the URL, if any, and always removes it (the fragment and the
 * `state` query parameter); nothing is stored here. Returns null when there was none, else
 * `{outcome: "started", session}` (a sign-in this page started: its state matched),
 * `{outcome: "link", session}` (a marked `whereabot token --app-link` link: to confirm),
 * `{outcome: "refused"}` (anything else) or `{outcome: "failed", text}` (Supabase's error).
 */
export function takeFragment() {
  const fragment = new URLSearchParams(location.hash.slice(1));
  const query = new URLSearchParams(location.search);
  const error = fragment.get("error_description") || fragment.get("error") || query.get("error_description");
  if (!fragment.has("access_token") && !error) return null;
  const state = query.get("state");
  query.delete("state");
  for (const name of ["error", "error_code", "error_description"]) query.delete(name);
  const search = query.toString();
  history.replaceState(null, "", location.pathname + (search ? `?${search}` : ""));
  const started = consumeState(state);
  if (error) return started ? { outcome: "failed", text: error.slice(0, 200) } : { outcome: "refused" };
  const accessToken = fragment.get("access_token");
  const claims = claimsOf(accessToken);
  if (!claims || typeof claims.sub !== "string" || !claims.exp || claims.client_id || claims.exp <= Date.now() / 1000) {
    return { outcome: "refused" };
  }
  const session = { access_token: accessToken, refresh_token: fragment.get("refresh_token"), expires_at: claims.exp };
  if (started) return { outcome: "started", session };
  if (fragment.get("whereabot_link") === "1") return { outcome: "link", session };
  return { outcome: "refused" };
}

export function load() {
  try {
    const session = JSON.parse(localStorage.getItem(KEY) || "null");
    return session && session.access_token ? session : null;
  } catch {
    return null;
  }
}

export function save(session) {
  localStorage.setItem(KEY, JSON.stringify(session));
  shareWithWorker(session);
}

export function clear() {
  localStorage.removeItem(KEY);
  shareWithWorker(null);
}

/** Where the service worker finds the access token (it cannot read localStorage). */
export const WORKER_CACHE = "whereabot-worker";
export const WORKER_SESSION = "/app/worker-session";

/**
 * Gives the service worker the session's access token (never the refresh token), so that a
 * notification's Reject answers without opening a window (README "Try it in a browser"); null
 * forgets it. The worker serves nothing from this cache, and an expired token makes Reject open the
 * app.
 */
export async function shareWithWorker(session) {
  try {
    const cache = await caches.open(WORKER_CACHE);
    if (!session || !session.access_token) {
      await cache.delete(WORKER_SESSION);
      return;
    }
    await cache.put(WORKER_SESSION, new Response(JSON.stringify({ access_token: session.access_token, expires_at: session.expires_at }),
                                                 { headers: { "Content-Type": "application/json" } }));
  } catch {
    // No Cache Storage (a private window): Reject on a notification opens the app instead.
  }
}

/** Seconds until the access token expires. */
export function secondsLeft(session) {
  return session.expires_at - Date.now() / 1000;
}

/** A new session from Supabase Auth's refresh grant; null when refused. */
export async function refresh(config, session) {
  if (!config.supabase_url || !session.refresh_token) return null;
  try {
    const response = await fetch(`${config.supabase_url}/auth/v1/token?grant_type=refresh_token`, {
      method: "POST",
      headers: { "Content-Type": "application/json", apikey: config.supabase_anon_key || "" },
      body: JSON.stringify({ refresh_token: session.refresh_token }),
    });
    if (!response.ok) return null;
    const body = await response.json();
    const claims = claimsOf(body.access_token);
    const before = accountOf(session);
    // A refresh never changes the account.
    if (!claims || !before || claims.sub !== before.sub) return null;
    const fresh = { access_token: body.access_token, refresh_token: body.refresh_token, expires_at: claims.exp };
    save(fresh);
    return fresh;
  } catch {
    return null;
  }
}

/** Where Supabase Auth sends the person back: /app/ with a fresh stored state. */
function redirectTo(config) {
  return `${config.public_url}/app/?state=${newState()}`;
}

/** Starts Supabase Auth's Google sign-in (a full-page redirect back to /app/?state=…). */
export function signInWithGoogle(config) {
  const back = encodeURIComponent(redirectTo(config));
  location.assign(`${config.supabase_url}/auth/v1/authorize?provider=google&redirect_to=${back}`);
}

/** Asks Supabase Auth to email a sign-in link back to /app/?state=… (redirect_to is a query parameter). */
export async function emailLink(config, email) {
  const back = encodeURIComponent(redirectTo(config));
  try {
    const response = await fetch(`${config.supabase_url}/auth/v1/otp?redirect_to=${back}`, {
      method: "POST",
      headers: { "Content-Type": "application/json", apikey: config.supabase_anon_key || "" },
      body: JSON.stringify({ email, create_user: true }),
    });
    return response.ok;
  } catch {
    return false;
  }
}

/** A request to Supabase Auth's API (`/auth/v1` + `path`) as the signed-in user, as auth-js
 * sends it (the user's access token and the project's apikey): `{status, body}`, the body
 * parsed when it is JSON. Network failures throw. */
export async function authRequest(config, token, path, init = {}) {
  const response = await fetch(`${config.supabase_url}/auth/v1${path}`, {
    ...init,
    headers: { apikey: config.supabase_anon_key || "", Authorization: `Bearer ${token}`, "Content-Type": "application/json" },
  });
  const body = await response.json().catch(() => ({}));
  return { status: response.status, body };
}
