// The service worker (docs/protocol.md "Notifications and the service worker"). It cannot read the
// location, so a push only brings the person to the page: every push shows a notification (tag =
// request id); a tap, or its Allow action, opens /app/?request=<id>, where the relay resends the
// waiting request and the prompt appears. Its Reject action answers "denied" here, through POST
// /v1/device/answer with the session the page left in WORKER_CACHE, and opens no window (README
// "Try it in a browser"); the page adds the entry to its history when it next opens. A reminder's
// push (README "Living with it": reminders) shows Keep and Remove, which answer the same way: from
// an open page, or from here with no window. The worker's own texts (the fallback body, the action
// titles) come from strings.json in the browser's language, as the page's do; the relay writes the
// title and body of every other push.

const SHELL = "whereabot-shell-v1";
const WORKER_CACHE = "whereabot-worker";  // session.js's: the access token, and history entries for the page
const WORKER_SESSION = "/app/worker-session";
const WORKER_HISTORY = "/app/worker-history";
const MODULES = ["app", "asking", "catalog", "device", "grants", "history", "home", "i18n", "keys", "lists", "places", "position", "push",
                 "queue", "quiet", "reminders", "router", "session", "signin", "socket", "stop"];
const FILES = ["/app/", ...MODULES.map((name) => `/app/${name}.js`), "/app/strings.json", "/app/app.css",
               "/app/manifest.webmanifest", "/app/icon-192.png", "/app/icon-512.png", "/app/icon-maskable-192.png",
               "/app/icon-maskable-512.png"];

let texts = null;
/** The catalog's texts in the browser's language (catalog.js's rule: the first of
 *  navigator.languages the catalog holds, else English), read once per worker life from the
 *  shell's copy (the page's own loads keep it fresh), else from the network within 3 s. */
async function strings() {
  if (texts) return texts;
  let catalog = {};
  try {
    const cached = await caches.open(SHELL).then((cache) => cache.match("/app/strings.json"));
    catalog = await (cached || await fetch("/app/strings.json", { signal: AbortSignal.timeout(3000) })).json();
  } catch {
    catalog = {};  // the keys themselves: a notification still shows
  }
  const preferences = (self.navigator && self.navigator.languages) || [];
  const language = preferences.map((tag) => String(tag).toLowerCase().split(/[-_]/)[0]).find((primary) => primary in catalog) || "en";
  const found = { ...(catalog.en || {}), ...(catalog[language] || {}) };
  if (Object.keys(found).length) texts = found;  // a failed read is tried again at the next push
  return found;
}

/** The text of `key` (sw.*), the key itself when the catalog cannot be read. */
async function text(key) {
  return (await strings())[key] || key;
}

self.addEventListener("install", (event) => {
  self.skipWaiting();
  event.waitUntil(caches.open(SHELL).then((cache) => cache.addAll(FILES)).catch(() => {}));
});

self.addEventListener("activate", (event) => event.waitUntil(self.clients.claim()));

// Network first for the app shell, so the history opens offline; config and the API never.
// Cached by path: /app/?request=… and a sign-in's /app/?state=… are the same page (and a
// state never stays in the cache).
self.addEventListener("fetch", (event) => {
  const url = new URL(event.request.url);
  if (event.request.method !== "GET" || url.origin !== location.origin || !FILES.includes(url.pathname)) return;
  event.respondWith(fetch(event.request).then((response) => {
    const copy = response.clone();
    if (response.ok) caches.open(SHELL).then((cache) => cache.put(url.pathname, copy));
    return response;
  }).catch(() => caches.match(url.pathname)));
});

/** A reminder push's fields the notification needs (reminders.js's shape), or null when they do not fit. */
function reminderOf(data) {
  if (!data || data.kind !== "reminder" || typeof data.client_id !== "string" || !data.client_id || data.client_id.length > 255
      || typeof data.body !== "string" || !data.body || data.body.length > 300) return null;
  return { client_id: data.client_id, requester_id: typeof data.requester_id === "string" ? data.requester_id : null, text: data.body };
}

self.addEventListener("push", (event) => {
  let data = null;
  try { data = event.data ? event.data.json() : null; } catch { data = null; }
  const reminder = reminderOf(data);
  if (reminder) {
    // The same tag as the page's own notification of it (reminders.js): one notification per grant.
    event.waitUntil((async () => self.registration.showNotification(String(data.title || "Whereabot"), {
      body: reminder.text, tag: `reminder:${reminder.client_id}:${reminder.requester_id || ""}`, data: { reminder },
      actions: [{ action: "keep", title: await text("sw.keep") }, { action: "remove", title: await text("sw.remove") }] }))());
    return;
  }
  const valid = data && typeof data.request_id === "string" && typeof data.body === "string";
  const title = valid ? String(data.title || "Whereabot") : "Whereabot";
  event.waitUntil((async () => {
    const options = valid
    ? { body: data.body, tag: data.request_id, data: { url: `/app/?request=${encodeURIComponent(data.request_id)}`,
        request_id: data.request_id, expires_ms: data.expires_ms, agent: typeof data.agent_name === "string" ? data.agent_name : null,
        client_id: typeof data.client_id === "string" ? data.client_id : null, reason: typeof data.reason === "string" ? data.reason : null },
        requireInteraction: data.kind === "alert", timestamp: Date.now(),
        // Where the browser shows actions: Reject answers from here, Allow opens the page (only it
        // can read the location).
        actions: data.kind === "alert" ? [{ action: "reject", title: await text("sw.reject") },
                                          { action: "allow", title: await text("sw.allow") }] : [] }
      : { body: await text("sw.fallback"), tag: "whereabot", data: { url: "/app/" } };
    await self.registration.showNotification(title, options);
    for (const client of await self.clients.matchAll({ type: "window" })) {
      client.postMessage({ type: "push", request_id: valid ? data.request_id : null });
    }
  })());
});

/** Answers `denied` for the notification's request with the stored session; true when the relay took it. */
async function rejectFromNotification(data) {
  try {
    const cache = await caches.open(WORKER_CACHE);
    const session = await storedSession();
    if (!session) return false;
    const response = await fetch("/v1/device/answer", {
      method: "POST",
      headers: { "Content-Type": "application/json", Authorization: `Bearer ${session.access_token}` },
      body: JSON.stringify({ type: "denied", id: data.request_id, reason: "user" }),
    });
    // 204 answered; 410 answered elsewhere already: either way there is nothing left to open.
    if (response.status !== 204 && response.status !== 410) return false;
    const entries = await cache.match(WORKER_HISTORY).then((r) => (r ? r.json() : [])).catch(() => []);
    const entry = { id: data.request_id, agent: data.agent || data.client_id || "", client_id: data.client_id, reason: data.reason,
                    outcome: response.status === 204 ? "declined" : "other_device", at: Date.now() };
    await cache.put(WORKER_HISTORY, new Response(JSON.stringify([entry, ...entries].slice(0, 50))));
    return true;
  } catch {
    return false;
  }
}

/** `waitUntil` when the browser dispatched the event (a script-made one cannot extend its life). */
function keepAlive(event, work) {
  try { event.waitUntil(work); } catch { /* not trusted: the work runs anyway */ }
}

/** The session the page left for the worker, or null when there is none that is still valid. */
async function storedSession() {
  const stored = await (await caches.open(WORKER_CACHE)).match(WORKER_SESSION);
  const session = stored ? await stored.json() : null;
  return session && session.access_token && session.expires_at > Date.now() / 1000 ? session : null;
}

/** Keep or Remove on a reminder's notification: an open page answers over its socket (and
 *  drops its card); with none, the answer goes from here through POST /v1/device/answer with
 *  the stored session, as Reject does, and no window opens. A tap without an action, or an
 *  answer that cannot go from here, opens the page (its Always allowed list). */
async function answerReminderFromNotification(reminder, choice) {
  const windows = await self.clients.matchAll({ type: "window", includeUncontrolled: true });
  const open = windows.find((client) => new URL(client.url).pathname.startsWith("/app/"));
  if (open) {
    open.postMessage({ type: "reminder_answer", reminder, choice });
    return;
  }
  if (choice) {
    try {
      const session = await storedSession();
      const response = session && await fetch("/v1/device/answer", {
        method: "POST",
        headers: { "Content-Type": "application/json", Authorization: `Bearer ${session.access_token}` },
        body: JSON.stringify({ type: choice === "keep" ? "always_allow_keep" : "always_allow_remove",
                               client_id: reminder.client_id, requester_id: reminder.requester_id || null }),
      });
      // 204 taken; 410 nothing left to keep: either way there is nothing to open.
      if (response && (response.status === 204 || response.status === 410)) return;
    } catch {
      // Offline or signed out: the page answers instead.
    }
  }
  await self.clients.openWindow("/app/");
}

self.addEventListener("notificationclick", (event) => {
  event.notification.close();
  const data = event.notification.data || {};
  if (data.reminder) {
    keepAlive(event, answerReminderFromNotification(data.reminder, event.action === "keep" || event.action === "remove" ? event.action : null));
    return;
  }
  if (event.action === "reject" && data.request_id) {
    keepAlive(event, rejectFromNotification(data).then((done) => (done ? null : self.clients.openWindow(data.url || "/app/"))));
    return;
  }
  keepAlive(event, (async () => {
    const windows = await self.clients.matchAll({ type: "window", includeUncontrolled: true });
    const open = windows.find((client) => new URL(client.url).pathname.startsWith("/app/"));
    if (open) {
      await open.focus();
      open.postMessage({ type: "open", request_id: data.request_id || null });
    } else {
      await self.clients.openWindow(data.url || "/app/");
    }
  })());
});

self.addEventListener("pushsubscriptionchange", (event) => {
  event.waitUntil((async () => {
    for (const client of await self.clients.matchAll({ type: "window" })) client.postMessage({ type: "resubscribe" });
  })());
});
