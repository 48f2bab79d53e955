// Signing in and out (docs/protocol.md "Signing in the browser"; README "Try it in a browser"). The
// signed-in account's email is always in the header (and in Account); a token from a URL is taken
// only for a sign-in this page started, or after a confirmation naming the account (and, when
// another account is signed in, naming both). Signing out deletes this browser's Web Push
// subscription at the relay before the socket closes, then unsubscribes it.
import * as session from "./session.js";
import { sendOnce } from "./socket.js";
import { hasSubscription, unsubscribe } from "./push.js";
import { t } from "./i18n.js";
import { showViews } from "./router.js";

const $ = (id) => document.getElementById(id);
const CONSENT_RETURN = /^\/app\/oauth\/consent\?(authorization_id=[A-Za-z0-9_-]{1,128}|request=[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})$/;
let page = null;   // app.js's hooks: config, resume, stopSocket, takeSocket, forgetPage, notice, hello, status
let leaving = null;

/** Whether a sign-out is under way. */
export function isLeaving() {
  return Boolean(leaving);
}

/** The stored session while it is valid, else null. */
export function validSession() {
  const current = session.load();
  return current && session.secondsLeft(current) > 0 && session.accountOf(current) ? current : null;
}

export function renderAccount(current) {
  const account = session.accountOf(current);
  $("account").textContent = account ? account.email : "";
  $("account").title = account ? t("account.signed_in_title", { email: account.email }) : "";
  $("account").hidden = !account;
  $("account-email").textContent = account ? account.email : "";
}

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
    deleted = await sendOnce({ token: signedIn.access_token, hello: page.hello(), message, match: isDeleted, timeoutMs: 6000 });
  }
  await unsubscribe();
  return Boolean(deleted);
}

/**
 * Signs out (docs/protocol.md "Signing in the browser"): the push subscription deleted (before the
 * socket closes), the socket closed with 1000, the session cleared. `tellRelay` false: the device
 * is gone already.
 */
export function signOut(text, tellRelay = true) {
  if (!leaving) {
    leaving = (async () => {
      const phone = page.takeSocket();
      if (phone && !phone.open) phone.close();  // no reconnect meanwhile: a socket of its own tells the relay
      $("signout").disabled = true;
      try {
        await forgetPush(phone, session.load(), tellRelay);
      } finally {
        if (phone) phone.close();
        session.clear();
        page.forgetPage();
        $("signout").disabled = false;
        leaving = null;
      }
    })();
  }
  return leaving.then(() => {
    page.notice(text || "");
    page.resume();
  });
}

/** Makes `fresh` the session; `switching`: another account was signed in (it signs out first). */
async function accept(fresh, switching) {
  if (switching) await signOut("");
  else page.stopSocket();  // the same account, a new token: connect again with it
  session.save(fresh);
  page.notice("");
  // Signed in on the way to the OAuth consent page: back to it (a path of this page only).
  const back = JSON.parse(localStorage.getItem("whereabot.return_to") || "null");
  localStorage.removeItem("whereabot.return_to");
  // The relay's own flow (`?request=<uuid>`) or Supabase Auth's (`?authorization_id=…`).
  if (back && Date.now() - back.at < 60 * 60 * 1000 && CONSENT_RETURN.test(back.path)) {
    location.assign(back.path);
    return;
  }
  page.resume();
}

/** A sign-in arriving in the URL (session.takeFragment). */
function arrive(arrival) {
  if (arrival.outcome === "refused") {
    page.notice(`${t("notice.link_refused")} ${t(validSession() ? "notice.still_signed_in" : "notice.sign_in_below")}`);
    page.resume();
    return;
  }
  if (arrival.outcome === "failed") {
    page.notice(t("notice.signin_failed", { reason: arrival.text }));
    page.resume();
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
  if (!current) page.status("signed_out");
  $("signin").hidden = true;
  showViews(false);
  $("confirm").hidden = false;
  $("confirm-text").textContent = switching ? t("confirm.switch", { before: before.email, after: after.email })
    : t("confirm.signin", { email: after.email });
  $("confirm-detail").textContent = (switching ? `${t("confirm.signed_out_here", { email: before.email })} ` : "") +
    t("confirm.detail", { email: after.email });
  $("confirm-signin").textContent = t(switching ? "confirm.switch_button" : "signin.confirm");
  $("confirm-signin").onclick = () => {
    $("confirm-signin").onclick = $("confirm-cancel").onclick = null;
    accept(arrival.session, switching);
  };
  $("confirm-cancel").onclick = () => {
    $("confirm-signin").onclick = $("confirm-cancel").onclick = null;
    page.notice(current ? "" : t("notice.not_signed_in"));
    page.resume();
  };
}

/** On load, and when only the fragment changes (a same-document navigation). */
function start() {
  const arrival = session.takeFragment();
  if (arrival) arrive(arrival);
  else page.resume();
}

/** Wires the sign-in controls and takes a sign-in from the URL, if any; `hooks` are app.js's. */
export function startSignIn(hooks) {
  page = hooks;
  $("signout").onclick = () => signOut("");
  $("google").onclick = () => session.signInWithGoogle(page.config());
  $("email-form").onsubmit = async (event) => {
    event.preventDefault();
    $("email-sent").hidden = !(await session.emailLink(page.config(), $("email").value));
  };
  addEventListener("hashchange", () => { const arrival = session.takeFragment(); if (arrival) arrive(arrival); });
  start();
}
