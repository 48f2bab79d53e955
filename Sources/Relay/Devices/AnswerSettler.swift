import Foundation

/// Settles a request with a phone's answer: a fix is sealed to the waiter's reply key
/// first, so it crosses Postgres only as ciphertext. Used by device sockets and by
/// POST /v1/device/answer. Sealed fixes it settled are remembered for a replay.
struct AnswerSettler: Sendable {
    let database: RelayDatabase
    let memory: SealedAnswerMemory
    let logger: Logger

    /// Seals (for a fix) and settles; returns what the database decided.
    func settle(id: UUID, user: UUID, device: UUID?, deviceName: String, platform: String,
                reply: PhoneMessage.PhoneReply) async throws -> RelayDatabase.Settled {
        let answer: PhoneAnswer
        switch reply {
        case .denied(let reason):
            answer = .denied(reason: reason)
        case .unavailable(let reason):
            answer = .unavailable(reason: reason)
        case .location(let latitude, let longitude, let accuracy, let timestamp, let altitude, let speed, let heading):
            guard let key = try await database.replyKey(request: id, user: user) else {
                // Not a waiting request of this user: let settle say which (gone or forbidden);
                // it changes nothing in either case.
                return try await database.settle(id: id, user: user, device: device, answer: .unavailable(reason: .error))
            }
            let fix = LocationFix(latitude: latitude, longitude: longitude, accuracyM: accuracy, timestampMs: timestamp,
                                  altitudeM: altitude, speedMps: speed, headingDeg: heading,
                                  deviceName: deviceName, platform: platform)
            answer = .location(sealed: try Sealing.seal(Array(try JSONEncoder().encode(fix)), to: key, requestID: id))
        }
        let settled = try await database.settle(id: id, user: user, device: device, answer: answer)
        if settled == .settled, let sealed = answer.sealed { memory.remember(sealed, for: id) }
        return settled
    }

    /// A `whereabot_replay` notification: re-send the sealed answer of `id` if this
    /// instance sealed it.
    func replay(_ id: UUID) async {
        guard let sealed = memory.sealed(for: id) else { return }
        do {
            if try await database.replayAnswer(id: id, sealed: sealed) { memory.countReplay() }
        } catch {
            logger.failure("replay_failed", error, ["request": id.uuidString])
        }
    }
}
