@testable import Relay
import Testing

/// PUSH_PER_TARGET_PER_HOUR and PUSH_PER_ACCOUNT_PER_HOUR: defaults, values, and refusals
/// that name the variable.
@Suite struct PushBudgetsTests {
    @Test func defaultsAndValues() throws {
        #expect(try PushBudgets.from([:]) == PushBudgets(perTargetPerHour: 30, perAccountPerHour: 100))
        #expect(try PushBudgets.from(["PUSH_PER_TARGET_PER_HOUR": "5", "PUSH_PER_ACCOUNT_PER_HOUR": "20"])
                == PushBudgets(perTargetPerHour: 5, perAccountPerHour: 20))
    }

    @Test(arguments: [("PUSH_PER_TARGET_PER_HOUR", "0"), ("PUSH_PER_TARGET_PER_HOUR", "1001"),
                      ("PUSH_PER_ACCOUNT_PER_HOUR", "lots"), ("PUSH_PER_ACCOUNT_PER_HOUR", "-3")])
    func outOfRangeValuesStopServe(variable: String, value: String) {
        #expect(throws: PushSettings.Invalid.self) { try PushBudgets.from([variable: value]) }
        do { _ = try PushBudgets.from([variable: value]) } catch { #expect(error.variable == variable) }
    }
}
