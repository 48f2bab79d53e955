// The phone socket (APP.md §A.3): /v1/device with the token in the subprotocol
// `whereabot.bearer.<JWT>` beside `whereabot.v1`, hello with platform "web", reconnect with
// backoff (1 s → 30 s, jitter), at once on 1012, when online and when the page is shown;
// never after 4000 (replaced or revoked).

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
    addEventListener("online", () => this.soon(0));
    document.addEventListener("visibilitychange", () => { if (!document.hidden) this.soon(0); });
  }

  get open() {
    return this.ws && this.ws.readyState === WebSocket.OPEN;
  }

  connect() {
    if (this.stopped || (this.ws && this.ws.readyState <= WebSocket.OPEN)) return;
    clearTimeout(this.timer);
    const url = location.origin.replace(/^http/, "ws") + "/v1/device";
    const ws = new WebSocket(url, ["whereabot.v1", "whereabot.bearer." + this.token()]);
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
      if (message && typeof message.type === "string") this.onMessage(message);
    };
    ws.onclose = (event) => {
      if (this.ws !== ws) return;
      this.ws = null;
      if (event.code === 4000) {
        this.stopped = true;
        this.onState(event.reason === "revoked" ? "revoked" : "replaced");
        return;
      }
      if (event.code === 4001) this.onState("expired");
      else this.onState("disconnected");
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

  close() {
    this.stopped = true;
    clearTimeout(this.timer);
    if (this.ws) this.ws.close(1000, "sign out");
  }
}
