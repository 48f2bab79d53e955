// The request history on this device (APP.md §A.4): newest first, at most 200 entries,
// and never a coordinate or an accuracy — only who asked, why they said they asked, when,
// and what happened.

const KEY = "whereabot.history";
const LIMIT = 200;
const LABELS = {
  shared: "Shared", shared_auto: "Shared automatically", declined: "Declined", no_answer: "Not answered",
  permission: "Location access is off", no_fix: "No location fix", other_device: "Answered on another device",
  expired: "Timed out", declined_notification: "Declined from a notification",
};

export class History {
  static label(outcome) {
    return LABELS[outcome] || outcome;
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
