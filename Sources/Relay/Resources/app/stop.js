// Stop all sharing (README "Living with it": stop all sharing): one control, after one confirmation
// naming what ends, ends every standing permission of the account: the relay ends every
// always-allow, share, invitation, agent key and agent connected through its own OAuth server, and
// answers every waiting request as declined (one message on the phone socket, answered with the
// counts), then this page revokes every OAuth grant Supabase Auth's own server keeps, through its
// grants API.
import { revokeAllGrants } from "./grants.js";
import { t } from "./i18n.js";

const $ = (id) => document.getElementById(id);

/** The catalog's `key.one` or `key.other` with {count}. */
function plural(count, key) { return t(`${key}.${count === 1 ? "one" : "other"}`, { count }); }

/** What the confirmation names, with the counts this page knows. */
export function confirmation({ always, keys, grants }) {
  return [plural(always, "stop.ends.always"), t("stop.ends.shares"), plural(keys, "stop.ends.keys"),
          plural(grants, "stop.ends.grants"), t("stop.ends.requests")];
}

/** Wires the button and its confirmation; `counts()` says what the page shows now. */
export function bindStopAll(counts, send) {
  $("stop-all").onclick = () => {
    $("stop-all-ends").replaceChildren(...confirmation(counts()).map((text) => {
      const li = document.createElement("li");
      li.textContent = text;
      return li;
    }));
    $("stop-all-result").hidden = true;
    $("stop-all-confirm").hidden = false;
    $("stop-all-cancel").focus();
  };
  $("stop-all-cancel").onclick = () => { $("stop-all-confirm").hidden = true; };
  $("stop-all-yes").onclick = () => {
    $("stop-all-confirm").hidden = true;
    $("stop-all").disabled = true;
    send({ type: "stop_all_sharing" });
  };
}

/** The relay's `stopped_all_sharing`: then Supabase Auth's OAuth grants, then what ended
 * (connected agents: the relay's own, `agents`, and Supabase Auth's together). */
export async function stoppedAll(message, config, token) {
  const count = (key) => (Number.isInteger(message[key]) && message[key] >= 0 ? message[key] : 0);
  const revoked = await revokeAllGrants(config, token);
  const agents = count("agents");
  let connected = plural(revoked + agents, "stop.done.grants");
  if (revoked === null) {
    connected = agents === 0 ? t("stop.done.grants_failed")
      : t("stop.done.grants_partly", { grants: plural(agents, "stop.done.grants") });
  }
  $("stop-all").disabled = false;
  $("stop-all-result").textContent = t("stop.done", {
    always: plural(count("always_allowed"), "stop.done.always"), shares: plural(count("shares"), "stop.done.shares"),
    keys: plural(count("agent_keys"), "stop.done.keys"), grants: connected,
    requests: plural(count("requests"), "stop.done.requests") });
  $("stop-all-result").hidden = false;
}
