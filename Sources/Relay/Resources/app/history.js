// The request history on this device (docs/protocol.md "Answering"): newest first, at most 200 entries,
// and never a coordinate or an accuracy — only who asked, why they said they asked, when,
// and what happened. Shown in Requests, its newest entry on home.
import { t, dateTime } from "./i18n.js";

const KEY = "whereabot.history";
const LIMIT = 200;
const OUTCOMES = ["shared", "shared_auto", "declined", "no_answer", "permission", "no_fix", "other_device", "expired",
                  "declined_notification"];

export class History {
  static label(outcome) {
    return OUTCOMES.includes(outcome) ? t(`outcome.${outcome}`) : String(outcome);
  }

  entries() {
    try {
      const list = JSON.parse(localStorage.getItem(KEY) || "[]");
      return Array.isArray(list) ? list : [];
    } catch {
      return [];
    }
  }

  /** Forgets every entry (another account signs in on this browser). */
  clear() {
    localStorage.removeItem(KEY);
  }

  add({ id, agent, client_id, requester_name, reason, outcome, precision = null, device = null }) {
    const item = { id, at: Date.now(), agent: String(agent || ""), client_id, requester_name,
                   reason: typeof reason === "string" ? reason.slice(0, 120) : null, outcome,
                   precision: ["approximate", "precise", "place"].includes(precision) ? precision : null,
                   device: typeof device === "string" ? device.slice(0, 100) : null };
    const list = [item, ...this.entries().filter((e) => !(e.id === id && e.outcome === outcome))].slice(0, LIMIT);
    localStorage.setItem(KEY, JSON.stringify(list));
  }
}

/** One entry as a list row: who and what happened (how precisely, from which device), when, and the agent's reason. */
export function historyRow(item) {
  const li = document.createElement("li");
  const text = document.createElement("span");
  const who = item.requester_name ? t("history.who.shared", { owner: item.requester_name, agent: item.agent }) : item.agent;
  const parts = [History.label(item.outcome)];
  if (item.precision === "approximate") parts.push(t("history.how.approximate"));
  if (item.precision === "place") parts.push(t("history.how.place"));
  if (item.device) parts.push(t("history.from", { device: item.device }));
  text.textContent = t("history.line", { who, what: parts.join(" ") });
  const time = document.createElement("small");
  time.textContent = dateTime(item.at);
  li.append(text, time);
  if (item.reason) {
    const reason = document.createElement("q");
    reason.className = "history-reason";
    reason.textContent = item.reason;
    li.append(reason);
  }
  return li;
}
