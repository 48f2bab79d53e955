// The phone socket (docs/protocol.md "The socket from a browser"): /v1/device with the token in the
// subprotocol `whereabot.bearer.<JWT>` beside `whereabot.v1`, hello with platform "web", reconnect
// with backoff (1 s → 30 s, jitter), at once on 1012, when online and when the page is shown; never
// after 4000 (replaced or revoked); after 1013 "retry after N" (a relay that is busy or not ready
// yet: a browser cannot read the status of a refused upgrade, so the relay says it on the socket)
// in N seconds, as the relay asks. `request` sends a message and waits for its reply; `sendOnce`
// does the same on a socket of its own when the phone socket is down (sign-out).

function deviceURL() {
  return location.origin.replace(/^http/, "ws") + "/v1/device";
}

/** The seconds of a 1013 close reason `retry after N`, or null. */
export function retryAfterSeconds(reason) {
  const match = /^retry after (\d{1,4})$/.exec(reason || "");
  if (!match) return null;
  const seconds = Number(match[1]);
  return seconds <= 3600 ? seconds : null;
}

export class PhoneSocket {
  constructor({ token, hello, onMessage, onState }) {
    this.token = token;
    this.hello = hello;
    this.onMessage = onMessage;
    this.onState = onState;
    this.delay = 1000;
    this.stopped = false;
    this.timer = null;
    this.ws = null;
    this.waiters = new Set();
    addEventListener("online", () => this.soon(0));
    document.addEventListener("visibilitychange", () => { if (!document.hidden) this.soon(0); });
  }

  get open() {
    return this.ws && this.ws.readyState === WebSocket.OPEN;
  }

  connect() {
    if (this.stopped || (this.ws && this.ws.readyState <= WebSocket.OPEN)) return;
    clearTimeout(this.timer);
    const ws = new WebSocket(deviceURL(), ["whereabot.v1", "whereabot.bearer." + this.token()]);
    this.ws = ws;
    this.onState("connecting");
    ws.onopen = () => {
      this.delay = 1000;
      ws.send(JSON.stringify(this.hello()));
      this.onState("connected");
    };
    ws.onmessage = (event) => {
      let message;
      try { message = JSON.parse(event.data); } catch { return; }
      if (!message || typeof message.type !== "string") return;
      for (const waiter of [...this.waiters]) if (waiter.match(message)) waiter.done(message);
      this.onMessage(message);
    };
    ws.onclose = (event) => {
      if (this.ws !== ws) return;
      this.ws = null;
      for (const waiter of [...this.waiters]) waiter.done(null);
      if (event.code === 4000) {
        this.stopped = true;
        this.onState(event.reason === "revoked" ? "revoked" : "replaced");
        return;
      }
      if (event.code === 4001) this.onState("expired");
      else this.onState("disconnected");
      const told = event.code === 1013 ? retryAfterSeconds(event.reason) : null;
      if (told !== null) {
        this.soon(told * 1000 * (1 + Math.random() / 10));
        return;
      }
      this.soon(event.code === 1012 ? 0 : this.delay * (0.5 + Math.random() / 2));
      this.delay = Math.min(this.delay * 2, 30000);
    };
  }

  soon(ms) {
    if (this.stopped || this.open) return;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.connect(), ms);
  }

  send(message) {
    if (this.open) this.ws.send(JSON.stringify(message));
    return this.open;
  }

  /** Sends `message` and resolves with the first message `match` accepts, or null (closed, timeout). */
  request(message, match, timeoutMs) {
    return new Promise((resolve) => {
      if (!this.send(message)) return resolve(null);
      const waiter = {
        match,
        done: (reply) => { clearTimeout(timer); this.waiters.delete(waiter); resolve(reply); },
      };
      const timer = setTimeout(() => waiter.done(null), timeoutMs);
      this.waiters.add(waiter);
    });
  }

  /** Closes with 1000 and never reconnects; the closed socket reports no more states. */
  close() {
    this.stopped = true;
    clearTimeout(this.timer);
    const ws = this.ws;
    this.ws = null;
    for (const waiter of [...this.waiters]) waiter.done(null);
    if (ws) ws.close(1000, "sign out");
  }
}

/**
 * On a socket of its own: hello, then `message`; resolves with the first reply `match`
 * accepts, or null (refused, closed, timeout), and closes with 1000.
 */
export function sendOnce({ token, hello, message, match, timeoutMs }) {
  return new Promise((resolve) => {
    let ws;
    try {
      ws = new WebSocket(deviceURL(), ["whereabot.v1", "whereabot.bearer." + token]);
    } catch {
      resolve(null);
      return;
    }
    const finish = (reply) => {
      clearTimeout(timer);
      ws.onclose = ws.onerror = ws.onmessage = null;
      if (ws.readyState <= WebSocket.OPEN) ws.close(1000, "sign out");
      resolve(reply);
    };
    const timer = setTimeout(() => finish(null), timeoutMs);
    ws.onopen = () => {
      ws.send(JSON.stringify(hello));
      ws.send(JSON.stringify(message));
    };
    ws.onmessage = (event) => {
      let reply;
      try { reply = JSON.parse(event.data); } catch { return; }
      if (reply && match(reply)) finish(reply);
    };
    ws.onerror = ws.onclose = () => finish(null);
  });
}
