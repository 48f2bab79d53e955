// Quiet hours and "may wake me" (SPEC §14). The windows are set over the phone socket: the
// relay checks each one (relay.set_quiet_hours) and answers with the stored list, or with
// {type: "error", message} naming the bad window (then nothing was stored). During a window
// an agent the person has not let wake them is told to ask again when it ends; no phone
// is asked. Which agents may wake the person is the person's choice alone, made here.
const $ = (id) => document.getElementById(id);
const DAY_NAMES = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"];

let windows = [];
let wakers = [];

function days(list) {
  const sorted = [...list].sort();
  if (sorted.length === 7) return "Every day";
  if (sorted.join() === "1,2,3,4,5") return "Mon–Fri";
  if (sorted.join() === "6,7") return "Weekends";
  return sorted.map((day) => DAY_NAMES[day - 1] || "?").join(", ");
}

/** The window holding now, as {end}; null when none does (checked in each window's zone). */
export function quietNow(now = new Date()) {
  for (const window of windows) {
    let parts;
    try {
      parts = Object.fromEntries(new Intl.DateTimeFormat("en-GB", { timeZone: window.time_zone, weekday: "short",
        hour: "2-digit", minute: "2-digit", hourCycle: "h23" }).formatToParts(now).map((part) => [part.type, part.value]));
    } catch {
      continue;  // a zone this browser does not know
    }
    const today = DAY_NAMES.indexOf(parts.weekday) + 1;
    const yesterday = today === 1 ? 7 : today - 1;
    const clock = `${parts.hour}:${parts.minute}`;
    const holds = window.start < window.end
      ? window.days.includes(today) && clock >= window.start && clock < window.end
      : (window.days.includes(today) && clock >= window.start) || (window.days.includes(yesterday) && clock < window.end);
    if (holds) return { end: window.end, zone: window.time_zone };
  }
  return null;
}

function renderNow() {
  const now = quietNow();
  $("quiet-now").hidden = !now;
  $("quiet-now").textContent = now
    ? `Quiet hours now, until ${now.end} (${now.zone}). Agents you have not let wake you are told to ask again then.` : "";
}

/** Shows the relay's `quiet_hours` message; `send` sends one message on the socket. */
export function renderQuiet(message, send) {
  windows = Array.isArray(message.windows) ? message.windows : [];
  $("quiet-list").replaceChildren(...windows.map((window, index) => {
    const li = document.createElement("li");
    const text = document.createElement("span");
    text.textContent = `${days(window.days || [])}, ${window.start}–${window.end} (${window.time_zone})`;
    const remove = document.createElement("button");
    remove.type = "button";
    remove.textContent = "Remove";
    remove.onclick = () => send({ type: "quiet_hours", windows: windows.filter((_, other) => other !== index) });
    li.append(text, remove);
    return li;
  }));
  $("quiet-empty").hidden = windows.length > 0;
  $("quiet-error").hidden = true;
  renderNow();
}

/** The relay refused a change: its sentence says which window and why. */
export function quietRefused(text) {
  $("quiet-error").textContent = `Not saved: ${text}`;
  $("quiet-error").hidden = false;
}

/** Keeps the relay's `may_wake` list (shown as a checkbox on each always-allowed agent). */
export function keepMayWake(message) {
  wakers = Array.isArray(message.agents) ? message.agents : [];
}

/** Whether `agent` ({client_id, requester_id}) may wake the person in quiet hours. */
export function mayWake(agent) {
  return wakers.some((waker) => waker.client_id === agent.client_id && (waker.requester_id ?? null) === (agent.requester_id ?? null));
}

/** A "May wake me" checkbox for `agent` (labelled `text`), sending the person's choice when it changes. */
export function mayWakeToggle(agent, send, text = "May wake me") {
  const label = document.createElement("label");
  const box = document.createElement("input");
  box.type = "checkbox";
  box.checked = mayWake(agent);
  box.onchange = () => send({ type: "may_wake", client_id: agent.client_id, requester_id: agent.requester_id ?? null,
    value: box.checked });
  label.append(box, ` ${text}`);
  return label;
}

/** Wires the form that adds a window; `send` sends one message on the socket. */
export function bindQuiet(send) {
  const zone = $("quiet-zone");
  if (!zone.value) zone.value = Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC";
  $("quiet-form").onsubmit = (event) => {
    event.preventDefault();
    const chosen = [...document.querySelectorAll("input[name=quiet-day]:checked")].map((box) => Number(box.value));
    send({ type: "quiet_hours", windows: [...windows, { days: chosen, start: $("quiet-start").value,
      end: $("quiet-end").value, time_zone: zone.value.trim() }] });
  };
  setInterval(renderNow, 30_000);
}

/** Forgets what the page shows of quiet hours (sign-out). */
export function clearQuiet() {
  windows = [];
  wakers = [];
  $("quiet-list").replaceChildren();
  $("quiet-now").hidden = true;
  $("quiet-error").hidden = true;
}
