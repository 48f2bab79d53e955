// Connected agents (SPEC §12): the OAuth clients this account approved, from Supabase Auth
// as auth-js lists and revokes them (GET /auth/v1/user/oauth/grants; DELETE
// /auth/v1/user/oauth/grants?client_id=…, each with the user's own access token and the
// project's apikey). Revoking ends the client's sessions, so the relay refuses its tokens
// within seconds on every instance. Shown only when the relay names a Supabase project.
import { authRequest } from "./session.js";

const $ = (id) => document.getElementById(id);

async function call(config, token, method, query = "") {
  const { status, body } = await authRequest(config, token, `/user/oauth/grants${query}`, { method });
  if (status !== (method === "GET" ? 200 : 204)) throw new Error(String(status));
  return body;
}

/** Lists the grants of the signed-in account (`token`) with a Revoke button each. */
export async function showGrants(config, token) {
  $("connected").hidden = !config.supabase_url;
  if (!config.supabase_url) return;
  let grants;
  try {
    grants = await call(config, token, "GET");
  } catch {
    $("grants-error").textContent = "Could not load your connected agents. Reload the page to try again.";
    $("grants-error").hidden = false;
    return;
  }
  $("grants-error").hidden = true;
  const list = Array.isArray(grants) ? grants : [];
  $("grants").replaceChildren(...list.map((grant) => {
    const li = document.createElement("li");
    const text = document.createElement("span");
    const name = String(grant.client?.name || grant.client?.id || "An agent").slice(0, 100);
    text.textContent = `${name} — connected ${new Date(grant.granted_at).toLocaleString()}`;
    const revoke = document.createElement("button");
    revoke.type = "button";
    revoke.textContent = "Revoke";
    revoke.onclick = async () => {
      if (!confirm(`Disconnect ${name}? It can no longer ask for your location until you connect it again.`)) return;
      revoke.disabled = true;
      try {
        await call(config, token, "DELETE", `?client_id=${encodeURIComponent(grant.client.id)}`);
      } catch {
        $("grants-error").textContent = `Could not disconnect ${name}. Try again.`;
        $("grants-error").hidden = false;
      }
      showGrants(config, token);
    };
    li.append(text, revoke);
    return li;
  }));
  $("grants-empty").hidden = list.length > 0;
}

/**
 * Revokes every grant of the signed-in account (Stop all sharing); the number revoked, or
 * null when the list could not be read or a revoke failed. No project: 0.
 */
export async function revokeAllGrants(config, token) {
  if (!config.supabase_url) return 0;
  try {
    const grants = await call(config, token, "GET");
    const list = Array.isArray(grants) ? grants : [];
    for (const grant of list) await call(config, token, "DELETE", `?client_id=${encodeURIComponent(grant.client.id)}`);
    return list.length;
  } catch {
    return null;
  } finally {
    showGrants(config, token);
  }
}

/** Forgets the list (sign-out). */
export function clearGrants() {
  $("grants").replaceChildren();
}
