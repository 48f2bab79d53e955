// Connected agents (docs/agents.md, "Signing in"): the OAuth clients this account approved,
// from two sources merged in one list, each with a Revoke button:
// - the relay's own authorization server (Sources/Relay/OAuth): GET /oauth/grants and
//   DELETE /oauth/grants/{id}, with the person's access token. Always asked: its grants
//   exist whatever sign-in service the relay names.
// - Supabase Auth's OAuth server, when the relay names a Supabase project, as auth-js lists
//   and revokes them (GET /auth/v1/user/oauth/grants; DELETE
//   /auth/v1/user/oauth/grants?client_id=…, each with the user's own access token and the
//   project's apikey). A project whose OAuth server is off (404 feature_disabled) has none.
// Revoking ends the client's tokens, so the relay refuses them within seconds on every
// instance. While loading the list says so; a source that cannot be read says so in its own
// words; "No agent is connected" is shown only when every source answered and none has a
// grant, so the empty and the error state are never shown together.
import * as session from "./session.js";
import { t, dateTime } from "./i18n.js";

const $ = (id) => document.getElementById(id);

let generation = 0;  // a newer load (or a sign-out) wins over one still under way

/** The access token to send: the stored one when it is the same account's (it may have
 * been refreshed since the list was shown), else `token`. */
function bearer(token) {
  const stored = session.load();
  const now = session.accountOf(stored);
  const then = session.claimsOf(token);
  return now && then && now.sub === then.sub && session.secondsLeft(stored) > 0 ? stored.access_token : token;
}

// ------------------------------------------------------------------------- the relay's

async function relayCall(token, method, path = "") {
  const response = await fetch(`/oauth/grants${path}`, {
    method, cache: "no-store", headers: { Authorization: `Bearer ${bearer(token)}` },
  });
  if (method === "DELETE") {
    if (response.status !== 204 && response.status !== 404) throw new Error(String(response.status));  // 404: already gone
    return null;
  }
  if (response.status !== 200) throw new Error(String(response.status));
  const body = await response.json();
  if (!Array.isArray(body)) throw new Error("not a list");
  return body;
}

function relayGrant(grant, config, token) {
  const name = String(grant.client_name || grant.client_id || t("prompt.an_agent")).slice(0, 100);
  const host = String(grant.client_host || "").slice(0, 300);
  const used = grant.last_used_at ? t("common.last_used", { time: dateTime(grant.last_used_at) }) : t("common.never_used");
  return {
    name, at: Date.parse(grant.created_at) || 0,
    text: t(host ? "grants.row.host" : "grants.row", { name, host, time: dateTime(grant.created_at), used }),
    revoke: () => relayCall(token, "DELETE", `/${encodeURIComponent(String(grant.id))}`),
  };
}

// ------------------------------------------------------------------ Supabase Auth's

async function supabaseCall(config, token, method, query = "") {
  const { status, body } = await session.authRequest(config, bearer(token), `/user/oauth/grants${query}`, { method });
  if (method === "GET" && status === 404 && body?.error_code === "feature_disabled") return [];  // no OAuth server there
  if (status !== (method === "GET" ? 200 : 204)) throw new Error(String(status));
  return body;
}

async function supabaseGrants(config, token) {
  const body = await supabaseCall(config, token, "GET");
  return Array.isArray(body) ? body : [];
}

function supabaseGrant(grant, config, token) {
  const name = String(grant.client?.name || grant.client?.id || t("prompt.an_agent")).slice(0, 100);
  return {
    name, at: Date.parse(grant.granted_at) || 0,
    text: t("grants.row.signin", { name, time: dateTime(grant.granted_at) }),
    revoke: () => supabaseCall(config, token, "DELETE", `?client_id=${encodeURIComponent(grant.client?.id ?? "")}`),
  };
}

// ---------------------------------------------------------------------------- the list

/**
 * Lists the grants of the signed-in account (`token`) with a Revoke button each. `notes`
 * are messages to show with the list (a revoke that failed just before).
 */
export async function showGrants(config, token, notes = []) {
  const mine = ++generation;
  $("connected").hidden = false;
  if (!$("grants").children.length) {
    $("grants-empty").hidden = true;  // loading: not "none" yet
    $("grants-error").hidden = true;
    $("grants-loading").hidden = false;
  }
  const sources = [relayCall(token, "GET").then((list) => list.map((grant) => relayGrant(grant, config, token)))];
  if (config.supabase_url) {
    sources.push(supabaseGrants(config, token).then((list) => list.map((grant) => supabaseGrant(grant, config, token))));
  }
  const results = await Promise.allSettled(sources);
  if (mine !== generation) return;
  const errors = [...notes];
  if (results[0].status === "rejected") {
    errors.push(t("grants.error.relay"));
  }
  if (results[1]?.status === "rejected") {
    errors.push(t("grants.error.signin"));
  }
  const list = results.flatMap((result) => (result.status === "fulfilled" ? result.value : []))
    .sort((a, b) => a.at - b.at);
  $("grants-loading").hidden = true;
  $("grants").replaceChildren(...list.map((grant) => row(grant, config, token)));
  $("grants-error").textContent = errors.join(" ");
  $("grants-error").hidden = errors.length === 0;
  // Empty only when every source answered: an error never sits beside "none connected".
  $("grants-empty").hidden = list.length > 0 || results.some((result) => result.status === "rejected");
}

function row(grant, config, token) {
  const li = document.createElement("li");
  const text = document.createElement("span");
  text.textContent = grant.text;
  const revoke = document.createElement("button");
  revoke.type = "button";
  revoke.textContent = t("common.revoke");
  revoke.onclick = async () => {
    if (!confirm(t("grants.revoke_confirm", { name: grant.name }))) return;
    revoke.disabled = true;
    const notes = [];
    try {
      await grant.revoke();
    } catch {
      notes.push(t("grants.revoke_failed", { name: grant.name }));
    }
    showGrants(config, token, notes);
  };
  li.append(text, revoke);
  return li;
}

/**
 * Revokes every grant Supabase Auth keeps for the signed-in account (Stop all sharing: the
 * relay's own grants the stop_all_sharing message already ended); the number revoked, or
 * null when the list could not be read or a revoke failed. No project: 0. The list is
 * shown again afterwards, from both sources.
 */
export async function revokeAllGrants(config, token) {
  try {
    if (!config.supabase_url) return 0;
    const list = await supabaseGrants(config, token);
    for (const grant of list) await supabaseCall(config, token, "DELETE", `?client_id=${encodeURIComponent(grant.client?.id ?? "")}`);
    return list.length;
  } catch {
    return null;
  } finally {
    showGrants(config, token);
  }
}

/** Forgets the list (sign-out); a load still under way is dropped. */
export function clearGrants() {
  generation += 1;
  $("grants").replaceChildren();
  $("grants-error").hidden = true;
  $("grants-error").textContent = "";
  $("grants-empty").hidden = true;
  $("grants-loading").hidden = true;
}
