// `push-bench`: APNs pushes per second through the Push module's transport to a (fake)
// APNs, with how many connections it opened. Prints numbers, asserts nothing.
//   push-bench URL CA_FILE KEY_FILE KEY_ID TEAM_ID TOPIC COUNT CONCURRENCY
import Crypto
import Foundation
import Push

let arguments = CommandLine.arguments
guard arguments.count == 9, let count = Int(arguments[7]), let concurrency = Int(arguments[8]) else {
    FileHandle.standardError.write(Data("usage: push-bench URL CA_FILE KEY_FILE KEY_ID TEAM_ID TOPIC COUNT CONCURRENCY\n".utf8))
    exit(64)
}
let key = try P256Key(pem: String(contentsOfFile: arguments[3], encoding: .utf8))
let transport = try CurlTransport(caFile: arguments[2])
transport.start()
let sender = APNsSender(configuration: .init(keyID: arguments[4], teamID: arguments[5], topic: arguments[6], key: key,
                                             baseURL: arguments[1]), transport: transport)
let payload = Array(#"{"aps":{"alert":{"title":"Whereabot","body":"Benchmark"}}}"#.utf8)
let deadline = Date().addingTimeInterval(60)

func push(_ index: Int) async -> PushResult {
    let token = String(repeating: String(format: "%08x", index), count: 8)
    return await sender.send(.init(token: token, environment: "production", pushType: "alert", priority: 10,
                                   collapseID: nil, id: APNsSender.notificationID("bench", String(index)), payload: payload,
                                   deadline: deadline)).result
}

_ = await push(-1)  // connect and mint the provider token first
let started = ContinuousClock.now
let sent = await withTaskGroup(of: Int.self) { group in
    var next = 0, sent = 0
    for _ in 0..<min(concurrency, count) {
        let index = next
        next += 1
        group.addTask { await push(index) == .sent ? 1 : 0 }
    }
    for await result in group {
        sent += result
        if next < count {
            let index = next
            next += 1
            group.addTask { await push(index) == .sent ? 1 : 0 }
        }
    }
    return sent
}
let elapsed = ContinuousClock.now - started
let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
print(String(format: "{\"sent\":%d,\"count\":%d,\"seconds\":%.3f,\"per_second\":%.0f,\"connections\":%d}",
             sent, count, seconds, Double(sent) / seconds, transport.statistics.connections))
transport.shutdown()
