// This browser as a device of the account (docs/protocol.md "The socket from a browser": hello):
// its id kept in localStorage, its name (the person's, or e.g. "Chrome on Linux" in the page's
// language), and the rule that a device belongs to one account.
import { t } from "./i18n.js";
import { forgetPlaces } from "./places.js";
import { forgetReminders } from "./reminders.js";

export function deviceID() {
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
export function claimDevice(account, history) {
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

export function hello() {
  return { type: "hello", app_version: "web-1", device_id: deviceID(), device_name: deviceName(), platform: "web" };
}

export function deviceName() {
  const saved = localStorage.getItem("whereabot.device_name");
  if (saved) return saved;
  const ua = navigator.userAgent;
  const browser = /Edg\//.test(ua) ? "Edge" : /Firefox\//.test(ua) ? "Firefox" : /Chrom/.test(ua) ? "Chrome" : /Safari\//.test(ua) ? "Safari" : t("device.browser");
  const system = /Android/.test(ua) ? "Android" : /iPhone|iPad/.test(ua) ? "iOS" : /Mac OS/.test(ua) ? "macOS" : /Windows/.test(ua) ? "Windows" : /Linux/.test(ua) ? "Linux" : t("device.web");
  return t("device.default", { browser, system });
}
