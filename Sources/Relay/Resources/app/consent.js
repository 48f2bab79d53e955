// The OAuth consent page (docs/agents.md, "Signing in"; README "Try it with an MCP client") at
// /app/oauth/consent, in the page's language (strings.json). Two flows:
//
// - `?request=<uuid>`: the relay's own authorization server (Sources/Relay/OAuth) sent the
//   person here from /oauth/authorize. The page reads the request from the relay
//   (GET /oauth/consent/{id}: client name and host, the person's email, a consent token)
//   and answers it (POST /oauth/consent/{id} {"action": "approve"|"deny", "consent_token"}),
//   each with the person's Supabase access token, then follows the redirect_url returned.
// - `?authorization_id=…`: Supabase Auth's own OAuth server (its `authorization_url_path`),
//   for deployments that still use it. The page uses Supabase Auth's consent API as auth-js
//   does (packages/core/auth-js GoTrueClient: GET /auth/v1/oauth/authorizations/{id}, then
//   POST …/{id}/consent {"action":"approve"|"deny"}, each with the user's access token and
//   the project's apikey) and follows the redirect_url it returns; a redirect URI that hides
//   a user name is not approved.
//
// Everything an agent chose (its name, its redirect URI) is shown as text only. Signed out
// (or a session the server refuses), the page asks to sign in and comes back afterwards.
import * as session from "./session.js";
import { t, localize } from "./i18n.js";

const $ = (id) => document.getElementById(id);
const RETURN = "whereabot.return_to";
const ID = /^[A-Za-z0-9_-]{1,128}$/;
const REQUEST = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const NEVER_FOLLOWED = new Set(["javascript:", "data:", "vbscript:", "file:", "blob:", "about:"]);
// Supabase Auth's OAuth server answers 400 with this message for a request that carries
// `resource` or `offline_access`, or comes from a public client (supabase/auth#2820) —
// as ChatGPT's connector sends. Nothing the person can do fixes it; the operator can.
const KNOWN_REFUSAL = /^authorization request cannot be processed$/i;

function only(id) {
  for (const section of ["consent-loading", "consent-signin", "consent-ask", "consent-error"]) $(section).hidden = section !== id;
}

function fail(text, retry) {
  $("consent-error-text").textContent = text;
  $("consent-retry").hidden = !retry;
  $("consent-retry").onclick = retry || null;
  only("consent-error");
}

/** Where the authorization server sends the browser next (never a script URL). */
function follow(url) {
  let target;
  try { target = new URL(url); } catch { return fail(t("consent.not_an_address"), null); }
  if (NEVER_FOLLOWED.has(target.protocol)) return fail(t("consent.never_opened"), null);
  location.assign(target.href);
}

/** Asks to sign in, and to come back to this page afterwards (app.js reads RETURN). */
function signIn() {
  localStorage.setItem(RETURN, JSON.stringify({ path: location.pathname + location.search, at: Date.now() }));
  only("consent-signin");
}

/** The stored session while it is valid (its account shown in the header), else null. */
function signedIn() {
  const current = session.load();
  if (!current || session.secondsLeft(current) <= 0 || !session.accountOf(current)) return null;
  $("account").textContent = session.accountOf(current).email;
  $("account").hidden = false;
  return current;
}

// ------------------------------------------------------------ the relay's own OAuth server

/** A request to the relay's consent API as the signed-in person: `{status, body}`. */
async function relayRequest(current, id, init = {}) {
  const response = await fetch(`/oauth/consent/${encodeURIComponent(id)}`, {
    ...init,
    cache: "no-store",
    headers: { Authorization: `Bearer ${current.access_token}`, "Content-Type": "application/json" },
  });
  const body = await response.json().catch(() => ({}));
  return { status: response.status, body: body && typeof body === "object" ? body : {} };
}

async function loadRequest(id) {
  only("consent-loading");
  const current = signedIn();
  if (!current) return signIn();
  let details;
  try {
    details = await relayRequest(current, id);
  } catch {
    return fail(t("consent.relay_unreachable"), () => loadRequest(id));
  }
  if (details.status === 401) return signIn();
  if (details.status === 404) return fail(t("consent.expired"), null);
  if (details.status !== 200 || typeof details.body.consent_token !== "string") {
    return fail(t("consent.relay_busy"), () => loadRequest(id));
  }
  const body = details.body;
  const name = String(body.client_name || t("prompt.an_agent")).slice(0, 100);
  $("consent-text").textContent = t("consent.text", { name });
  $("consent-client").textContent = name;
  $("consent-host").textContent = String(body.client_host || "") || t("consent.no_address");
  $("consent-email").textContent = String(body.email || "") || session.accountOf(current).email;
  $("consent-warning").hidden = true;
  $("consent-warning").textContent = "";
  $("consent-approve").disabled = $("consent-deny").disabled = false;
  $("consent-approve").onclick = () => decideRequest(current, id, "approve", body.consent_token);
  $("consent-deny").onclick = () => decideRequest(current, id, "deny", body.consent_token);
  only("consent-ask");
}

async function decideRequest(current, id, action, token) {
  $("consent-approve").disabled = $("consent-deny").disabled = true;
  let answer;
  try {
    answer = await relayRequest(current, id, { method: "POST", body: JSON.stringify({ action, consent_token: token }) });
  } catch {
    return fail(t("consent.relay_unreachable"), () => loadRequest(id));
  }
  if (answer.status === 200 && typeof answer.body.redirect_url === "string") return follow(answer.body.redirect_url);
  if (answer.status === 401) return signIn();
  if (answer.status === 404) return fail(t("consent.expired"), null);
  // 403: this page's consent token is not for the account signed in now (another tab
  // switched accounts): read the request again as that account.
  if (answer.status === 403) return fail(t("consent.other_account"), () => loadRequest(id));
  fail(t("consent.relay_busy"), () => loadRequest(id));
}

// --------------------------------------------------------- Supabase Auth's OAuth server

async function load(config, id) {
  only("consent-loading");
  const current = signedIn();
  if (!current) return signIn();
  let details;
  try {
    details = await session.authRequest(config, current.access_token, `/oauth/authorizations/${encodeURIComponent(id)}`);
  } catch {
    return fail(t("consent.signin_unreachable"), () => load(config, id));
  }
  if (details.status === 401 || details.status === 403) return signIn();
  if (details.status === 400 && KNOWN_REFUSAL.test(String(details.body?.msg ?? details.body?.message ?? ""))) {
    return fail(t("consent.refused_by_supabase"), null);
  }
  if (details.status !== 200) return fail(t("consent.expired"), null);
  if (details.body.redirect_url && !details.body.authorization_id) return follow(details.body.redirect_url);  // consented before
  render(config, current, id, details.body);
}

function render(config, current, id, details) {
  const name = String(details.client?.name || t("prompt.an_agent")).slice(0, 100);
  let host = "";
  let safe = true;
  try {
    const uri = new URL(String(details.redirect_uri || ""));
    host = uri.host || uri.protocol;  // a native app's custom scheme has no host
    if (uri.username || uri.password) safe = false;
  } catch {
    safe = false;
  }
  $("consent-text").textContent = t("consent.text", { name });
  $("consent-client").textContent = name;
  $("consent-host").textContent = host || t("consent.no_address");
  $("consent-email").textContent = details.user?.email || session.accountOf(current).email;
  $("consent-warning").hidden = safe;
  $("consent-warning").textContent = safe ? "" : t("consent.unsafe_address");
  $("consent-approve").disabled = !safe;
  $("consent-approve").onclick = () => decide(config, current, id, "approve");
  $("consent-deny").onclick = () => decide(config, current, id, "deny");
  only("consent-ask");
}

async function decide(config, current, id, action) {
  $("consent-approve").disabled = $("consent-deny").disabled = true;
  try {
    const answer = await session.authRequest(config, current.access_token, `/oauth/authorizations/${encodeURIComponent(id)}/consent`,
                              { method: "POST", body: JSON.stringify({ action }) });
    if (answer.status === 200 && answer.body.redirect_url) return follow(answer.body.redirect_url);
    fail(t("consent.expired"), null);
  } catch {
    fail(t("consent.signin_unreachable"), () => load(config, id));
  }
}

async function main() {
  localize();
  const query = new URLSearchParams(location.search);
  if (query.has("request")) {
    const request = query.get("request");
    if (!REQUEST.test(request)) return fail(t("consent.invalid_link"), null);
    return loadRequest(request);
  }
  const config = await fetch("/app/config.json").then((r) => r.json()).catch(() => ({}));
  const id = query.get("authorization_id") || "";
  if (!ID.test(id)) return fail(t("consent.invalid_link"), null);
  if (!config.supabase_url) return fail(t("consent.no_service"), null);
  load(config, id);
}

main();
