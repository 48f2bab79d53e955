/// Bytes waiting to be written, as a queue of chunks.
struct OutboundQueue {
    private var chunks: [[UInt8]] = []
    private var head = 0
    private var offset = 0
    private(set) var count = 0

    var isEmpty: Bool { count == 0 }

    mutating func append(_ bytes: [UInt8]) {
        guard !bytes.isEmpty else { return }
        chunks.append(bytes)
        count += bytes.count
    }

    /// The unwritten part of the first chunk.
    var front: ArraySlice<UInt8>? {
        head < chunks.count ? chunks[head][offset...] : nil
    }

    mutating func consume(_ written: Int) {
        count -= written
        offset += written
        if offset == chunks[head].count {
            head += 1
            offset = 0
            if head == chunks.count { chunks.removeAll(); head = 0 }
        }
    }
}
