/// The body of a streamed response (`HTTPResponse.streaming`): what `write` is given goes
/// to the client at once as one HTTP/1.1 chunk. Writes after the client left are dropped.
public final class HTTPResponseStream: Sendable {
    private let emit: @Sendable ([UInt8]) -> Void

    init(emit: @escaping @Sendable ([UInt8]) -> Void) {
        self.emit = emit
    }

    /// Sends `bytes` now (nothing for an empty write: an empty chunk would end the body).
    public func write(_ bytes: [UInt8]) {
        guard !bytes.isEmpty else { return }
        emit(Array((String(bytes.count, radix: 16) + "\r\n").utf8) + bytes + [13, 10])
    }

    /// Sends `text` as UTF-8.
    public func write(_ text: String) { write(Array(text.utf8)) }
}
