// The views of the browser phone (README "Try it in a browser", "Living with it"), one at a
// time, chosen by the tab bar and kept in the URL's hash (#/agents), so that back, forward
// and reload keep the view. A sign-in fragment (#access_token=…) is no route: session.js
// takes it out of the URL, and the page shows home.
import { t } from "./i18n.js";

export const VIEWS = ["home", "requests", "agents", "places", "quiet", "devices", "account"];

/** The view a hash names ("#/agents" → "agents"); home for anything else. */
export function viewOf(hash) {
  const match = /^#\/([a-z]*)$/.exec(hash || "");
  return match && VIEWS.includes(match[1]) ? match[1] : "home";
}

let shown = null;
let onShow = () => {};

/** Shows the view the URL names; `focus`: move the focus to its heading (a tab was chosen). */
export function route(focus = false) {
  const view = viewOf(location.hash);
  for (const section of document.querySelectorAll("[data-view]")) section.hidden = section.dataset.view !== view;
  for (const tab of document.querySelectorAll("#tabs a")) {
    if (tab.dataset.tab === view) tab.setAttribute("aria-current", "page");
    else tab.removeAttribute("aria-current");
  }
  document.title = view === "home" ? t("app.title") : `${t(`${view}.title`)} · ${t("app.title")}`;
  if (focus && view !== shown) {
    const heading = document.querySelector(`#view-${view} h2`);
    if (heading) heading.focus({ preventScroll: true });
    scrollTo(0, 0);
  }
  shown = view;
  onShow(view);
}

/** Starts following the hash; `show(view)` runs whenever a view is shown. */
export function startRouter(show) {
  onShow = show;
  addEventListener("hashchange", () => route(true));
  route(false);
}

/** Shows (or hides, signed out) the views and the tab bar. */
export function showViews(visible) {
  document.getElementById("views").hidden = !visible;
  document.getElementById("tabs").hidden = !visible;
  document.body.classList.toggle("with-tabs", visible);
}
