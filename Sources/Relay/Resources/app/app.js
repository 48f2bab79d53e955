// The browser phone (docs/protocol.md "The browser phone"; README "Try it in a browser"): the
// wiring. It holds the phone socket and hands each message to the module that owns it: the prompt
// (asking.js over the consent queue, queue.js), the lists (lists.js, keys.js, grants.js, quiet.js,
// places.js), home (home.js), sign-in and sign-out (signin.js); the views are routes (router.js).
// Names from agents and people are only ever inserted as text (textContent), never HTML.
import * as session from "./session.js";
import { PhoneSocket } from "./socket.js";
import { History } from "./history.js";
import { t, localize } from "./i18n.js";
import { enablePush, storedSubscription } from "./push.js";
import { renderKeys, bindKeys, clearKeys } from "./keys.js";
import { bindPlaces } from "./places.js";
import { renderQuiet, quietRefused, keepMayWake, bindQuiet, clearQuiet } from "./quiet.js";
import { showGrants, clearGrants } from "./grants.js";
import { bindStopAll, stoppedAll } from "./stop.js";
import { showReminder, renderReminders, answerReminder, forgetReminders } from "./reminders.js";
import { deviceID, deviceName, claimDevice, hello } from "./device.js";
import { startAsking, onLocate, onCancel, renderPromptMenu, renderPromptQuiet, stopAsking } from "./asking.js";
import { storedAlways, renderAlways, markUsed, renderDevices, clearDevices, renderHistory } from "./lists.js";
import { setReach, renderHome } from "./home.js";
import { startRouter, showViews } from "./router.js";
import { startSignIn, signOut, isLeaving, validSession, renderAccount } from "./signin.js";

const $ = (id) => document.getElementById(id);
const history = new History();
let socket = null;
let socketAccount = null;    // the account whose token the socket holds
let config = {};

let noticeKind = null;   // "connection": cleared when the socket connects again
function notice(text, kind = null) {
  $("notice").textContent = text;
  $("notice").hidden = !text;
  noticeKind = text ? kind : null;
}

/** Adds an answer to the history: `outcome` a name, or {outcome, precision} when shared from here. */
function record(message, outcome) {
  const shared = typeof outcome === "object" ? outcome : null;
  history.add({ id: message.id, agent: message.agent_name || message.client_id, client_id: message.client_id,
                requester_name: (message.requester && message.requester.name) || null,
                reason: typeof message.reason === "string" ? message.reason : null,
                outcome: shared ? shared.outcome : outcome, precision: shared ? shared.precision : null,
                device: shared ? deviceName() : null });
  renderHistory(history);
}

/** Sends `message` on the phone socket, if there is one now. */
function send(message) {
  if (socket) socket.send(message);
}

let bannerTimer = null;
function banner(text) {
  $("banner").textContent = text;
  $("banner").hidden = false;
  clearTimeout(bannerTimer);
  bannerTimer = setTimeout(() => { $("banner").hidden = true; }, 8000);
}

/** Adds the answers the service worker gave from notifications (Reject) to the history. */
async function mergeWorkerHistory() {
  try {
    const cache = await caches.open(session.WORKER_CACHE);
    const stored = await cache.match("/app/worker-history");
    if (!stored) return;
    await cache.delete("/app/worker-history");
    const entries = await stored.json();
    for (const item of Array.isArray(entries) ? entries.reverse() : []) {
      if (typeof item.id !== "string" || typeof item.outcome !== "string") continue;
      history.add({ id: item.id, agent: item.agent, client_id: item.client_id, requester_name: null, reason: item.reason,
                    outcome: item.outcome === "declined" ? "declined_notification" : "other_device" });
    }
    renderHistory(history);
  } catch {
    // No Cache Storage: nothing was answered from a notification.
  }
}

// ---------------------------------------------------------------------------- socket
function onMessage(message) {
  if (!socket) return;  // signing out
  switch (message.type) {
    case "locate": onLocate(message); break;
    case "cancel": onCancel(message); break;
    case "reminder": showReminder(message, send); break;
    case "always_allowed": renderAlways(Array.isArray(message.agents) ? message.agents : [], send); break;
    case "devices": renderDevices(Array.isArray(message.devices) ? message.devices : [], deviceID(), send); break;
    case "agent_keys": renderKeys(message, send); break;
    case "quiet_hours": renderQuiet(message, send); break;
    case "may_wake":
      keepMayWake(message);
      renderAlways(storedAlways(), send);
      renderPromptMenu();
      break;
    case "error": if (typeof message.message === "string") quietRefused(message.message); break;
    case "stopped_all_sharing":
      renderAlways([], send);
      socket.send({ type: "agent_keys" });
      stoppedAll(message, config, session.load()?.access_token);
      break;
    case "push_subscription":
      $("push-status").textContent = message.status === "saved" ? t("notify.on")
        : message.status === "refused" ? t("notify.refused", { reason: message.reason }) : "";
      if (message.status === "saved" || message.status === "refused") setReach({ push: message.status === "saved" ? "on" : "refused" });
      break;
  }
}

function status(state) {
  $("status").textContent = t(`status.${state}`);
  setReach({ connection: state });
}

function onState(state) {
  if (!socket) return;  // signing out: the old socket's states no longer count
  status(state);
  if (state === "connected") {
    if (noticeKind === "connection") notice("");
    socket.send({ type: "devices" });
    socket.send({ type: "agent_keys" });
    const subscription = storedSubscription();
    if (subscription) socket.send({ type: "push_subscription", ...subscription });
  } else if (state === "replaced") {
    notice(t("notice.replaced"), "connection");
  } else if (state === "revoked") {
    localStorage.removeItem("whereabot.device_id");
    signOut(t("notice.removed"), false);
  } else if (state === "expired") {
    renewOrSignOut();
  }
}

async function renewOrSignOut() {
  const fresh = await session.refresh(config, session.load() || {});
  if (!fresh) return signOut(t("notice.session_ended"));
  socket.send({ type: "token", access_token: fresh.access_token });
  scheduleRefresh(fresh);
}

let refreshTimer = null;
function scheduleRefresh(current) {
  clearTimeout(refreshTimer);
  const wait = Math.max(0, session.secondsLeft(current) - 60) * 1000;
  refreshTimer = setTimeout(() => (current.refresh_token ? renewOrSignOut() : signOut(t("notice.session_ended"))),
                            current.refresh_token ? wait : session.secondsLeft(current) * 1000);
}

/** Stops the phone socket (no reconnect); the session stays. */
function stopSocket() {
  clearTimeout(refreshTimer);
  if (socket) socket.close();
  socket = null;
  socketAccount = null;
}

/** Takes the phone socket away (sign-out): the caller closes it. */
function takeSocket() {
  const phone = socket;
  socket = null;
  socketAccount = null;
  clearTimeout(refreshTimer);
  return phone;
}

/** What a sign-out forgets on the page (the session itself is signin.js's). */
function forgetPage() {
  stopAsking();
  clearKeys();
  clearQuiet();
  clearGrants();
  clearDevices();
  forgetReminders();
  $("push-status").textContent = "";  // the next account's notifications start off
  setReach({ push: "off" });
}

/** Shows the stored session (connecting its socket once) or the sign-in screen. */
function resume() {
  if (isLeaving()) return;
  $("confirm").hidden = true;
  const current = validSession();
  renderAccount(current);
  if (!current) {
    stopSocket();
    session.clear();
    stopAsking();
    showViews(false);
    $("signin").hidden = false;
    $("supabase-signin").hidden = !config.supabase_url;
    $("local-signin").hidden = Boolean(config.supabase_url);
    $("status").textContent = t("status.signed_out");
    return;
  }
  claimDevice(session.accountOf(current), history);
  $("signin").hidden = true;
  showViews(true);
  const pushable = Boolean(config.vapid_public_key) && "PushManager" in window;
  $("push").hidden = !pushable;
  setReach({ push: !pushable ? "unavailable" : storedSubscription() && Notification.permission === "granted" ? "on" : "off" });
  $("device-name").value = deviceName();
  session.shareWithWorker(current);  // a notification's Reject answers with it
  renderHistory(history);
  mergeWorkerHistory();
  renderAlways(storedAlways(), send);
  if (socket) return;
  showGrants(config, current.access_token);
  socket = new PhoneSocket({
    // A refreshed token of the same account; never another account's (another tab may switch).
    token: () => {
      const stored = session.load();
      const account = session.accountOf(stored);
      return (account && account.sub === socketAccount?.sub ? stored : current).access_token;
    },
    hello,
    onMessage,
    onState,
  });
  socketAccount = session.accountOf(current);
  socket.connect();
  scheduleRefresh(current);
}

/**
 * Another tab signed this browser out or into another account: this tab never keeps a socket
 * for the account it no longer holds (and does not take the device's socket from that tab).
 */
function onStorage(event) {
  if (event.key !== "whereabot.session" || isLeaving() || !socketAccount) return;
  const now = session.accountOf(validSession());
  if (now && now.sub === socketAccount.sub) return;
  stopSocket();
  if (!now) {
    resume();
    return;
  }
  renderAccount(validSession());
  showViews(false);
  stopAsking();
  status("replaced");
  notice(t("notice.other_tab", { email: now.email }));
}

function bindForms() {
  $("rename-form").onsubmit = (event) => {
    event.preventDefault();
    const name = $("device-name").value.trim().slice(0, 100);
    localStorage.setItem("whereabot.device_name", name);
    send({ type: "device_rename", device_id: deviceID(), name });
    $("rename-done").hidden = false;
  };
  bindKeys(send);
  bindQuiet(send, () => { renderHome(); renderPromptQuiet(); });
  bindPlaces();
  bindStopAll(() => ({ always: storedAlways().length,
                       keys: document.querySelectorAll("#agent-keys li").length,
                       grants: document.querySelectorAll("#grants li").length }),
              send);
  $("enable-push").onclick = async () => {
    const result = await enablePush(config.vapid_public_key);
    $("push-status").textContent = result.text;
    if (result.subscription) send({ type: "push_subscription", ...result.subscription });
  };
}

async function main() {
  localize();
  config = await fetch("/app/config.json").then((r) => r.json()).catch(() => ({}));
  status("connecting");
  startAsking({ send, record, banner, markUsed: (message) => markUsed(message, send),
                allowForSeconds: () => Number(config.allow_for_s) });
  bindForms();
  startRouter(() => {});
  addEventListener("storage", onStorage);
  if ("serviceWorker" in navigator) {
    navigator.serviceWorker.register("/app/sw.js", { scope: "/app/" }).catch(() => {});
    navigator.serviceWorker.addEventListener("message", (event) => {
      // Keep or Remove tapped on a reminder's notification; anything else: reconnect now.
      if (event.data && event.data.type === "reminder_answer") answerReminder(event.data.reminder, event.data.choice, send);
      else if (socket) socket.soon(0);
    });
  }
  renderReminders(send);
  startSignIn({ config: () => config, resume, stopSocket, takeSocket, forgetPage, notice, hello, status });
}

main();
