// The consent queue (docs/protocol.md "Answering"): which locate is asked now, which
// wait behind it, when each runs out, and what every answer sends. No DOM, no clock: the
// caller passes `now` (ms) and applies the effects each call returns, in order:
//   {type: "close", id}                      close the request's notifications
//   {type: "show", message}                  show this request in the prompt (null: none)
//   {type: "send", message}                  send on the phone socket
//   {type: "record", message, outcome}       add to the history
//   {type: "locate", message, approximately, standing, auto}
//                                            read the position and answer with it
// Each request id is handled once (a resend after a reconnect shows nothing new); a request
// not answered by its deadline less GRACE_MS is answered `no_answer`, whether it is shown or
// still waiting behind another; a cancel (answered on another device, or its time over)
// takes it out wherever it is. README "Try it in a browser" lists the five answers.

/** How long before the relay's deadline an unanswered request is given up here. */
export const GRACE_MS = 500;
/** How long a handled id is remembered after its deadline (resends come before it). */
const REMEMBER_MS = 60_000;
/** The person's five answers. */
export const CHOICES = ["reject", "allow", "approximate", "hour", "always"];

/** The relay's standing decision carried by the ping (`always_allow`), or null: never the
 *  list this page shows, so a removal or narrowing on another device holds here too. */
export function standingDecision(message) {
  const decision = message.always_allow;
  if (!decision || typeof decision !== "object") return null;
  return { precision: decision.precision === "approximate" ? "approximate" : "precise" };
}

/** `{client_id, requester_id}` of a request's agent (requester_id null for the person's own). */
export function agentOf(message) {
  return { client_id: message.client_id, requester_id: (message.requester && message.requester.user_id) || null };
}

const deadline = (message) => message.expires_ms - GRACE_MS;

export class ConsentQueue {
  constructor() {
    this.waiting = [];        // the shown request first, then the others in arrival order
    this.handled = new Map(); // id → expires_ms of every request seen
  }

  /** The request shown in the prompt, or null. */
  get current() {
    return this.waiting[0] || null;
  }

  /** A `locate` from the relay. */
  offer(message, now) {
    if (!message || typeof message.id !== "string" || !Number.isFinite(message.expires_ms)) return [];
    this.forget(now);
    if (this.handled.has(message.id) || message.expires_ms <= now) return [];
    this.handled.set(message.id, message.expires_ms);
    const effects = [{ type: "close", id: message.id }];
    const standing = standingDecision(message);
    if (standing) {
      // Answered at once; an approximate standing decision never shares precisely.
      effects.push({ type: "locate", message, approximately: standing.precision === "approximate", standing: false, auto: true });
      return effects;
    }
    this.waiting.push(message);
    if (this.waiting.length === 1) effects.push({ type: "show", message });
    return [...effects, ...this.expire(now)];
  }

  /** Every request whose time ran out by `now`: answered `no_answer`, taken out. */
  expire(now) {
    const before = this.current;
    const over = this.waiting.filter((message) => now >= deadline(message));
    if (!over.length) return [];
    this.waiting = this.waiting.filter((message) => now < deadline(message));
    const effects = over.flatMap((message) => [
      { type: "send", message: { type: "denied", id: message.id, reason: "no_answer" } },
      { type: "record", message, outcome: "no_answer" },
    ]);
    if (this.current !== before) effects.push({ type: "show", message: this.current });
    return effects;
  }

  /**
   * The person's `choice` (CHOICES) on the request `id` shown to them. A request that ran
   * out, or another than the one shown, is not answered by it. `approximately`: the
   * checkbox that makes Allow for 1 hour and Always allow approximate; `allowForSeconds`:
   * how long Allow for 1 hour lasts (the relay's ALLOW_FOR_SECONDS).
   */
  choose(id, choice, now, { approximately = false, allowForSeconds = 3600 } = {}) {
    const effects = this.expire(now);
    const message = this.current;
    if (!message || message.id !== id || !CHOICES.includes(choice)) return effects;
    this.waiting.shift();
    effects.push({ type: "show", message: this.current }, { type: "close", id });
    if (choice === "reject") {
      effects.push({ type: "send", message: { type: "denied", id, reason: "user" } },
                   { type: "record", message, outcome: "declined" });
      return effects;
    }
    const standing = choice === "always" || choice === "hour";
    const approximate = choice === "approximate" || (standing && approximately);
    if (standing) {
      const seconds = Number.isInteger(allowForSeconds) && allowForSeconds >= 1 && allowForSeconds <= 86400 ? allowForSeconds : 3600;
      effects.push({ type: "send", message: {
        type: "always_allow", client_id: message.client_id, client_name: message.agent_name || "",
        requester_id: agentOf(message).requester_id, precision: approximate ? "approximate" : "precise",
        ...(choice === "hour" ? { expires_in_s: seconds } : {}) } });
    }
    effects.push({ type: "locate", message, approximately: approximate, standing, auto: false });
    return effects;
  }

  /** The relay's `cancel`: answered on another device, or its time is over. */
  cancel(id, now) {
    const index = this.waiting.findIndex((message) => message.id === id);
    if (index < 0) return [{ type: "close", id }];
    const [message] = this.waiting.splice(index, 1);
    const effects = [{ type: "close", id },
                     { type: "record", message, outcome: message.expires_ms <= now ? "expired" : "other_device" }];
    if (index === 0) effects.push({ type: "show", message: this.current });
    return effects;
  }

  /** Whole seconds left to answer the shown request (as its countdown says), or null. */
  secondsLeft(now) {
    const message = this.current;
    return message ? Math.max(0, Math.ceil((message.expires_ms - now) / 1000)) : null;
  }

  /** When to look again: the shown countdown's next change or the next deadline; null: never. */
  nextWake(now) {
    if (!this.waiting.length) return null;
    const left = this.current.expires_ms - now;
    const tick = left > 0 ? this.current.expires_ms - (Math.ceil(left / 1000) - 1) * 1000 : now;
    return Math.max(now, Math.min(tick, ...this.waiting.map(deadline)));
  }

  /** Forgets everything (sign-out): no request is asked any more. */
  clear() {
    const shown = this.current;
    this.waiting = [];
    this.handled.clear();
    return shown ? [{ type: "show", message: null }] : [];
  }

  /** Drops ids whose request ended long ago (the relay resends only waiting requests). */
  forget(now) {
    for (const [id, expires] of this.handled) if (expires + REMEMBER_MS < now) this.handled.delete(id);
  }
}
