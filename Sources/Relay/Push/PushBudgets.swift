import Foundation

/// How many pushes the relay sends over any rolling hour, whatever agents do (docs/protocol.md, "Budgets"):
/// `relay.claim_push` pays for each target out of the target's and the owner's budget and
/// leaves out the targets it cannot pay for.
public struct PushBudgets: Sendable, Equatable {
    /// Pushes one APNs token or Web Push subscription gets per hour (PUSH_PER_TARGET_PER_HOUR).
    public var perTargetPerHour: Int
    /// Pushes to all of one account's targets per hour (PUSH_PER_ACCOUNT_PER_HOUR).
    public var perAccountPerHour: Int

    /// The defaults: 30 per target and 100 per account an hour.
    public init(perTargetPerHour: Int = 30, perAccountPerHour: Int = 100) {
        self.perTargetPerHour = perTargetPerHour
        self.perAccountPerHour = perAccountPerHour
    }

    /// The values `relay.claim_push` accepts.
    static let targetRange = 1...1000, accountRange = 1...10_000

    /// The budgets the environment sets, else the defaults; a value out of range stops `serve`.
    public static func from(_ environment: [String: String]) throws(PushSettings.Invalid) -> PushBudgets {
        func number(_ name: String, _ range: ClosedRange<Int>, _ fallback: Int) throws(PushSettings.Invalid) -> Int {
            guard let text = environment[name], !text.isEmpty else { return fallback }
            guard let value = Int(text), range.contains(value) else {
                throw PushSettings.Invalid(variable: name, problem: "must be a whole number from \(range.lowerBound) to \(range.upperBound)")
            }
            return value
        }
        let defaults = PushBudgets()
        return PushBudgets(perTargetPerHour: try number("PUSH_PER_TARGET_PER_HOUR", targetRange, defaults.perTargetPerHour),
                           perAccountPerHour: try number("PUSH_PER_ACCOUNT_PER_HOUR", accountRange, defaults.perAccountPerHour))
    }
}
