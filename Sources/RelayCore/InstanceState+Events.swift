import Foundation

extension InstanceState {
    /// What happened: on a socket, on the bus, on a timer, or as a result of this
    /// instance's own database call.
    package enum Event {
        /// A socket opened (it has the hello timeout to say hello).
        case opened(Handle)
        /// A socket sent a message (decoded; frames that are not JSON objects never come here).
        case received(Handle, PhoneMessage)
        /// A socket closed.
        case closed(UUID)
        /// A `relay.device_hellos` call came back (nil: the database could not be
        /// reached); `batched` when it was the hello batcher's call.
        case hellosRegistered([Hello], RelayRows.HelloBatch?, batched: Bool)
        /// A settle of a phone's answer came back (nil: the database could not be reached).
        case settled(Answer, RelayStatus.Settle?)
        /// A `token` message's token was checked.
        case tokenChecked(Handle, TokenCheck)
        /// A new request for `owner`: its notification, or opened by this instance.
        case locate(LocateMessage, owner: UUID)
        /// A request ended: its cancel notification, or an answer settled through HTTP here.
        case cancel(UUID)
        /// A message for every phone of `owner` here that said hello (a reminder).
        case tell(String, owner: UUID)
        /// A `whereabot_device` notification: a device said hello on another socket
        /// (`except`), or it was removed (`revoked`).
        case device(UUID, owner: UUID, revoked: Bool, except: UUID?)
        /// This instance's sockets whose session or device was revoked (the heartbeat's query).
        case revoked([UUID])
        /// A batch window's timer fired.
        case windowEnded(Call)
        /// A disconnects' or delivered marks' call finished.
        case batchSent(Call)
        /// Catching up with the tables: expired pings and held answers are forgotten; with
        /// `reregister`, every socket is registered again in calls of up to `maximumBatch`
        /// (`registerHellos(_, batched: false)`), and held answers are settled again.
        case resync(reregister: Bool, maximumBatch: Int)
        /// The instance drains (its connections' rows are gone): every socket is closed
        /// 1012, and so is any that opens from now on.
        case drain
    }

    /// What to do, in order.
    package enum Action {
        /// Send a text frame.
        case send(Handle, String)
        /// Close a socket.
        case close(Handle, SocketClose)
        /// Call `relay.device_hellos`, then report `hellosRegistered` (with `batched`).
        case registerHellos([Hello], batched: Bool)
        /// Call `relay.device_disconnects`, then report `batchSent(.disconnects)`.
        case disconnect([UUID])
        /// Call `relay.mark_delivered`, then report `batchSent(.deliveredMarks)`.
        case markDelivered([UUID])
        /// Report `windowEnded(call)` after `delay`.
        case armWindow(Call, Duration)
        /// Seal and settle a phone's answer, then report `settled` (boxed, so that every
        /// action stays small: they are built per event).
        indirect case settle(Answer)
        /// Check a `token` message's token, then report `tokenChecked`.
        case checkToken(Handle, String)
        /// Answer an account request of a registered phone.
        indirect case account(Handle, device: UUID, PhoneAccountRequest)
        /// Send the browser phone its always-allowed list.
        case sendAlwaysAllowed(Handle)
        /// The socket's credential was renewed: move its deadline.
        case renewCredential(Handle, until: Date)
        /// Forget a cached session check (the session was revoked).
        case forgetSession(UUID)
        /// This instance's row was gone: beat now (which re-creates it) and re-register.
        case requestReregistration
        /// Log a line about a socket (never what it said).
        case info(String, connection: UUID)
        /// Log a warning about a socket.
        case warn(String, connection: UUID)
    }

    /// The batched calls.
    package enum Call: Sendable {
        case hellos, disconnects, deliveredMarks
    }

    /// What a `token` message's check found.
    package enum TokenCheck: Sendable {
        /// A fresh token of the same user and session, valid until then.
        case renewed(Date)
        /// Another user or session, an OAuth client's token, or an invalid one.
        case expired
        /// The session was revoked or its device removed.
        case revoked
        /// The session could not be checked now (the socket lives on).
        case unavailable
    }

    /// A phone's answer to settle, and what settling it needs.
    package struct Answer {
        /// The request.
        package let id: UUID
        /// The answering socket's record.
        package let record: Record
        /// What it answered.
        package let reply: PhoneMessage.PhoneReply
        /// The waiter's key, when the ping came through this socket.
        package let replyKey: [UInt8]?
        /// Until when it is held if the database cannot take it (nil while it is first settled).
        var heldUntil: Date?
    }
}

extension InstanceState.Answer: Sendable {}
