/// Every status and outcome word a `relay.*` function returns (or puts in a notification),
/// as an enum: no code compares the database's strings. `RelayDatabase.status` decodes
/// them; a word this relay does not know is a malformed result (`PGError.decoding`), never
/// a silent default, so a migration that adds one fails loudly in the tests.
public enum RelayStatus {
    /// What one socket's hello did (`relay.device_hellos`).
    public enum Hello: String, Sendable, CaseIterable {
        /// Registered: the socket is live.
        case ok
        /// The session or device was revoked, or the user is gone (close 4000 "revoked").
        case revoked
        /// The device is another user's.
        case forbidden
        /// A newer socket of the device is live.
        case replaced
        /// The user's cap of live sockets is reached.
        case tooMany = "too_many"
        /// The user's cap of devices is reached.
        case tooManyDevices = "too_many_devices"
        /// This instance's row is gone (reaped): say hello again after the heartbeat.
        case unregistered
        /// The hello itself is malformed.
        case invalid
    }

    /// A session's state (`relay.session_states`).
    public enum Session: String, Sendable, CaseIterable {
        /// Signed in.
        case alive
        /// No auth.sessions row of that user, or past its not_after.
        case signedOut = "signed_out"
        /// Revoked by removing its device.
        case deviceRemoved = "device_removed"
    }

    /// What opening a request did (`relay.open_request`, `relay.open_durable_request`).
    public enum Open: String, Sendable, CaseIterable {
        /// Opened: the owner's phones are being asked.
        case opened
        /// The owner's cap of waiting requests is reached.
        case tooMany = "too_many"
        /// The database's cap of resumable requests is reached.
        case full
        /// A request with that id exists already.
        case exists
        /// The owner is in quiet hours and the agent may not wake them: nothing was opened.
        case quiet
    }

    /// How a request ended.
    public enum Outcome: String, Sendable, CaseIterable {
        /// A phone sent its (sealed) fix.
        case location
        /// The person declined (or the prompt expired on the phone).
        case denied
        /// The phone could not read a location.
        case unavailable
        /// Nobody answered before the deadline.
        case expired
        /// The agent went away (or its instance died) before an answer.
        case abandoned
    }

    /// What a phone's answer did (`relay.settle`).
    public enum Settle: String, Sendable, CaseIterable {
        /// The answer won.
        case settled
        /// No request waits under that id.
        case gone
        /// The request or device belongs to another user.
        case forbidden
    }

    /// What ending a request at its deadline or hang-up did (`relay.finish`).
    public enum Finish: String, Sendable, CaseIterable {
        /// This call ended it.
        case finished
        /// An answer (or another end) came first.
        case alreadySettled = "already_settled"
        /// The row is gone.
        case gone
    }

    /// What handing a waiting call's request over to polls did (`relay.make_durable`).
    public enum MakeDurable: String, Sendable, CaseIterable {
        /// It is durable now: it outlives this instance.
        case durable
        /// It settled meanwhile; its answer is on its way.
        case settled
        /// The row is gone.
        case gone
    }

    /// What polling a durable request found (`relay.durable_state`): the row's view says
    /// waiting or settled; unknown is a request this credential may not see.
    public enum Poll: String, Sendable, CaseIterable {
        /// The person has not answered yet.
        case waiting
        /// It ended.
        case settled
        /// Never opened, another credential's, or past its TTL.
        case unknown
    }

    /// What cancelling a durable request did (`relay.cancel_durable`).
    public enum CancelDurable: String, Sendable, CaseIterable {
        /// Cancelled now.
        case cancelled
        /// It had ended already.
        case settled
        /// Unknown to that credential.
        case unknown
    }

    /// What claiming a push stage did (`relay.claim_push`).
    public enum Claim: String, Sendable, CaseIterable {
        /// This instance sends the stage.
        case claimed
        /// Another claim of the stage came first.
        case already
        /// The request was answered.
        case settled
        /// Past its deadline.
        case expired
        /// The row is gone.
        case gone
        /// The stage does not apply (nothing to push, or not for this kind of request).
        case notApplicable = "not_applicable"
    }
}
