// The prompt (docs/protocol.md "Answering"; README "Try it in a browser"): the wiring
// between the consent queue (queue.js, the rules), the page and the position. It shows the
// waiting request above every view with the agent's own words and the five answers, counts
// down with one timer set for the next second or deadline, and answers with the position.
// Agent and requester names are only ever inserted as text.
import { ConsentQueue, agentOf } from "./queue.js";
import { locateOnce } from "./position.js";
import { answerFor } from "./places.js";
import { closeNotifications } from "./push.js";
import { quietNow, mayWakeToggle } from "./quiet.js";
import { t } from "./i18n.js";

const $ = (id) => document.getElementById(id);
const queue = new ConsentQueue();
let hooks = null;     // {send, record, banner, markUsed, allowForSeconds}
let shown = null;     // the request in the prompt
let timer = null;

/** "Your agent X wants to know your location", "R's agent X …", "An agent …". */
export function askingText(message) {
  const agent = message.agent_name;
  const owner = message.requester && message.requester.name;
  if (owner) return agent ? t("prompt.asking.shared", { owner, agent }) : t("prompt.asking.shared.unnamed", { owner });
  return agent ? t("prompt.asking", { agent }) : t("prompt.asking.unnamed");
}

function typing() {
  const element = document.activeElement;
  return element && /^(INPUT|SELECT|TEXTAREA)$/.test(element.tagName);
}

function showPrompt(message) {
  const fresh = message !== shown;
  shown = message;
  $("prompt").hidden = !message;
  if (!message) return;
  if (fresh) {
    $("prompt-text").textContent = askingText(message);
    // The agent's own words, quoted and attributed; text only, never markup.
    const reason = typeof message.reason === "string" && message.reason ? message.reason : null;
    $("prompt-reason").textContent = reason ? t("prompt.reason", { reason, agent: message.agent_name || t("prompt.the_agent") }) : "";
    $("prompt-reason").hidden = !reason;
    $("approximately").checked = false;
    $("prompt-menu").open = Boolean(quietNow());  // why this prompt came in quiet hours
    if (!typing()) {
      scrollTo(0, 0);
      $("prompt-text").focus({ preventScroll: true });
    }
    renderPromptMenu();
  }
  renderCountdown();
}

/**
 * The prompt's agent menu (README "Living with it": quiet hours): whether quiet hours hold
 * now (then only an agent the person lets wake them gets here) and "May wake me" for it
 * (drawn again when the relay's may_wake list changes).
 */
export function renderPromptMenu() {
  if (!shown) return;
  renderPromptQuiet();
  const name = shown.agent_name || t("prompt.this_agent");
  $("prompt-wake").replaceChildren(mayWakeToggle(agentOf(shown), hooks.send, t("prompt.wake", { agent: name })));
}

/** Whether quiet hours hold now, in the prompt's menu (the clock moves it). */
export function renderPromptQuiet() {
  if (!shown) return;
  const quiet = quietNow();
  const name = shown.agent_name || t("prompt.this_agent");
  $("prompt-quiet").textContent = quiet ? t("prompt.quiet", { end: quiet.end, zone: quiet.zone, agent: name }) : "";
  $("prompt-quiet").hidden = !quiet;
}

function renderCountdown() {
  const left = queue.secondsLeft(Date.now());
  $("prompt-countdown").textContent = left ? t("prompt.left", { seconds: left }) : "";
}

/** One timer: the countdown's next second or the next deadline, whichever comes first. */
function schedule() {
  clearTimeout(timer);
  const wake = queue.nextWake(Date.now());
  if (wake === null) return;
  timer = setTimeout(() => {
    apply(queue.expire(Date.now()));
    renderCountdown();
  }, Math.max(0, wake - Date.now()) + 5);
}

function apply(effects) {
  for (const effect of effects) {
    if (effect.type === "close") closeNotifications(effect.id);
    else if (effect.type === "show") showPrompt(effect.message);
    else if (effect.type === "send") hooks.send(effect.message);
    else if (effect.type === "record") hooks.record(effect.message, effect.outcome);
    else if (effect.type === "locate") answer(effect);
  }
  schedule();
}

/**
 * Reads the position and sends the answer (`approximately`: the grid cell's centre; inside a
 * place of this phone's the place decides, places.js); returns the history outcome.
 */
async function answerWithPosition(message, approximately) {
  const result = await locateOnce(message.expires_ms);
  if (result.fix) {
    const sent = answerFor(message.id, result.fix, approximately);
    hooks.send(sent.message);
    return { outcome: "shared", precision: sent.precision };
  }
  hooks.send({ type: "unavailable", id: message.id, reason: result.reason });
  return result.reason === "permission" ? "permission" : "no_fix";
}

async function answer({ message, approximately, standing, auto }) {
  const outcome = await answerWithPosition(message, approximately);
  const shared = typeof outcome === "object";
  if (!auto) {
    hooks.record(message, outcome);
    if (standing && shared) hooks.markUsed(message);
    return;
  }
  hooks.record(message, shared ? { ...outcome, outcome: "shared_auto" } : outcome);
  if (!shared) return;
  const agent = message.agent_name || t("prompt.an_agent");
  const key = { approximate: "banner.checked.approximate", place: "banner.checked.place" }[outcome.precision] || "banner.checked";
  hooks.banner(t(key, { agent }));
  hooks.markUsed(message);
}

/** Wires the five answers; `hooks` as above. */
export function startAsking(given) {
  hooks = given;
  for (const choice of ["reject", "allow", "approximate", "hour", "always"]) {
    $(choice).onclick = () => {
      if (!shown) return;
      apply(queue.choose(shown.id, choice, Date.now(),
                         { approximately: $("approximately").checked, allowForSeconds: hooks.allowForSeconds() }));
    };
  }
}

/** The relay's `locate`. */
export function onLocate(message) {
  apply(queue.offer(message, Date.now()));
}

/** The relay's `cancel`: answered elsewhere, or over. */
export function onCancel(message) {
  if (message && typeof message.id === "string") apply(queue.cancel(message.id, Date.now()));
}

/** Signing out: nothing is asked any more. */
export function stopAsking() {
  apply(queue.clear());
}
