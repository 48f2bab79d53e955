// Stop all sharing (SPEC §14): one control, after one confirmation naming what ends, ends
// every standing permission of the account: the relay ends every always-allow, share,
// invitation, agent key and agent connected through its own OAuth server, and answers every
// waiting request as declined (one message on the phone socket, answered with the counts),
// then this page revokes every OAuth grant Supabase Auth's own server keeps, through its
// grants API.
import { revokeAllGrants } from "./grants.js";

const $ = (id) => document.getElementById(id);

function plural(count, one, many) { return `${count} ${count === 1 ? one : many}`; }

/** What the confirmation names, with the counts this page knows. */
export function confirmation({ always, keys, grants }) {
  return [`${plural(always, "agent", "agents")} you always allow`,
          "every person you share your location with, and every invitation waiting",
          plural(keys, "agent key", "agent keys"),
          plural(grants, "connected agent", "connected agents"),
          "every request waiting for your answer (its agent is told you declined)"];
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
  let connected = plural(revoked + agents, "connected agent", "connected agents");
  if (revoked === null) {
    connected = agents === 0 ? "connected agents could not all be disconnected: try again"
      : `${plural(agents, "connected agent", "connected agents")} (those connected through the sign-in service `
        + "could not all be disconnected: try again)";
  }
  $("stop-all").disabled = false;
  $("stop-all-result").textContent = "Stopped: "
    + `${plural(count("always_allowed"), "always-allowed agent", "always-allowed agents")}, `
    + `${plural(count("shares"), "share or invitation", "shares and invitations")}, `
    + `${plural(count("agent_keys"), "agent key", "agent keys")}, `
    + `${connected}, `
    + `${plural(count("requests"), "waiting request", "waiting requests")}.`;
  $("stop-all-result").hidden = false;
}
