// The signed-in session (APP.md §A.2): read from the implicit-flow fragment that Supabase
// Auth (or `whereabot token --app-link`) puts after /app/#, kept in localStorage, refreshed
// 60 s before it expires when a refresh token exists. The fragment never reaches a server.

const KEY = "whereabot.session";

/** The JWT's claims (no verification: the relay verifies). */
export function claimsOf(token) {
  try {
    const part = token.split(".")[1].replace(/-/g, "+").replace(/_/g, "/");
    return JSON.parse(atob(part + "=".repeat((4 - (part.length % 4)) % 4)));
  } catch {
    return null;
  }
}

/** Takes a session out of the URL fragment, if any, and removes the fragment. */
export function takeFragment() {
  if (!location.hash.includes("access_token=")) return null;
  const params = new URLSearchParams(location.hash.slice(1));
  history.replaceState(null, "", location.pathname + location.search);
  const accessToken = params.get("access_token");
  const claims = accessToken && claimsOf(accessToken);
  if (!claims || !claims.exp) return null;
  const session = { access_token: accessToken, refresh_token: params.get("refresh_token"), expires_at: claims.exp };
  save(session);
  return session;
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
}

export function clear() {
  localStorage.removeItem(KEY);
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
    if (!claims) return null;
    const fresh = { access_token: body.access_token, refresh_token: body.refresh_token, expires_at: claims.exp };
    save(fresh);
    return fresh;
  } catch {
    return null;
  }
}

/** Starts Supabase Auth's Google sign-in (a full-page redirect back to /app/). */
export function signInWithGoogle(config) {
  const back = encodeURIComponent(`${config.public_url}/app/`);
  location.assign(`${config.supabase_url}/auth/v1/authorize?provider=google&redirect_to=${back}`);
}

/** Asks Supabase Auth to email a sign-in link. */
export async function emailLink(config, email) {
  const response = await fetch(`${config.supabase_url}/auth/v1/otp`, {
    method: "POST",
    headers: { "Content-Type": "application/json", apikey: config.supabase_anon_key || "" },
    body: JSON.stringify({ email, create_user: true, options: { email_redirect_to: `${config.public_url}/app/` } }),
  });
  return response.ok;
}
