// The service worker (APP.md §A.6). It cannot read the location, so a push only brings the
// person to the page: every push shows a notification (tag = request id); a tap opens
// /app/?request=<id>, where the relay resends the waiting request and the prompt appears.

const SHELL = "whereabot-shell-v1";
const FILES = ["/app/", "/app/app.js", "/app/session.js", "/app/socket.js", "/app/history.js", "/app/position.js",
               "/app/push.js", "/app/app.css", "/app/manifest.webmanifest", "/app/icon-192.png", "/app/icon-512.png"];

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

self.addEventListener("push", (event) => {
  let data = null;
  try { data = event.data ? event.data.json() : null; } catch { data = null; }
  const valid = data && typeof data.request_id === "string" && typeof data.body === "string";
  const title = valid ? String(data.title || "Whereabot") : "Whereabot";
  const options = valid
    ? { body: data.body, tag: data.request_id, data: { url: `/app/?request=${encodeURIComponent(data.request_id)}`,
        request_id: data.request_id, expires_ms: data.expires_ms }, requireInteraction: data.kind === "alert", timestamp: Date.now() }
    : { body: "A location request arrived", tag: "whereabot", data: { url: "/app/" } };
  event.waitUntil((async () => {
    await self.registration.showNotification(title, options);
    for (const client of await self.clients.matchAll({ type: "window" })) {
      client.postMessage({ type: "push", request_id: valid ? data.request_id : null });
    }
  })());
});

self.addEventListener("notificationclick", (event) => {
  event.notification.close();
  const data = event.notification.data || {};
  event.waitUntil((async () => {
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
