// Web Push on the page side (docs/protocol.md "Notifications and the service worker"): subscribe
// after a user gesture with the relay's VAPID key, raced against 15 s (a profile that cannot reach
// its push service never settles), keep the subscription to send on every connect, close a
// request's notifications, and forget the subscription at sign-out.

import { t, language } from "./i18n.js";

const KEY = "whereabot.push";

function keyBytes(base64url) {
  const base64 = base64url.replace(/-/g, "+").replace(/_/g, "/");
  const raw = atob(base64 + "=".repeat((4 - (base64.length % 4)) % 4));
  return Uint8Array.from(raw, (c) => c.charCodeAt(0));
}

/** The subscription to send on every connect, with the page's language (the relay writes
 *  this browser's notifications in it), or null. */
export function storedSubscription() {
  try {
    const saved = JSON.parse(localStorage.getItem(KEY) || "null");
    return saved && typeof saved.endpoint === "string" ? { ...saved, language } : null;
  } catch {
    return null;
  }
}

export async function enablePush(vapidPublicKey) {
  if (!vapidPublicKey || !("PushManager" in window)) return { text: t("notify.unavailable") };
  if ((await Notification.requestPermission()) !== "granted") return { text: t("notify.blocked") };
  try {
    const registration = await navigator.serviceWorker.ready;
    const timeout = new Promise((_, reject) => setTimeout(() => reject(new Error("timeout")), 15000));
    const subscription = await Promise.race([
      registration.pushManager.subscribe({ userVisibleOnly: true, applicationServerKey: keyBytes(vapidPublicKey) }),
      timeout,
    ]);
    const json = subscription.toJSON();
    const saved = { endpoint: json.endpoint, p256dh: json.keys.p256dh, auth: json.keys.auth };
    localStorage.setItem(KEY, JSON.stringify(saved));
    return { text: t("notify.saving"), subscription: { ...saved, language } };
  } catch (error) {
    return { text: t("notify.failed", { reason: error.message }) };
  }
}

/** Settles with `promise`, or with `fallback` after `ms` (a push service that never answers). */
function within(promise, ms, fallback) {
  return Promise.race([promise, new Promise((resolve) => setTimeout(() => resolve(fallback), ms))]);
}

/** The browser's current push subscription for /app/, or null. */
async function browserSubscription() {
  if (!("serviceWorker" in navigator)) return null;
  try {
    const registration = await within(navigator.serviceWorker.getRegistration("/app/"), 3000, null);
    if (!registration || !registration.pushManager) return null;
    return await within(registration.pushManager.getSubscription(), 3000, null);
  } catch {
    return null;
  }
}

/** Whether there is a subscription to delete (one sent to the relay or one the browser holds). */
export async function hasSubscription() {
  return Boolean(storedSubscription()) || Boolean(await browserSubscription());
}

/**
 * Sign-out (docs/protocol.md "Signing in the browser"): forgets the stored subscription and
 * unsubscribes it at the push service, so even a relay that never heard the delete gets 404/410 and
 * drops its row.
 */
export async function unsubscribe() {
  localStorage.removeItem(KEY);
  const subscription = await browserSubscription();
  if (!subscription) return false;
  try {
    return Boolean(await within(subscription.unsubscribe(), 5000, false));
  } catch {
    return false;
  }
}

export async function closeNotifications(requestID) {
  if (!("serviceWorker" in navigator)) return;
  try {
    const registration = await navigator.serviceWorker.getRegistration("/app/");
    if (!registration) return;
    for (const notification of await registration.getNotifications({ tag: requestID })) notification.close();
  } catch {
    // no notifications to close
  }
}
