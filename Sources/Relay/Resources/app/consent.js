// The OAuth consent page (SPEC §12) at /app/oauth/consent?authorization_id=…, Supabase
// Auth's `authorization_url_path`. It uses Supabase Auth's consent API as auth-js does
// (packages/core/auth-js GoTrueClient: GET /auth/v1/oauth/authorizations/{id}, then
// POST …/{id}/consent {"action":"approve"|"deny"}, each with the user's access token and
// the project's apikey) and follows the redirect_url it returns. Everything an agent chose
// (its name, its redirect URI) is shown as text only; a redirect URI that hides a user name
// is not approved.
import * as session from "./session.js";

const $ = (id) => document.getElementById(id);
const RETURN = "whereabot.return_to";
const ID = /^[A-Za-z0-9_-]{1,128}$/;
const NEVER_FOLLOWED = new Set(["javascript:", "data:", "vbscript:", "file:", "blob:", "about:"]);
// Supabase Auth's OAuth server answers 400 with this message for a request that carries
// `resource` or `offline_access`, or comes from a public client (supabase/auth#2820) —
// as ChatGPT's connector sends. Nothing the person can do fixes it; the operator can.
const KNOWN_REFUSAL = /^authorization request cannot be processed$/i;
const REFUSED_BY_SUPABASE = "Supabase Auth refused this request to connect an agent: its OAuth server cannot yet " +
  "handle agents that ask for a resource or for offline access, or that register as public clients. Trying again " +
  "will not help. The operator of this relay can see what to change in docs/deploy.md (\u201cAgents Supabase's OAuth " +
  "server refuses\u201d); meanwhile, connect this agent with an agent key from your account page.";

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
  try { target = new URL(url); } catch { return fail("The sign-in service answered with an address that is not one.", null); }
  if (NEVER_FOLLOWED.has(target.protocol)) return fail("The sign-in service answered with an address this page never opens.", null);
  location.assign(target.href);
}

async function load(config, id) {
  only("consent-loading");
  const current = session.load();
  if (!current || session.secondsLeft(current) <= 0 || !session.accountOf(current)) {
    localStorage.setItem(RETURN, JSON.stringify({ path: location.pathname + location.search, at: Date.now() }));
    only("consent-signin");
    return;
  }
  const account = session.accountOf(current);
  $("account").textContent = account.email;
  $("account").hidden = false;
  let details;
  try {
    details = await session.authRequest(config, current.access_token, `/oauth/authorizations/${encodeURIComponent(id)}`);
  } catch {
    return fail("Could not reach the sign-in service. Check your connection.", () => load(config, id));
  }
  if (details.status === 401 || details.status === 403) {
    localStorage.setItem(RETURN, JSON.stringify({ path: location.pathname + location.search, at: Date.now() }));
    return only("consent-signin");
  }
  if (details.status === 400 && KNOWN_REFUSAL.test(String(details.body?.msg ?? details.body?.message ?? ""))) {
    return fail(REFUSED_BY_SUPABASE, null);
  }
  if (details.status !== 200) {
    return fail("This request to connect an agent has expired or was already answered. Start again from your agent.", null);
  }
  if (details.body.redirect_url && !details.body.authorization_id) return follow(details.body.redirect_url);  // consented before
  render(config, current, id, details.body);
}

function render(config, current, id, details) {
  const name = String(details.client?.name || "An agent").slice(0, 100);
  let host = "";
  let safe = true;
  try {
    const uri = new URL(String(details.redirect_uri || ""));
    host = uri.host || uri.protocol;  // a native app's custom scheme has no host
    if (uri.username || uri.password) safe = false;
  } catch {
    safe = false;
  }
  $("consent-text").textContent = `${name} will be able to ask for your location. You are asked every time unless you choose Always allow.`;
  $("consent-client").textContent = name;
  $("consent-host").textContent = host || "(no address)";
  $("consent-email").textContent = details.user?.email || session.accountOf(current).email;
  $("consent-warning").hidden = safe;
  $("consent-warning").textContent = safe ? "" : "This agent's address hides a user name or is not an address: it cannot be approved.";
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
    fail("This request to connect an agent has expired or was already answered. Start again from your agent.", null);
  } catch {
    fail("Could not reach the sign-in service. Check your connection.", () => load(config, id));
  }
}

async function main() {
  const config = await fetch("/app/config.json").then((r) => r.json()).catch(() => ({}));
  const id = new URLSearchParams(location.search).get("authorization_id") || "";
  if (!ID.test(id)) return fail("This link to connect an agent is not valid. Start again from your agent.", null);
  if (!config.supabase_url) return fail("This relay has no sign-in service configured, so agents cannot connect with OAuth here.", null);
  load(config, id);
}

main();
