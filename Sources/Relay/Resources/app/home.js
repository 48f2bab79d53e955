// Home (README "Try it in a browser"): whether agents can reach this phone now — the phone
// socket connected, notifications on for when the page is closed, quiet hours holding — in
// one sentence and three facts that never contradict each other.
import { t } from "./i18n.js";
import { quietNow, hasQuietHours } from "./quiet.js";

const $ = (id) => document.getElementById(id);
const state = { connection: "connecting", push: "off" };

/** The socket's state (socket.js's names) or the push state ("on", "off", "refused", "unavailable"). */
export function setReach(change) {
  Object.assign(state, change);
  renderHome();
}

export function renderHome() {
  const connected = state.connection === "connected";
  const quiet = quietNow();
  const push = state.push === "on";
  let reach;
  if (quiet) reach = t("home.reach.quiet", { end: quiet.end });
  else if (connected) reach = t("home.reach.yes");
  else reach = t(push ? "home.reach.push" : "home.reach.no");
  $("reach").textContent = reach;
  $("reach-connection").textContent = t(`status.${state.connection}`);
  $("reach-push").textContent = t(`home.push.${state.push}`);
  $("reach-quiet").textContent = quiet ? t("home.quiet.now", { end: quiet.end, zone: quiet.zone })
    : t(hasQuietHours() ? "home.quiet.not_now" : "home.quiet.none");
}
