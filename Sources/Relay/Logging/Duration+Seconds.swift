extension Duration {
    /// The duration in seconds, fractions included (for metrics, logs and `Date` arithmetic).
    var seconds: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }
}
