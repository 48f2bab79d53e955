import Foundation
import RelayCore

/// A phone's answer, from its socket (the phones' `settle` action) or from
/// `POST /v1/device/answer`: a fix is sealed to the waiter's reply key first, so it crosses
/// Postgres only as ciphertext. Sealed fixes settled here are remembered for a replay.
///
/// The database notifies the waiter's instance of an answer, never this one: an answer
/// settled here is the instance's event `settledHere`, which hands it to the call waiting
/// here — and a fix for a call waiting here is not sealed at all (it never crosses
/// Postgres): the call keeps it while the settle runs (the event `settling`).
extension InstanceDriver {
    /// Seals (for a fix) and settles; returns what the database decided.
    /// - Parameters:
    ///   - replyKey: the waiter's key when the ping carried it; else it is asked for.
    ///   - cancelPings: tell the phones here that got the ping it ended (an answer without a
    ///     socket; a socket's settle does that in the phones' own `settled` event).
    func settle(id: UUID, user: UUID, device: UUID?, deviceName: String, platform: String,
                reply: PhoneMessage.PhoneReply, replyKey: [UInt8]? = nil, cancelPings: Bool = false) async throws
        -> RelayStatus.Settle {
        let fix: LocationFix
        switch reply {
        case .denied(let reason):
            return try await settle(id: id, user: user, device: device, answer: .denied(reason: reason), fix: nil,
                                    cancelPings: cancelPings)
        case .unavailable(let reason):
            return try await settle(id: id, user: user, device: device, answer: .unavailable(reason: reason), fix: nil,
                                    cancelPings: cancelPings)
        case .place(let name, let timestamp):
            fix = LocationFix(place: name, timestampMs: timestamp, deviceName: deviceName, platform: platform)
        case .location(let latitude, let longitude, let accuracy, let timestamp, let altitude, let speed, let heading, let precision):
            fix = LocationFix(latitude: latitude, longitude: longitude, accuracyM: accuracy, timestampMs: timestamp,
                              altitudeM: altitude, speedMps: speed, headingDeg: heading,
                              deviceName: deviceName, platform: platform, precision: precision)
        }
        if keptHere(id, fix) {
            return try await settle(id: id, user: user, device: device, answer: .localLocation, fix: fix,
                                    cancelPings: cancelPings)
        }
        var key = replyKey
        if key == nil { key = try await database.replyKey(request: id, user: user) }
        guard let key else {
            // Not a waiting request of this user: let settle say which (gone or forbidden);
            // it changes nothing in either case.
            return try await database.settle(id: id, user: user, device: device, answer: .unavailable(reason: .error),
                                             instance: instance)
        }
        return try await settle(id: id, user: user, device: device,
                                answer: .location(sealed: try Sealing.seal(Array(fix.sealedJSON.utf8), to: key, requestID: id)),
                                fix: fix, cancelPings: cancelPings)
    }

    /// One answer without a socket (`POST /v1/device/answer`): settled as from a socket,
    /// and the phones here that got the ping are told it ended (the database does not
    /// notify the settling instance).
    func answer(id: UUID, user: UUID, reply: PhoneMessage.PhoneReply) async throws -> RelayStatus.Settle {
        try await settle(id: id, user: user, device: nil, deviceName: "", platform: "", reply: reply, cancelPings: true)
    }

    /// Whether the call waiting here for request `id` keeps `fix` while a phone's answer on
    /// this instance is settled (the `settling` event); false when the request does not wait
    /// here, and then the fix must travel sealed. (The event's only action is `keptHere`.)
    func keptHere(_ id: UUID, _ fix: LocationFix) -> Bool {
        decides(.settling(id, fix)) { if case .waiters(.keptHere(id)) = $0 { true } else { false } }
    }

    /// Settles `answer` (with the fix it carries, if any) and hands a settled one to the
    /// call waiting here.
    private func settle(id: UUID, user: UUID, device: UUID?, answer: PhoneAnswer, fix sealedFix: LocationFix?,
                        cancelPings: Bool) async throws -> RelayStatus.Settle {
        // A failed call leaves a kept fix in place: whether it committed, the resync reads.
        let settled = try await database.settle(id: id, user: user, device: device, answer: answer, instance: instance)
        if settled != .settled, answer == .localLocation { await handle(.settledElsewhere(id)) }
        if settled == .settled {
            if let sealed = answer.sealed { sealedAnswers.remember(sealed, for: id) }
            await handle(.settledHere(AnswerNotification(id: id, waiter: instance, outcome: answer.outcome,
                                                         reason: answer.reason, sealed: answer.sealed),
                                      fix: sealedFix, cancelPings: cancelPings))
        }
        return settled
    }

    /// A `whereabot_replay` notification: re-send the sealed answer of `id` if this
    /// instance sealed it.
    func replay(_ id: UUID) async {
        guard let sealed = sealedAnswers.sealed(for: id) else { return }
        do {
            if try await database.replayAnswer(id: id, sealed: sealed) { sealedAnswers.countReplay() }
        } catch {
            logger.failure("replay_failed", error, ["request": id.uuidString])
        }
    }
}
