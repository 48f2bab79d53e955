// The browser phone (APP.md): sign in, hold the phone socket, ask the person on every
// locate, answer with the browser's position, keep a local history without coordinates.
// Names from agents and people are only ever inserted as text (textContent), never HTML.
// The signed-in account's email is always in the header; a token from a URL is taken only
// for a sign-in this page started, or after a confirmation naming the account (and, when
// another account is signed in, naming both) — SPEC §8.
import * as session from "./session.js";
import { PhoneSocket, sendOnce } from "./socket.js";
import { History } from "./history.js";
import { locateOnce } from "./position.js";
import { enablePush, storedSubscription, hasSubscription, unsubscribe, closeNotifications } from "./push.js";
import { renderKeys, bindKeys, clearKeys } from "./keys.js";
import { answerFor, bindPlaces, forgetPlaces } from "./places.js";
import { renderQuiet, quietRefused, keepMayWake, mayWakeToggle, quietNow, bindQuiet, clearQuiet } from "./quiet.js";
import { showGrants, clearGrants } from "./grants.js";
import { bindStopAll, stoppedAll } from "./stop.js";
import { showReminder, renderReminders, answerReminder, forgetReminders } from "./reminders.js";

const $ = (id) => document.getElementById(id);
const history = new History();
const handled = new Set();   // request ids answered or being asked here
const queue = [];            // locate messages waiting for the prompt
let current = null;          // the locate being asked
let countdown = null;
let socket = null;
let socketAccount = null;    // the account whose token the socket holds
let config = {};

function deviceID() {
  let id = localStorage.getItem("whereabot.device_id");
  if (!id) {
    id = crypto.randomUUID();
    localStorage.setItem("whereabot.device_id", id);
  }
  return id;
}

/**
 * The device id belongs to one account (the relay refuses another user's device): when a
 * different account signs in, this browser becomes a new device and forgets the previous
 * account's history and always-allowed list.
 */
function claimDevice(account) {
  const owner = localStorage.getItem("whereabot.device_user");
  if (owner && owner !== account.sub) {
    localStorage.removeItem("whereabot.device_id");
    localStorage.removeItem("whereabot.always_allowed");
    forgetPlaces();
    forgetReminders();
    history.clear();
  }
  localStorage.setItem("whereabot.device_user", account.sub);
}

function hello() {
  return { type: "hello", app_version: "web-1", device_id: deviceID(), device_name: deviceName(), platform: "web" };
}

function deviceName() {
  const saved = localStorage.getItem("whereabot.device_name");
  if (saved) return saved;
  const ua = navigator.userAgent;
  const browser = /Edg\//.test(ua) ? "Edge" : /Firefox\//.test(ua) ? "Firefox" : /Chrom/.test(ua) ? "Chrome" : /Safari\//.test(ua) ? "Safari" : "Browser";
  const system = /Android/.test(ua) ? "Android" : /iPhone|iPad/.test(ua) ? "iOS" : /Mac OS/.test(ua) ? "macOS" : /Windows/.test(ua) ? "Windows" : /Linux/.test(ua) ? "Linux" : "the web";
  return `${browser} on ${system}`;
}

function show(id, visible) { $(id).hidden = !visible; }

let noticeKind = null;   // "connection": cleared when the socket connects again
function notice(text, kind = null) {
  $("notice").textContent = text;
  show("notice", Boolean(text));
  noticeKind = text ? kind : null;
}

/** "Your agent X", "R's agent X", "An agent" — the who of every text. */
function who(message) {
  const agent = message.agent_name;
  const requester = message.requester && message.requester.name;
  if (requester) return agent ? `${requester}'s agent ${agent}` : `${requester}'s agent`;
  return agent ? `Your agent ${agent}` : "An agent";
}

/**
 * The relay's standing decision for `message`'s agent, or null: the ping carries it, made
 * when the ping was, so a removal or a narrowing on any device holds here too. The list
 * this page shows is never consulted to answer unprompted.
 */
function alwaysAllowedFor(message) {
  const decision = message.always_allow;
  if (!decision || typeof decision !== "object") return null;
  return { precision: decision.precision === "approximate" ? "approximate" : "precise" };
}

function entry(message, outcome) {
  // Shared outcomes record how precisely, and from which device (this one).
  const shared = typeof outcome === "object" ? outcome : null;
  history.add({ id: message.id, agent: message.agent_name || message.client_id, client_id: message.client_id,
                requester_name: (message.requester && message.requester.name) || null,
                reason: typeof message.reason === "string" ? message.reason : null,
                outcome: shared ? shared.outcome : outcome, precision: shared ? shared.precision : null,
                device: shared ? deviceName() : null });
  renderHistory();
}

// ---------------------------------------------------------------------------- locate
function onLocate(message) {
  if (handled.has(message.id)) return;   // a resend after reconnect: already asked here
  if (message.expires_ms <= Date.now()) return;
  handled.add(message.id);
  closeNotifications(message.id);
  const allowed = alwaysAllowedFor(message);
  if (allowed) {
    // An approximate always-allow is answered approximately, never precisely.
    answerWithPosition(message, allowed.precision === "approximate").then((outcome) => {
      const shared = outcome.outcome === "shared";
      entry(message, shared ? { ...outcome, outcome: "shared_auto" } : outcome);
      const how = { approximate: " (approximately)", place: " (the place's name only)" }[outcome.precision] || "";
      if (shared) {
        banner(`${message.agent_name || "An agent"} checked your location${how}`);
        markUsed(message);
      }
    });
    return;
  }
  queue.push(message);
  if (!current) next();
}

function next() {
  current = queue.shift() || null;
  clearInterval(countdown);
  show("prompt", Boolean(current));
  if (!current) return;
  const message = current;
  $("prompt-text").textContent = `${who(message)} wants to know your location`;
  // The agent's own words, quoted and attributed; text only, never markup.
  const reason = typeof message.reason === "string" && message.reason ? message.reason : null;
  $("prompt-reason").textContent = reason ? `“${reason}”, says ${message.agent_name || "the agent"}` : "";
  show("prompt-reason", Boolean(reason));
  renderPromptMenu(message);
  const tick = () => {
    const left = Math.ceil((message.expires_ms - Date.now()) / 1000);
    $("prompt-countdown").textContent = left > 0 ? `${left} s left` : "";
    if (Date.now() >= message.expires_ms - 500 && current === message) {
      socket.send({ type: "denied", id: message.id, reason: "no_answer" });
      entry(message, "no_answer");
      next();
    }
  };
  tick();
  countdown = setInterval(tick, 250);
}

/**
 * The prompt's agent menu (SPEC §14): whether quiet hours hold now (then only an agent the
 * person lets wake them gets here) and the "May wake me" mark for this agent.
 */
function renderPromptMenu(message) {
  const quiet = quietNow();
  const name = message.agent_name || "This agent";
  $("prompt-quiet").textContent = quiet ? `Quiet hours now, until ${quiet.end} (${quiet.zone}): ${name} may wake you.` : "";
  show("prompt-quiet", Boolean(quiet));
  if (quiet) $("prompt-menu").open = true;  // why this prompt came in quiet hours
  const agent = { client_id: message.client_id, requester_id: (message.requester && message.requester.user_id) || null };
  $("prompt-wake").replaceChildren(mayWakeToggle(agent, send, `Let ${name} wake me in quiet hours`));
}

async function choose(choice) {
  const message = current;
  if (!message) return;
  next();
  closeNotifications(message.id);
  if (choice === "reject") {
    socket.send({ type: "denied", id: message.id, reason: "user" });
    entry(message, "declined");
    return;
  }
  // An always-allow (for good or for a while) may be approximate: then it answers this
  // request approximately too, and every one it answers later.
  const approximately = choice === "approximate" || ((choice === "always" || choice === "hour") && $("approximately").checked);
  if (choice === "always" || choice === "hour") {
    socket.send({ type: "always_allow", client_id: message.client_id, client_name: message.agent_name || "",
                  requester_id: (message.requester && message.requester.user_id) || null,
                  precision: approximately ? "approximate" : "precise",
                  ...(choice === "hour" ? { expires_in_s: allowForSeconds() } : {}) });
  }
  $("approximately").checked = false;
  const outcome = await answerWithPosition(message, approximately);
  entry(message, outcome);
  if ((choice === "always" || choice === "hour") && outcome.outcome === "shared") markUsed(message);
}

/** How long "Allow for 1 hour" allows an agent (the relay's ALLOW_FOR_SECONDS). */
function allowForSeconds() {
  const seconds = Number(config.allow_for_s);
  return Number.isInteger(seconds) && seconds >= 1 && seconds <= 86400 ? seconds : 3600;
}

/**
 * Reads the position and sends the answer (`approximately`: the grid cell's centre);
 * returns the history outcome: {outcome: "shared", precision} or a failure's name.
 */
async function answerWithPosition(message, approximately = false) {
  const result = await locateOnce(message.expires_ms);
  if (result.fix) {
    // Inside a place of this phone's, the place decides how much is shared (places.js).
    const answer = answerFor(message.id, result.fix, approximately);
    socket.send(answer.message);
    return { outcome: "shared", precision: answer.precision };
  }
  socket.send({ type: "unavailable", id: message.id, reason: result.reason });
  return result.reason === "permission" ? "permission" : "no_fix";
}

function onCancel(message) {
  closeNotifications(message.id);
  const expired = (m) => m.expires_ms <= Date.now();
  if (current && current.id === message.id) {
    entry(current, expired(current) ? "expired" : "other_device");
    next();
    return;
  }
  const index = queue.findIndex((m) => m.id === message.id);
  if (index >= 0) entry(queue.splice(index, 1)[0], "other_device");
}

/** Sends `message` on the phone socket, if there is one now. */
function send(message) {
  if (socket) socket.send(message);
}

function banner(text) {
  $("banner").textContent = text;
  show("banner", true);
  setTimeout(() => show("banner", false), 8000);
}

// ---------------------------------------------------------------------------- lists
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
    renderHistory();
  } catch {
    // No Cache Storage: nothing was answered from a notification.
  }
}

function renderHistory() {
  const list = $("history");
  list.replaceChildren(...history.entries().map((item) => {
    const li = document.createElement("li");
    const text = document.createElement("span");
    const how = item.precision === "approximate" ? " approximately" : item.precision === "place" ? " (the place's name only)" : "";
    const from = item.device ? ` from ${item.device}` : "";
    text.textContent = `${item.requester_name ? item.requester_name + "'s agent " : ""}${item.agent}: ${History.label(item.outcome)}${how}${from}`;
    const time = document.createElement("small");
    time.textContent = new Date(item.at).toLocaleString();
    li.append(text, time);
    if (item.reason) {
      const reason = document.createElement("q");
      reason.className = "history-reason";
      reason.textContent = item.reason;
      li.append(reason);
    }
    return li;
  }));
  show("history-empty", history.entries().length === 0);
}

/**
 * An automatic answer just went to `message`'s agent: its row in the list says so now (the
 * relay's list, with every device's last use, comes at the next hello or change).
 */
function markUsed(message) {
  const agents = storedAlways();
  const requester = (message.requester && message.requester.user_id) || null;
  const row = agents.find((agent) => agent.client_id === message.client_id && (agent.requester_id || null) === requester);
  if (!row) return;
  row.last_used_ms = Date.now();
  renderAlways(agents);
}

/** The always-allowed list as the relay last sent it (kept in localStorage for the page). */
function storedAlways() {
  return JSON.parse(localStorage.getItem("whereabot.always_allowed") || "[]");
}

function renderAlways(agents) {
  localStorage.setItem("whereabot.always_allowed", JSON.stringify(agents));
  $("always-list").replaceChildren(...agents.map((agent) => {
    const li = document.createElement("li");
    const name = document.createElement("span");
    const until = agent.expires_ms
      ? `, until ${new Date(agent.expires_ms).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" })}` : "";
    name.textContent = `${agent.client_name || agent.client_id} (${agent.precision === "approximate" ? "approximate" : "precise"}${until})`;
    const used = document.createElement("small");
    used.className = "last-used";
    used.textContent = agent.last_used_ms
      ? ` last used ${new Date(agent.last_used_ms).toLocaleString([], { dateStyle: "medium", timeStyle: "short" })}` : " not used yet";
    name.append(used);
    const remove = document.createElement("button");
    remove.type = "button";
    remove.textContent = "Remove";
    remove.onclick = () => send({ type: "always_allow_remove", client_id: agent.client_id, requester_id: agent.requester_id });
    li.append(name, mayWakeToggle(agent, send), remove);
    return li;
  }));
  show("always-empty", agents.length === 0);
}

function renderDevices(devices) {
  const mine = deviceID();
  $("devices").replaceChildren(...devices.map((device) => {
    const li = document.createElement("li");
    const name = document.createElement("span");
    name.textContent = `${device.name || "Unnamed"} (${device.platform})${device.id === mine ? " — this browser" : ""}`;
    const remove = document.createElement("button");
    remove.type = "button";
    remove.textContent = "Remove";
    remove.onclick = () => { if (confirm("Remove this device? It is signed out.")) socket.send({ type: "device_remove", device_id: device.id }); };
    li.append(name, remove);
    return li;
  }));
}

// ---------------------------------------------------------------------------- socket
function onMessage(message) {
  if (!socket) return;  // signing out
  switch (message.type) {
    case "locate": onLocate(message); break;
    case "cancel": onCancel(message); break;
    case "reminder": showReminder(message, send); break;
    case "always_allowed": renderAlways(Array.isArray(message.agents) ? message.agents : []); break;
    case "devices": renderDevices(Array.isArray(message.devices) ? message.devices : []); break;
    case "agent_keys": renderKeys(message, send); break;
    case "quiet_hours": renderQuiet(message, send); break;
    case "may_wake":
      keepMayWake(message);
      renderAlways(storedAlways());
      if (current) renderPromptMenu(current);
      break;
    case "error": if (typeof message.message === "string") quietRefused(message.message); break;
    case "stopped_all_sharing":
      renderAlways([]);
      socket.send({ type: "agent_keys" });
      stoppedAll(message, config, session.load()?.access_token);
      break;
    case "push_subscription":
      $("push-status").textContent = message.status === "saved" ? "Notifications are on."
        : message.status === "refused" ? `Notifications refused by the relay (${message.reason}).` : "";
      break;
  }
}

function onState(state) {
  if (!socket) return;  // signing out: the old socket's states no longer count
  const labels = { connecting: "Connecting…", connected: "Connected", disconnected: "Reconnecting…", expired: "Session expired",
                   replaced: "Opened elsewhere", revoked: "Signed out" };
  $("status").textContent = labels[state] || state;
  if (state === "connected") {
    if (noticeKind === "connection") notice("");
    socket.send({ type: "devices" });
    socket.send({ type: "agent_keys" });
    const subscription = storedSubscription();
    if (subscription) socket.send({ type: "push_subscription", ...subscription });
  } else if (state === "replaced") {
    notice("Whereabot is open in another tab or browser with this device. Close this one.", "connection");
  } else if (state === "revoked") {
    localStorage.removeItem("whereabot.device_id");
    signOut("This device was removed. Sign in again.", false);
  } else if (state === "expired") {
    renewOrSignOut();
  }
}

async function renewOrSignOut() {
  const fresh = await session.refresh(config, session.load() || {});
  if (!fresh) return signOut("Your session ended. Sign in again.");
  socket.send({ type: "token", access_token: fresh.access_token });
  scheduleRefresh(fresh);
}

let refreshTimer = null;
function scheduleRefresh(current) {
  clearTimeout(refreshTimer);
  const wait = Math.max(0, session.secondsLeft(current) - 60) * 1000;
  refreshTimer = setTimeout(() => (current.refresh_token ? renewOrSignOut() : signOut("Your session ended. Sign in again.")),
                            current.refresh_token ? wait : session.secondsLeft(current) * 1000);
}

/** Stops the phone socket (no reconnect); the session stays. */
function stopSocket() {
  clearTimeout(refreshTimer);
  if (socket) socket.close();
  socket = null;
  socketAccount = null;
}

// ---------------------------------------------------------------------------- sign-out
const isDeleted = (message) => message.type === "push_subscription" && message.status === "deleted";

/**
 * The relay deletes this device's Web Push subscriptions (over the phone socket when it is
 * up, else over a socket of its own while the token is valid), then the browser unsubscribes
 * at the push service. Returns whether the relay confirmed the delete.
 */
async function forgetPush(phone, signedIn, tellRelay) {
  const wanted = await hasSubscription();
  const message = { type: "push_subscription", endpoint: null };
  let deleted = null;
  if (!tellRelay) {
    // The relay removed the device (and its subscriptions) itself.
  } else if (phone && phone.open) {
    deleted = await phone.request(message, isDeleted, 4000);
  } else if (wanted && signedIn && session.secondsLeft(signedIn) > 0) {
    deleted = await sendOnce({ token: signedIn.access_token, hello: hello(), message, match: isDeleted, timeoutMs: 6000 });
  }
  await unsubscribe();
  return Boolean(deleted);
}

let leaving = null;
/**
 * Signs out (APP.md §A.2): the push subscription deleted (before the socket closes), the
 * socket closed with 1000, the session cleared. `tellRelay` false: the device is gone already.
 */
function signOut(text, tellRelay = true) {
  if (!leaving) {
    leaving = (async () => {
      const phone = socket;
      socket = null;
      socketAccount = null;
      clearTimeout(refreshTimer);
      if (phone && !phone.open) phone.close();  // no reconnect meanwhile: a socket of its own tells the relay
      $("signout").disabled = true;
      try {
        await forgetPush(phone, session.load(), tellRelay);
      } finally {
        if (phone) phone.close();
        session.clear();
        clearKeys();
        clearQuiet();
        clearGrants();
        forgetReminders();
        $("push-status").textContent = "";  // the next account's notifications start off
        $("signout").disabled = false;
        leaving = null;
      }
    })();
  }
  return leaving.then(() => {
    notice(text || "");
    resume();
  });
}

// ---------------------------------------------------------------------------- sign-in
/** The stored session while it is valid, else null. */
function validSession() {
  const current = session.load();
  return current && session.secondsLeft(current) > 0 && session.accountOf(current) ? current : null;
}

function renderAccount(current) {
  const account = session.accountOf(current);
  $("account").textContent = account ? account.email : "";
  $("account").title = account ? `Signed in as ${account.email}` : "";
  show("account", Boolean(account));
}

/** Shows the stored session (connecting its socket once) or the sign-in screen. */
function resume() {
  if (leaving) return;
  show("confirm", false);
  const current = validSession();
  renderAccount(current);
  if (!current) {
    stopSocket();
    session.clear();
    show("home", false);
    show("prompt", false);
    show("signin", true);
    show("supabase-signin", Boolean(config.supabase_url));
    show("local-signin", !config.supabase_url);
    $("status").textContent = "Signed out";
    return;
  }
  claimDevice(session.accountOf(current));
  show("signin", false);
  show("home", true);
  show("push", Boolean(config.vapid_public_key) && "PushManager" in window);
  $("device-name").value = deviceName();
  session.shareWithWorker(current);  // a notification's Reject answers with it
  renderHistory();
  mergeWorkerHistory();
  renderAlways(storedAlways());
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

/** Makes `fresh` the session; `switching`: another account was signed in (it signs out first). */
async function accept(fresh, switching) {
  if (switching) await signOut("");
  else stopSocket();  // the same account, a new token: connect again with it
  session.save(fresh);
  notice("");
  // Signed in on the way to the OAuth consent page: back to it (a path of this page only).
  const back = JSON.parse(localStorage.getItem("whereabot.return_to") || "null");
  localStorage.removeItem("whereabot.return_to");
  // The relay's own flow (`?request=<uuid>`) or Supabase Auth's (`?authorization_id=…`).
  if (back && Date.now() - back.at < 60 * 60 * 1000
      && /^\/app\/oauth\/consent\?(authorization_id=[A-Za-z0-9_-]{1,128}|request=[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})$/
        .test(back.path)) {
    location.assign(back.path);
    return;
  }
  resume();
}

/** A sign-in arriving in the URL (session.takeFragment). */
function arrive(arrival) {
  if (arrival.outcome === "refused") {
    notice("A sign-in link this page did not ask for was ignored. " +
           (validSession() ? "You are still signed in as before." : "Sign in below if you want to."));
    resume();
    return;
  }
  if (arrival.outcome === "failed") {
    notice(`Sign-in failed: ${arrival.text}`);
    resume();
    return;
  }
  const current = validSession();
  const before = session.accountOf(current);
  const after = session.accountOf(arrival.session);
  const switching = Boolean(before) && before.sub !== after.sub;
  if (arrival.outcome === "started" && !switching) {
    accept(arrival.session, false);
    return;
  }
  // A link (or a sign-in that would replace another account): ask, naming the account(s).
  // The token stays in memory only; Cancel forgets it.
  renderAccount(current);
  if (!current) $("status").textContent = "Signed out";
  show("signin", false);
  show("home", false);
  show("confirm", true);
  $("confirm-text").textContent = switching ? `You are signed in as ${before.email}. Switch to ${after.email}?`
    : `Sign in as ${after.email} on this browser?`;
  $("confirm-detail").textContent = (switching ? `${before.email} is signed out here. ` : "") +
    `Locations you share from this browser will go to agents of ${after.email}. ` +
    "Only continue if you made this link yourself (whereabot token --app-link).";
  $("confirm-signin").textContent = switching ? "Switch" : "Sign in";
  $("confirm-signin").onclick = () => {
    $("confirm-signin").onclick = $("confirm-cancel").onclick = null;
    accept(arrival.session, switching);
  };
  $("confirm-cancel").onclick = () => {
    $("confirm-signin").onclick = $("confirm-cancel").onclick = null;
    notice(current ? "" : "Not signed in.");
    resume();
  };
}

/** On load, and when only the fragment changes (a same-document navigation). */
function start() {
  const arrival = session.takeFragment();
  if (arrival) arrive(arrival);
  else resume();
}

/**
 * Another tab signed this browser out or into another account: this tab never keeps a socket
 * for the account it no longer holds (and does not take the device's socket from that tab).
 */
function onStorage(event) {
  if (event.key !== "whereabot.session" || leaving || !socketAccount) return;
  const now = session.accountOf(validSession());
  if (now && now.sub === socketAccount.sub) return;
  stopSocket();
  if (!now) {
    resume();
    return;
  }
  renderAccount(validSession());
  show("home", false);
  show("prompt", false);
  $("status").textContent = "Opened elsewhere";
  notice(`Another tab signed this browser in as ${now.email}. Reload this tab to use it.`);
}

async function main() {
  config = await fetch("/app/config.json").then((r) => r.json()).catch(() => ({}));
  $("reject").onclick = () => choose("reject");
  $("allow").onclick = () => choose("allow");
  $("approximate").onclick = () => choose("approximate");
  $("hour").onclick = () => choose("hour");
  $("always").onclick = () => choose("always");
  $("signout").onclick = () => signOut("");
  addEventListener("hashchange", () => { const arrival = session.takeFragment(); if (arrival) arrive(arrival); });
  addEventListener("storage", onStorage);
  $("google").onclick = () => session.signInWithGoogle(config);
  $("email-form").onsubmit = async (event) => {
    event.preventDefault();
    show("email-sent", await session.emailLink(config, $("email").value));
  };
  $("rename-form").onsubmit = (event) => {
    event.preventDefault();
    const name = $("device-name").value.trim().slice(0, 100);
    localStorage.setItem("whereabot.device_name", name);
    socket.send({ type: "device_rename", device_id: deviceID(), name });
  };
  bindKeys(send);
  bindQuiet(send);
  bindPlaces();
  bindStopAll(() => ({ always: storedAlways().length,
                       keys: document.querySelectorAll("#agent-keys li").length,
                       grants: document.querySelectorAll("#grants li").length }),
              send);
  $("enable-push").onclick = async () => {
    const result = await enablePush(config.vapid_public_key);
    $("push-status").textContent = result.text;
    if (result.subscription) socket.send({ type: "push_subscription", ...result.subscription });
  };
  if ("serviceWorker" in navigator) {
    navigator.serviceWorker.register("/app/sw.js", { scope: "/app/" }).catch(() => {});
    navigator.serviceWorker.addEventListener("message", (event) => {
      // Keep or Remove tapped on a reminder's notification; anything else: reconnect now.
      if (event.data && event.data.type === "reminder_answer") answerReminder(event.data.reminder, event.data.choice, send);
      else if (socket) socket.soon(0);
    });
  }
  renderReminders(send);
  start();
}

main();
