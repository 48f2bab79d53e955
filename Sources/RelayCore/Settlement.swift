import Foundation

/// One phone's answer on its way to the database (from its socket, a resync's held answer
/// or `POST /v1/device/answer`), as the instance's value decides it: a fix for a call
/// waiting here is kept by that call and settled unsealed; any other fix is sealed to the
/// request's reply key first, so it crosses Postgres only as ciphertext; a refusal is
/// settled as it is. The driver performs the sealing and the settle; the value hands the
/// status to the socket that answered (the phones' `settled` event) or to whoever asked
/// (`Instance.Action.settleDone`).
package struct Settlement: Sendable {
    /// Where the answer came from, and so who takes the settle's status.
    package enum Origin: Sendable {
        /// A socket here (or its answer held for a resync): the phones' `settled` event.
        case socket(InstanceState.Answer)
        /// An answer without a socket: the caller waiting for `ticket` (unique per settle).
        case caller(ticket: UUID)
    }

    /// What was answered.
    package enum Answer: Sendable, Equatable {
        /// A fix (a position or a place), before sealing.
        case fix(LocationFix)
        /// A denial or no location (nothing to seal).
        case plain(PhoneAnswer)
    }

    /// Who takes the settle's status.
    package let origin: Origin
    /// The request answered.
    package let id: UUID
    /// The person who answered, and from which device (nil: without a socket).
    package let user: UUID
    package let device: UUID?
    package let answer: Answer
    /// The waiter's reply key when the ping carried it; else the driver asks for it.
    package let replyKey: [UInt8]?
    /// Whether the phones here that got the ping are told it ended (an answer without a
    /// socket; a socket's settle does that in the phones' own `settled` event).
    package let cancelPings: Bool

    /// The settlement of a socket's answer (its record names the device, its platform and
    /// its user).
    package init(_ answer: InstanceState.Answer) {
        let record = answer.record
        self.init(origin: .socket(answer), id: answer.id, user: record.handle.user, device: record.device,
                  deviceName: record.name, platform: record.platform.text, reply: answer.reply, replyKey: answer.replyKey,
                  cancelPings: false)
    }

    /// The settlement of an answer without a socket (`user` answered request `id`): the
    /// phones here that got the ping are told it ended.
    package init(ticket: UUID, id: UUID, user: UUID, reply: PhoneMessage.PhoneReply) {
        self.init(origin: .caller(ticket: ticket), id: id, user: user, device: nil, deviceName: "", platform: "",
                  reply: reply, replyKey: nil, cancelPings: true)
    }

    private init(origin: Origin, id: UUID, user: UUID, device: UUID?, deviceName: String, platform: String,
                 reply: PhoneMessage.PhoneReply, replyKey: [UInt8]?, cancelPings: Bool) {
        self.origin = origin
        self.id = id
        self.user = user
        self.device = device
        self.replyKey = replyKey
        self.cancelPings = cancelPings
        switch reply {
        case .denied(let reason):
            answer = .plain(.denied(reason: reason))
        case .unavailable(let reason):
            answer = .plain(.unavailable(reason: reason))
        case .place(let name, let timestamp):
            answer = .fix(LocationFix(place: name, timestampMs: timestamp, deviceName: deviceName, platform: platform))
        case .location(let latitude, let longitude, let accuracy, let timestamp, let altitude, let speed, let heading,
                       let precision):
            answer = .fix(LocationFix(latitude: latitude, longitude: longitude, accuracyM: accuracy, timestampMs: timestamp,
                                      altitudeM: altitude, speedMps: speed, headingDeg: heading,
                                      deviceName: deviceName, platform: platform, precision: precision))
        }
    }

    /// The fix answered, if any.
    package var fix: LocationFix? {
        if case .fix(let fix) = answer { fix } else { nil }
    }
}
