// Quiet hours and "may wake me" (README "Living with it": quiet hours). The windows are set
// over the phone socket: the relay checks each one (relay.set_quiet_hours) and answers with
// the stored list, or with {type: "error", message} naming the bad window (then nothing was
// stored). During a window an agent the person has not let wake them is told to ask again
// when it ends; no phone is asked. Which agents may wake the person is the person's choice
// alone, made here. The days a window starts on are toggle buttons (aria-pressed).
import { t } from "./i18n.js";

const $ = (id) => document.getElementById(id);
const DAY_NAMES = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"];  // Intl's en-GB weekdays, for the zone check

let windows = [];
let wakers = [];
let onChange = () => {};

function days(list) {
  const sorted = [...list].sort();
  if (sorted.length === 7) return t("quiet.every_day");
  if (sorted.join() === "1,2,3,4,5") return t("quiet.weekdays");
  if (sorted.join() === "6,7") return t("quiet.weekends");
  return sorted.map((day) => (day >= 1 && day <= 7 ? t(`day.${day}`) : "?")).join(", ");
}

/** The window holding now, as {end, zone}; null when none does (checked in each window's zone). */
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

/** Whether any window is set. */
export function hasQuietHours() {
  return windows.length > 0;
}

function renderNow() {
  const now = quietNow();
  $("quiet-now").hidden = !now;
  $("quiet-now").textContent = now ? t("quiet.now", { end: now.end, zone: now.zone }) : "";
  onChange();
}

/** Shows the relay's `quiet_hours` message; `send` sends one message on the socket. */
export function renderQuiet(message, send) {
  windows = Array.isArray(message.windows) ? message.windows : [];
  $("quiet-list").replaceChildren(...windows.map((window, index) => {
    const li = document.createElement("li");
    const text = document.createElement("span");
    text.textContent = t("quiet.row", { days: days(window.days || []), start: window.start, end: window.end, zone: window.time_zone });
    const remove = document.createElement("button");
    remove.type = "button";
    remove.textContent = t("common.remove");
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
  $("quiet-error").textContent = t("quiet.refused", { reason: text });
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
export function mayWakeToggle(agent, send, text = t("always.may_wake")) {
  const label = document.createElement("label");
  label.className = "check";
  const box = document.createElement("input");
  box.type = "checkbox";
  box.checked = mayWake(agent);
  box.onchange = () => send({ type: "may_wake", client_id: agent.client_id, requester_id: agent.requester_id ?? null,
    value: box.checked });
  const span = document.createElement("span");
  span.textContent = text;
  label.append(box, span);
  return label;
}

function dayButtons() {
  $("quiet-days").replaceChildren(...[1, 2, 3, 4, 5, 6, 7].map((day) => {
    const button = document.createElement("button");
    button.type = "button";
    button.className = "day";
    button.dataset.day = String(day);
    button.textContent = t(`day.${day}`);
    button.setAttribute("aria-pressed", "true");
    button.onclick = () => button.setAttribute("aria-pressed", button.getAttribute("aria-pressed") === "true" ? "false" : "true");
    return button;
  }));
}

/** Wires the form that adds a window; `send` sends one message on the socket; `changed` runs when "quiet now" may have changed. */
export function bindQuiet(send, changed = () => {}) {
  onChange = changed;
  dayButtons();
  const zone = $("quiet-zone");
  if (!zone.value) zone.value = Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC";
  const zones = typeof Intl.supportedValuesOf === "function" ? Intl.supportedValuesOf("timeZone") : [];
  $("quiet-zones").replaceChildren(...zones.map((name) => Object.assign(document.createElement("option"), { value: name })));
  $("quiet-form").onsubmit = (event) => {
    event.preventDefault();
    const chosen = [...document.querySelectorAll("#quiet-days button[aria-pressed=true]")].map((button) => Number(button.dataset.day));
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
  onChange();
}
