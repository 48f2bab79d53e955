import Foundation

/// A phone's answer, from its socket (the phones' `settle` action) or from
/// `POST /v1/device/answer`: a fix is sealed to the waiter's reply key first, so it crosses
/// Postgres only as ciphertext. Sealed fixes settled here are remembered for a replay.
///
/// The database notifies the waiter's instance of an answer, never this one: when the
/// request waits here the driver hands the answer to its call itself — and a fix for a call
/// waiting here is not sealed at all (it never crosses Postgres): the waiters' value keeps it
/// while the settle runs (`WaiterState.settlingHere`).
extension InstanceDriver {
    /// Seals (for a fix) and settles; returns what the database decided.
    /// - Parameter replyKey: the waiter's key when the ping carried it; else it is asked for.
    func settle(id: UUID, user: UUID, device: UUID?, deviceName: String, platform: String,
                reply: PhoneMessage.PhoneReply, replyKey: [UInt8]? = nil) async throws -> RelayStatus.Settle {
        let fix: LocationFix
        switch reply {
        case .denied(let reason):
            return try await settle(id: id, user: user, device: device, answer: .denied(reason: reason), fix: nil)
        case .unavailable(let reason):
            return try await settle(id: id, user: user, device: device, answer: .unavailable(reason: reason), fix: nil)
        case .place(let name, let timestamp):
            fix = LocationFix(place: name, timestampMs: timestamp, deviceName: deviceName, platform: platform)
        case .location(let latitude, let longitude, let accuracy, let timestamp, let altitude, let speed, let heading, let precision):
            fix = LocationFix(latitude: latitude, longitude: longitude, accuracyM: accuracy, timestampMs: timestamp,
                              altitudeM: altitude, speedMps: speed, headingDeg: heading,
                              deviceName: deviceName, platform: platform, precision: precision)
        }
        if waiters.settlingHere(id, fix: fix) {
            return try await settle(id: id, user: user, device: device, answer: .localLocation, fix: fix)
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
                                fix: fix)
    }

    /// One answer without a socket (`POST /v1/device/answer`): settled as from a socket,
    /// and the phones here that got the ping are told it ended (the database does not
    /// notify the settling instance).
    func answer(id: UUID, user: UUID, reply: PhoneMessage.PhoneReply) async throws -> RelayStatus.Settle {
        let settled = try await settle(id: id, user: user, device: nil, deviceName: "", platform: "", reply: reply)
        if settled == .settled { await cancel(request: id) }
        return settled
    }

    /// Keeps `fix` for request `id` while a phone's answer on this instance is settled;
    /// false when the request does not wait here (then the fix must travel sealed).
    func settlingHere(_ id: UUID, fix: LocationFix) -> Bool {
        waiters.settlingHere(id, fix: fix)
    }

    /// Settles `answer` (with the fix it carries, if any) and hands a settled one to the
    /// call waiting here.
    private func settle(id: UUID, user: UUID, device: UUID?, answer: PhoneAnswer, fix sealedFix: LocationFix?) async throws
        -> RelayStatus.Settle {
        // A failed call leaves a kept fix in place: whether it committed, the resync reads.
        let settled = try await database.settle(id: id, user: user, device: device, answer: answer, instance: instance)
        if settled != .settled, answer == .localLocation { waiters.settledElsewhere(id) }
        if settled == .settled {
            if let sealed = answer.sealed { sealedAnswers.remember(sealed, for: id) }
            await deliver(AnswerNotification(id: id, waiter: instance, outcome: answer.outcome,
                                             reason: answer.reason, sealed: answer.sealed), fix: sealedFix)
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
