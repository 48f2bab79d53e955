// Agent keys (README "Try it with an MCP client": shown once): for agents that cannot
// sign in with OAuth. Created, listed and revoked over the phone socket (the relay calls
// relay.create_agent_key / agent_keys / revoke_agent_key with the socket's user); the
// plaintext key arrives once, is shown once with a copy button, and is never stored here.
import { t, dateTime } from "./i18n.js";

const $ = (id) => document.getElementById(id);

/** Shows the relay's `agent_keys` message: the live keys, a new key once, or a refusal. */
export function renderKeys(message, send) {
  const keys = Array.isArray(message.keys) ? message.keys : [];
  $("agent-keys").replaceChildren(...keys.map((key) => {
    const li = document.createElement("li");
    const text = document.createElement("span");
    const used = key.last_used_at ? t("common.last_used", { time: dateTime(key.last_used_at) }) : t("common.never_used");
    text.textContent = t("keys.row", { name: key.name, prefix: key.prefix, created: dateTime(key.created_at), used });
    const revoke = document.createElement("button");
    revoke.type = "button";
    revoke.textContent = t("common.revoke");
    revoke.onclick = () => {
      if (confirm(t("keys.revoke_confirm", { name: key.name }))) send({ type: "agent_key_revoke", id: key.id });
    };
    li.append(text, revoke);
    return li;
  }));
  $("keys-loading").hidden = true;
  $("keys-empty").hidden = keys.length > 0;
  $("key-error").hidden = !message.error;
  $("key-error").textContent = message.error ? t("keys.refused") : "";
  if (typeof message.created === "string" && /^wb_[0-9a-f]{64}$/.test(message.created)) {
    $("new-key-value").textContent = message.created;
    $("new-key").hidden = false;
    $("copy-key").textContent = t("keys.copy");
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
      $("copy-key").textContent = t("keys.copied");
    } catch {
      getSelection().selectAllChildren($("new-key-value"));  // no clipboard here: selected for Ctrl+C
      $("copy-key").textContent = t("keys.selected");
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
  $("keys-empty").hidden = true;
  $("keys-loading").hidden = false;
}
