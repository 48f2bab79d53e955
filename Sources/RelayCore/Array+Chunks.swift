extension Array {
    /// The array cut into consecutive slices of at most `size` elements (for calls that
    /// take a bounded list).
    package func chunks(of size: Int) -> [[Element]] {
        precondition(size > 0, "a chunk holds at least one element")
        return stride(from: 0, to: count, by: size).map { Array(self[$0..<Swift.min($0 + size, count)]) }
    }
}
