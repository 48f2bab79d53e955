// Agent keys (SPEC §12, seeds: "create in the app, shown once"): for agents that cannot
// sign in with OAuth. Created, listed and revoked over the phone socket (the relay calls
// relay.create_agent_key / agent_keys / revoke_agent_key with the socket's user); the
// plaintext key arrives once, is shown once with a copy button, and is never stored here.
const $ = (id) => document.getElementById(id);

/** Shows the relay's `agent_keys` message: the live keys, a new key once, or a refusal. */
export function renderKeys(message, send) {
  const keys = Array.isArray(message.keys) ? message.keys : [];
  $("agent-keys").replaceChildren(...keys.map((key) => {
    const li = document.createElement("li");
    const text = document.createElement("span");
    const used = key.last_used_at ? `last used ${new Date(key.last_used_at).toLocaleString()}` : "never used";
    text.textContent = `${key.name} (${key.prefix}…) — created ${new Date(key.created_at).toLocaleString()}, ${used}`;
    const revoke = document.createElement("button");
    revoke.type = "button";
    revoke.textContent = "Revoke";
    revoke.onclick = () => {
      if (confirm(`Revoke the key "${key.name}"? Agents using it stop working at once.`)) send({ type: "agent_key_revoke", id: key.id });
    };
    li.append(text, revoke);
    return li;
  }));
  $("keys-empty").hidden = keys.length > 0;
  $("key-error").hidden = !message.error;
  $("key-error").textContent = message.error ? "The relay refused it: a key needs a name, and you can have at most 25." : "";
  if (typeof message.created === "string" && /^wb_[0-9a-f]{64}$/.test(message.created)) {
    $("new-key-value").textContent = message.created;
    $("new-key").hidden = false;
    $("copy-key").textContent = "Copy";
  }
}

/** Wires the create form and the copy button; `send` sends one message on the socket. */
export function bindKeys(send) {
  $("key-form").onsubmit = (event) => {
    event.preventDefault();
    const name = $("key-name").value.trim().slice(0, 100);
    if (!name) return;
    send({ type: "agent_key_create", name });
    $("key-name").value = "";
  };
  $("copy-key").onclick = async () => {
    const key = $("new-key-value").textContent;
    try {
      await navigator.clipboard.writeText(key);
      $("copy-key").textContent = "Copied";
    } catch {
      getSelection().selectAllChildren($("new-key-value"));  // no clipboard here: selected for Ctrl+C
      $("copy-key").textContent = "Selected: press Ctrl+C";
    }
  };
  $("hide-key").onclick = () => { $("new-key-value").textContent = ""; $("new-key").hidden = true; };
}

/** Forgets what the page shows of the keys (sign-out). */
export function clearKeys() {
  $("agent-keys").replaceChildren();
  $("new-key-value").textContent = "";
  $("new-key").hidden = true;
  $("key-error").hidden = true;
}
