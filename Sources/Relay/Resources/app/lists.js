// The lists the relay keeps for this account and the page shows (README "Try it in a
// browser"): the always-allowed agents (Agents: precision, end, last use, May wake me,
// Remove), this account's devices (Devices), and this browser's history (Requests, and its
// newest entry on home). Names are only ever inserted as text.
import { t, dateTime, clock } from "./i18n.js";
import { historyRow } from "./history.js";
import { mayWakeToggle } from "./quiet.js";

const $ = (id) => document.getElementById(id);
const ALWAYS = "whereabot.always_allowed";

/** The always-allowed list as the relay last sent it (kept in localStorage for the page). */
export function storedAlways() {
  try {
    const list = JSON.parse(localStorage.getItem(ALWAYS) || "[]");
    return Array.isArray(list) ? list : [];
  } catch {
    return [];
  }
}

/** Shows `agents` (and keeps them); `send` sends one message on the socket. */
export function renderAlways(agents, send) {
  localStorage.setItem(ALWAYS, JSON.stringify(agents));
  $("always-list").replaceChildren(...agents.map((agent) => {
    const li = document.createElement("li");
    const name = document.createElement("span");
    const precision = t(agent.precision === "approximate" ? "always.approximate" : "always.precise");
    name.textContent = t("always.row", { agent: agent.client_name || agent.client_id,
      precision: agent.expires_ms ? t("always.until", { precision, time: clock(agent.expires_ms) }) : precision });
    const used = document.createElement("small");
    used.className = "last-used";
    used.textContent = agent.last_used_ms
      ? t("common.last_used", { time: dateTime(agent.last_used_ms) })
      : t("always.not_used");
    name.append(" ", used);
    const remove = document.createElement("button");
    remove.type = "button";
    remove.textContent = t("common.remove");
    remove.onclick = () => send({ type: "always_allow_remove", client_id: agent.client_id, requester_id: agent.requester_id });
    li.append(name, mayWakeToggle(agent, send), remove);
    return li;
  }));
  $("always-empty").hidden = agents.length > 0;
}

/**
 * An automatic answer just went to `message`'s agent: its row in the list says so now (the
 * relay's list, with every device's last use, comes at the next hello or change).
 */
export function markUsed(message, send) {
  const agents = storedAlways();
  const requester = (message.requester && message.requester.user_id) || null;
  const row = agents.find((agent) => agent.client_id === message.client_id && (agent.requester_id || null) === requester);
  if (!row) return;
  row.last_used_ms = Date.now();
  renderAlways(agents, send);
}

/** This account's devices, this browser marked; Remove signs a device out after a confirmation. */
export function renderDevices(devices, mine, send) {
  $("devices-loading").hidden = true;
  $("devices").replaceChildren(...devices.map((device) => {
    const li = document.createElement("li");
    const name = document.createElement("span");
    const fields = { name: device.name || t("devices.unnamed"), platform: device.platform };
    name.textContent = t(device.id === mine ? "devices.row.this" : "devices.row", fields);
    const remove = document.createElement("button");
    remove.type = "button";
    remove.textContent = t("common.remove");
    remove.onclick = () => { if (confirm(t("devices.remove_confirm"))) send({ type: "device_remove", device_id: device.id }); };
    li.append(name, remove);
    return li;
  }));
}

/** Forgets the devices shown (sign-out). */
export function clearDevices() {
  $("devices").replaceChildren();
  $("devices-loading").hidden = false;
}

/** The history in Requests, and its newest entry on home. */
export function renderHistory(history) {
  const entries = history.entries();
  $("history").replaceChildren(...entries.map(historyRow));
  $("history-empty").hidden = entries.length > 0;
  $("last").replaceChildren(...entries.slice(0, 1).map(historyRow));
  $("last-empty").hidden = entries.length > 0;
}
