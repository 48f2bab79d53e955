/// What a phone shows when an agent asks: "Your agent NAME wants to know your location"
/// ("R's agent NAME …" for a person sharing with the asker, "An agent …" without a name).
/// The alert push, the browser phone (`app.js`'s `who`) and `whereabot phone` say the same.
public enum PromptText {
    /// The prompt for a ping's `agent_name` and `requester.name`.
    public static func asking(agentName: String?, requester: String?) -> String {
        PushPayload.body(kind: .alert, agentName: agentName, requester: requester)
    }
}
