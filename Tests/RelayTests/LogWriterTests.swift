import Foundation
@testable import Relay
import Testing

/// The log writer against a pipe nobody reads: writing never waits for the reader, lines
/// past the bound are dropped and counted, and what was queued comes out whole and in order
/// once the reader reads.
@Suite struct LogWriterTests {
    @Test func aReaderThatDoesNotReadBlocksNobody() throws {
        var ends: [Int32] = [0, 0]
        #expect(pipe(&ends) == 0)
        defer { close(ends[0]); close(ends[1]) }
        let writer = LogWriter(fileDescriptor: ends[1])
        let line = String(repeating: "x", count: 999)  // 1,000 bytes with its newline
        let total = 4 * LogWriter.maximumPendingBytes / 1000  // four buffers' worth, far past the pipe's 64 KiB
        for index in 0..<total { writer.write(String(format: "%06d", index) + line.dropFirst(6)) }
        // Reaching here is the point: a blocking writer would hang on the full pipe.
        #expect(writer.dropped > 0 && writer.dropped < total)
        let kept = total - writer.dropped
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while received.count < kept * 1000 {
            let count = read(ends[0], &buffer, buffer.count)
            guard count > 0 else { break }
            received += buffer[0..<count]
        }
        let lines = String(decoding: received, as: UTF8.self).split(separator: "\n")
        #expect(lines.count == kept)
        #expect(lines.allSatisfy { $0.utf8.count == 999 }, "whole lines only")
        #expect(lines.first?.hasPrefix("000000") == true)
        #expect(lines.map { Int($0.prefix(6))! } == lines.map { Int($0.prefix(6))! }.sorted(), "in order")
        writer.flush()
    }

    /// `flush` returns once everything queued is written.
    @Test func flushWaitsForTheQueue() throws {
        var ends: [Int32] = [0, 0]
        #expect(pipe(&ends) == 0)
        defer { close(ends[0]) }
        let writer = LogWriter(fileDescriptor: ends[1])
        for index in 0..<100 { writer.write("line \(index)") }
        writer.flush()
        close(ends[1])
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while case let count = read(ends[0], &buffer, buffer.count), count > 0 { received += buffer[0..<count] }
        #expect(String(decoding: received, as: UTF8.self).split(separator: "\n").last == "line 99")
        #expect(writer.dropped == 0)
    }
}
