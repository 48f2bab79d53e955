// The RelayCore module (no declaration here: the overview of what is in it).
//
// RelayCore: what one relay instance decides, with no I/O, no clock and no database —
// Foundation and JSON only, so that its tests (`RelayCoreTests`) run in a fraction of a
// second and nothing in it can block.
//
// - `Instance` is the instance's one value: the phones (`InstanceState`: sockets in the
//   state their life has reached in `SocketTable`, pings out in `PingLedger`, pings kept
//   for hellos in flight in `HellosInFlight`, held answers, the batched calls'
//   `CallBatcher`s), the calls waiting here (`WaiterState`) and each request's push plan
//   (`PushPlan`). Events go in, actions come out; Relay's `InstanceDriver` performs them.
//   The parts are readable from Relay (`package internal(set)`) and change only through
//   `Instance.handle`.
// - The domain's messages and rows: `PhoneMessage` (what a phone may say, decoded and
//   range-checked), `LocateMessage`, `AnswerNotification`, `LocationFix`, `PhoneAnswer`,
//   `PhoneAccountRequest`, and `RelayRows` (the database's answers, as the gateway maps
//   them).
// - The statuses and texts: `RelayStatus` (every status a SQL function returns),
//   `AgentFailure` (what the agent is told: docs/protocol.md, "Answers and agent texts"),
//   `DisplayText`, `LocateReason`,
//   `UUIDText`, and why a socket is closed (`SocketClose`; Relay maps each to its code).
