import RelayCore

/// The bus's notifications for this instance's phones and calls, a batch at a time (one
/// change of executor for the batch): each is the event it means, handled in the order they
/// came (docs/database.md, "Channels").
extension InstanceDriver {
    /// Handles `notifications` in order.
    func notified(_ notifications: [RelayNotification]) async {
        for notification in notifications {
            switch notification {
            case .answer(let answer, let cancel):
                await deliver(answer)
                if cancel { await self.cancel(request: answer.id) }
            case .locate(let message, let owner):
                await ping(message, owner: owner)
            case .cancel(let id):
                await self.cancel(request: id)
            case .reminder(let reminder, let owner, _):
                await tell(owner: owner, reminder.phoneJSON)
            case .replay(let id):
                await replay(id)
            case .device(let device, let owner, let kind, let connection):
                await deviceEvent(device: device, owner: owner, event: kind, connection: connection)
            case .key(let id):
                await keyRevoked(id)
            }
        }
    }
}
