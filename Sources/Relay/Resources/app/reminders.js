// Reminders of standing grants (README "Living with it": reminders): when an agent this account
// always allows for good has been allowed GRANT_REMINDER_DAYS since it was chosen or kept, the
// relay follows its next automatic answer with `{"type":"reminder",...}`. The page shows it as a
// card above the history, kept (at most 20) until answered, and as a notification with Keep and
// Remove when notifications are on; either answer goes over the phone socket (`always_allow_keep`,
// `always_allow_remove`), from the card or, through the service worker, from the notification.

import { t } from "./i18n.js";

const $ = (id) => document.getElementById(id);
const KEY = "whereabot.reminders";
const LIMIT = 20;

function stored() {
  try {
    const list = JSON.parse(localStorage.getItem(KEY) || "[]");
    return Array.isArray(list) ? list : [];
  } catch {
    return [];
  }
}

function save(list) { localStorage.setItem(KEY, JSON.stringify(list.slice(0, LIMIT))); }

const same = (a, b) => a.client_id === b.client_id && (a.requester_id || null) === (b.requester_id || null);
const tag = (reminder) => `reminder:${reminder.client_id}:${reminder.requester_id || ""}`;

/** Only the fields the page uses, each checked: the relay's message or the worker's copy. */
function clean(message) {
  if (!message || typeof message.client_id !== "string" || !message.client_id || message.client_id.length > 255
      || typeof message.text !== "string" || !message.text || message.text.length > 300) return null;
  return { client_id: message.client_id,
           requester_id: typeof message.requester_id === "string" ? message.requester_id : null,
           text: message.text };  // the relay's sentence (GrantReminder.text), shown as text only
}

/** Shows the stored reminders; `send` answers one over the socket. */
export function renderReminders(send) {
  $("reminders").replaceChildren(...stored().map((reminder) => {
    const li = document.createElement("li");
    const text = document.createElement("span");
    text.textContent = reminder.text;
    const keep = document.createElement("button");
    keep.type = "button";
    keep.textContent = t("reminder.keep");
    keep.onclick = () => answerReminder(reminder, "keep", send);
    const remove = document.createElement("button");
    remove.type = "button";
    remove.textContent = t("common.remove");
    remove.onclick = () => answerReminder(reminder, "remove", send);
    li.append(text, keep, remove);
    return li;
  }));
  $("reminders").hidden = stored().length === 0;
}

/** A `reminder` from the relay: a card, and a notification with Keep and Remove. */
export async function showReminder(message, send) {
  const reminder = clean(message);
  if (!reminder) return;
  save([reminder, ...stored().filter((other) => !same(other, reminder))]);
  renderReminders(send);
  try {
    if (Notification.permission !== "granted" || !("serviceWorker" in navigator)) return;
    const registration = await navigator.serviceWorker.ready;
    await registration.showNotification(t("app.title"), {
      body: reminder.text, tag: tag(reminder), data: { reminder },
      actions: [{ action: "keep", title: t("reminder.keep") }, { action: "remove", title: t("common.remove") }] });
  } catch {
    // No notification here: the card stays until it is answered.
  }
}

/** Keep or Remove (`choice`) for `reminder`, from the card or the notification. */
export function answerReminder(message, choice, send) {
  const reminder = clean(message);
  if (!reminder || (choice !== "keep" && choice !== "remove")) return;
  send({ type: choice === "keep" ? "always_allow_keep" : "always_allow_remove",
         client_id: reminder.client_id, requester_id: reminder.requester_id });
  save(stored().filter((other) => !same(other, reminder)));
  renderReminders(send);
  navigator.serviceWorker?.getRegistration?.("/app/")
    .then((registration) => registration && registration.getNotifications({ tag: tag(reminder) }))
    .then((notes) => (notes || []).forEach((note) => note.close())).catch(() => {});
}

/** Forgets the reminders (sign-out, another account). */
export function forgetReminders() {
  localStorage.removeItem(KEY);
  $("reminders").replaceChildren();
  $("reminders").hidden = true;
}
