import Crypto
import Foundation
import RelayCore

/// A phone's answer, from its socket (the value's settlement of the phones' `settle`) or
/// from `POST /v1/device/answer` (the event `answered`): the value decides whether a fix is
/// kept by a call waiting here or sealed to the request's reply key, and what the result
/// means (`Instance+Settle.swift`); the driver performs the reply key's lookup, the sealing
/// and the settle, and reports each result as an event.
///
/// The database notifies the waiter's instance of an answer, never this one: an answer
/// settled here reaches the call waiting here in the settle's own result event.
extension InstanceDriver {
    /// One answer without a socket (`POST /v1/device/answer`): settled as from a socket,
    /// and the phones here that got the ping are told it ended (the database does not
    /// notify the settling instance).
    /// - Throws: database errors (the caller answers 503).
    func answer(id: UUID, user: UUID, reply: PhoneMessage.PhoneReply) async throws -> RelayStatus.Settle {
        let ticket = RandomUUID.make()
        await handle(.answered(Settlement(ticket: ticket, id: id, user: user, reply: reply)))
        // The settle is awaited within the event (its steps are awaited actions), so its
        // status is here when `handle` returns.
        guard let result = settlements.removeValue(forKey: ticket) else { throw SettleError.notSettled }
        return try result.get()
    }

    /// Settles `answer` of `settlement` and reports the result as the event `settled`; a
    /// socket's answer the database could not take is held (and counted for the resync).
    func settle(_ settlement: Settlement, _ answer: PhoneAnswer) async {
        let database = self.database, instance = self.instance
        let result = await catching {
            try await database.settle(id: settlement.id, user: settlement.user, device: settlement.device, answer: answer,
                                      instance: instance)
        }
        if case .failure(let error) = result, case .socket = settlement.origin {
            logger.failure("answer_held", error, ["request": settlement.id.uuidString])
            resyncTally.settleFailures += 1
        }
        await handle(.settled(settlement, answer, result))
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

/// A settle's status did not come back within its event (a defect: its steps are awaited).
enum SettleError: Error {
    case notSettled
}

/// `body`'s result, its error included (run on the caller's actor).
func catching<T>(isolation: isolated (any Actor)? = #isolation, _ body: () async throws -> T) async -> Result<T, any Error> {
    do { return .success(try await body()) } catch { return .failure(error) }
}
