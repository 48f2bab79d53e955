// The consent queue (Sources/Relay/Resources/app/queue.js) without a browser: docs/protocol.md
// "Answering" — deadlines, cancel, answered elsewhere, several requests at once,
// always-allow and the five answers of README "Try it in a browser".
import { test } from "node:test";
import assert from "node:assert/strict";
import { ConsentQueue, GRACE_MS, standingDecision } from "../../Sources/Relay/Resources/app/queue.js";

const T0 = 1_700_000_000_000;
let serial = 0;
function locate(fields = {}) {
  serial += 1;
  return { type: "locate", id: `req-${serial}`, client_id: "claude", agent_name: "Claude", expires_ms: T0 + 30_000,
           always_allow: null, requester: null, ...fields };
}
const of = (effects, type) => effects.filter((effect) => effect.type === type);
const sent = (effects) => of(effects, "send").map((effect) => effect.message);
const shown = (effects) => of(effects, "show").map((effect) => effect.message && effect.message.id);
const recorded = (effects) => of(effects, "record").map((effect) => [effect.message.id, effect.outcome]);

test("a request is shown, counted down and answered no_answer 500 ms before its deadline", () => {
  const queue = new ConsentQueue();
  const request = locate({ expires_ms: T0 + 10_000 });
  const effects = queue.offer(request, T0);
  assert.deepEqual(effects.map((effect) => effect.type), ["close", "show"]);
  assert.equal(queue.current, request);
  assert.equal(queue.secondsLeft(T0), 10);
  assert.equal(queue.secondsLeft(T0 + 1), 10);
  assert.equal(queue.secondsLeft(T0 + 1000), 9);
  assert.equal(GRACE_MS, 500, 'docs/protocol.md "Answering": no tap by expires_ms − 500 ms');
  assert.deepEqual(queue.expire(T0 + 9499), [], "still time to answer");
  const over = queue.expire(T0 + 9500);
  assert.deepEqual(sent(over), [{ type: "denied", id: request.id, reason: "no_answer" }]);
  assert.deepEqual(recorded(over), [[request.id, "no_answer"]]);
  assert.deepEqual(shown(over), [null], "the prompt closes");
  assert.equal(queue.current, null);
  assert.deepEqual(queue.expire(T0 + 20_000), [], "answered once");
});

test("the next wake-up is the countdown's next second, never past the deadline", () => {
  const queue = new ConsentQueue();
  assert.equal(queue.nextWake(T0), null, "nothing to wait for");
  queue.offer(locate({ expires_ms: T0 + 10_000 }), T0);
  assert.equal(queue.nextWake(T0), T0 + 1000);
  assert.equal(queue.nextWake(T0 + 250), T0 + 1000);
  assert.equal(queue.nextWake(T0 + 9000), T0 + 10_000 - GRACE_MS, "the deadline comes before the last second");
  const behind = locate({ expires_ms: T0 + 2000 });
  queue.offer(behind, T0);
  assert.equal(queue.nextWake(T0 + 1200), T0 + 2000 - GRACE_MS, "a waiting request's deadline counts too");
});

test("a resend after a reconnect, or a request already over, asks nothing", () => {
  const queue = new ConsentQueue();
  const request = locate();
  queue.offer(request, T0);
  assert.deepEqual(queue.offer({ ...request }, T0 + 100), []);
  assert.deepEqual(queue.choose(request.id, "reject", T0 + 200).length > 0, true);
  assert.deepEqual(queue.offer({ ...request }, T0 + 300), [], "answered here: not asked again");
  assert.deepEqual(queue.offer(locate({ expires_ms: T0 }), T0), [], "over on arrival");
  assert.deepEqual(queue.offer({ type: "locate", id: 7, expires_ms: T0 + 5000 }, T0), [], "no string id");
  assert.deepEqual(queue.offer(locate({ expires_ms: "soon" }), T0), [], "no deadline");
  assert.equal(queue.current, null);
});

test("several requests at once: one shown at a time, in order, each with its own deadline", () => {
  const queue = new ConsentQueue();
  const first = locate({ expires_ms: T0 + 30_000 });
  const second = locate({ expires_ms: T0 + 5000, client_id: "cursor", agent_name: "Cursor" });
  const third = locate({ expires_ms: T0 + 40_000 });
  assert.deepEqual(shown(queue.offer(first, T0)), [first.id]);
  assert.deepEqual(shown(queue.offer(second, T0)), [], "waits behind the shown one");
  assert.deepEqual(shown(queue.offer(third, T0)), []);
  assert.equal(queue.secondsLeft(T0), 30, "the countdown is the shown request's");
  // The second runs out while it waits: answered no_answer without ever being shown.
  const over = queue.expire(T0 + 5000 - GRACE_MS);
  assert.deepEqual(sent(over), [{ type: "denied", id: second.id, reason: "no_answer" }]);
  assert.deepEqual(shown(over), [], "the shown request stays");
  assert.equal(queue.current, first);
  const answered = queue.choose(first.id, "allow", T0 + 6000);
  assert.deepEqual(shown(answered), [third.id], "then the next one still waiting");
  assert.equal(of(answered, "locate")[0].message, first);
});

test("a cancel takes a request out wherever it is: other device, or timed out after its deadline", () => {
  const queue = new ConsentQueue();
  const first = locate({ expires_ms: T0 + 10_000 });
  const second = locate({ expires_ms: T0 + 20_000 });
  queue.offer(first, T0);
  queue.offer(second, T0);
  const waiting = queue.cancel(second.id, T0 + 1000);
  assert.deepEqual(recorded(waiting), [[second.id, "other_device"]]);
  assert.deepEqual(shown(waiting), [], "the shown one stays");
  assert.deepEqual(of(waiting, "close"), [{ type: "close", id: second.id }]);
  const elsewhere = queue.cancel(first.id, T0 + 2000);
  assert.deepEqual(recorded(elsewhere), [[first.id, "other_device"]], "answered on another device");
  assert.deepEqual(shown(elsewhere), [null]);
  assert.deepEqual(sent(elsewhere), [], "nothing to send: it is answered");
  assert.deepEqual(queue.choose(first.id, "allow", T0 + 2100), [], "a late tap answers nothing");

  const late = locate({ expires_ms: T0 + 3000 });
  queue.offer(late, T0);
  const timedOut = queue.cancel(late.id, T0 + 3000);
  assert.deepEqual(recorded(timedOut), [[late.id, "expired"]]);
  assert.deepEqual(queue.cancel("never-seen", T0), [{ type: "close", id: "never-seen" }], "unknown: notifications only");
});

test("Reject answers denied user; Allow and Share approximate read the position", () => {
  const queue = new ConsentQueue();
  const a = locate(), b = locate(), c = locate();
  for (const request of [a, b, c]) queue.offer(request, T0);
  const rejected = queue.choose(a.id, "reject", T0);
  assert.deepEqual(sent(rejected), [{ type: "denied", id: a.id, reason: "user" }]);
  assert.deepEqual(recorded(rejected), [[a.id, "declined"]]);
  assert.deepEqual(of(rejected, "locate"), []);
  const allowed = queue.choose(b.id, "allow", T0, { approximately: true });
  assert.deepEqual(sent(allowed), [], "Allow sets up nothing standing");
  assert.deepEqual(of(allowed, "locate").map(({ approximately, standing }) => [approximately, standing]), [[false, false]],
                   "the checkbox is for the standing answers only");
  const approximate = queue.choose(c.id, "approximate", T0);
  assert.deepEqual(of(approximate, "locate").map(({ approximately }) => approximately), [true]);
  assert.deepEqual(shown(approximate), [null]);
});

test("only the request shown is answered, and only with one of the five answers", () => {
  const queue = new ConsentQueue();
  const first = locate(), second = locate();
  queue.offer(first, T0);
  queue.offer(second, T0);
  assert.deepEqual(queue.choose(second.id, "allow", T0), [], "not the one on screen");
  assert.deepEqual(queue.choose(first.id, "share everything", T0), []);
  assert.equal(queue.current, first);
  // The shown request ran out just before the tap: the tap does not answer the next one.
  const effects = queue.choose(first.id, "allow", T0 + 30_000 - GRACE_MS);
  assert.deepEqual(of(effects, "locate"), []);
  assert.deepEqual(recorded(effects).map(([, outcome]) => outcome), ["no_answer", "no_answer"]);
});

test("Always allow and Allow for 1 hour send always_allow first, precise or approximate", () => {
  const queue = new ConsentQueue();
  const shared = locate({ requester: { user_id: "u-ada", name: "Ada" }, agent_name: null });
  const own = locate();
  queue.offer(shared, T0);
  queue.offer(own, T0);
  const always = queue.choose(shared.id, "always", T0);
  assert.deepEqual(always.map((effect) => effect.type), ["show", "close", "send", "locate"], "the grant before the fix");
  assert.deepEqual(sent(always), [{ type: "always_allow", client_id: "claude", client_name: "", requester_id: "u-ada",
                                    precision: "precise" }], "for good: no expiry");
  assert.deepEqual(of(always, "locate").map(({ approximately, standing }) => [approximately, standing]), [[false, true]]);
  const hour = queue.choose(own.id, "hour", T0, { approximately: true, allowForSeconds: 4 });
  assert.deepEqual(sent(hour), [{ type: "always_allow", client_id: "claude", client_name: "Claude", requester_id: null,
                                  precision: "approximate", expires_in_s: 4 }]);
  assert.deepEqual(of(hour, "locate").map(({ approximately }) => approximately), [true]);
  const third = locate();
  queue.offer(third, T0);
  assert.equal(sent(queue.choose(third.id, "hour", T0, { allowForSeconds: 10 ** 9 }))[0].expires_in_s, 3600,
               "an out-of-range setting falls back to an hour");
});

test("a ping carrying the relay's standing decision is answered at once, never asked", () => {
  const queue = new ConsentQueue();
  const precise = locate({ always_allow: { precision: "precise" } });
  const effects = queue.offer(precise, T0);
  assert.deepEqual(effects, [{ type: "close", id: precise.id },
                             { type: "locate", message: precise, approximately: false, standing: false, auto: true }]);
  assert.equal(queue.current, null, "no prompt");
  const approximate = locate({ always_allow: { precision: "approximate" } });
  assert.equal(of(queue.offer(approximate, T0), "locate")[0].approximately, true, "approximate stays approximate");
  const odd = locate({ always_allow: { precision: "exact-please" } });
  assert.equal(of(queue.offer(odd, T0), "locate")[0].approximately, false);
  assert.equal(standingDecision(locate({ always_allow: "yes" })), null, "only an object is a decision");
  const asked = locate({ always_allow: null });
  assert.deepEqual(shown(queue.offer(asked, T0)), [asked.id], "no decision: asked");
});

test("sign-out forgets every request", () => {
  const queue = new ConsentQueue();
  const request = locate();
  queue.offer(request, T0);
  assert.deepEqual(queue.clear(), [{ type: "show", message: null }]);
  assert.equal(queue.current, null);
  assert.equal(queue.nextWake(T0), null);
  assert.deepEqual(queue.clear(), []);
});
