@testable import PGBus
import Testing

/// What operators see when the database cannot be used: where (host and port, never a
/// user or password) and why (a phrase from a fixed list, never the server's message).
@Suite struct ErrorReasonTests {
    /// URLs and conninfo strings name their hosts and ports, defaults filled in.
    @Test func endpoints() {
        #expect(PGConfiguration("postgresql://whereabot_relay:s3cret@127.0.0.1:54322/postgres").endpoint == "127.0.0.1:54322")
        #expect(PGConfiguration("postgresql://u:p@db.example.com/x?sslmode=require").endpoint == "db.example.com:5432")
        #expect(PGConfiguration("postgresql://u@a:1,b:2/x").endpoint == "a:1,b:2")
        #expect(PGConfiguration("host=10.0.0.5 port=6543 user=u password=hunter2 dbname=x").endpoint == "10.0.0.5:6543")
        #expect(PGConfiguration("postgresql://u@[2001:db8::1]:5433/x").endpoint == "[2001:db8::1]:5433")
        #expect(PGConfiguration("host=/var/run/postgresql dbname=x").endpoint == "socket /var/run/postgresql:5432")
        #expect(PGConfiguration("postgresql://%zz").endpoint == "unparsable settings")
        #expect(!PGConfiguration("postgresql://%zz").isParsable && !PGConfiguration("nonsense").isParsable)
        #expect(PGConfiguration("postgresql://u:p@h/x").isParsable && PGConfiguration("host=h dbname=x").isParsable)
        #expect(!PGConfiguration("postgresql://u:s3cret@h/x").endpoint.contains("s3cret"))
    }

    /// A refused connect says "connection refused"; libpq's and the server's other
    /// messages map to their phrases, and anything unknown to a generic one.
    @Test func reasons() async {
        var configuration = PGConfiguration("postgresql://u:p@127.0.0.1:1/x")
        configuration.connectTimeoutSeconds = 1
        await #expect { _ = try await PGConnection.connect(configuration) } throws: { error in
            (error as? PGError)?.reason == "connection refused"
        }
        #expect(PGError(.connectionFailed, detail: "connection to server at \"h\" (10.0.0.1), port 5432 failed: timeout expired").reason == "timeout")
        #expect(PGError(.connectionFailed, detail: "FATAL:  password authentication failed for user \"x\"").reason == "authentication failed")
        #expect(PGError(.connectionFailed, detail: "could not translate host name \"nope\" to address").reason == "unknown host")
        #expect(PGError(.connectionFailed, detail: "FATAL:  the database system is starting up").reason == "starting up")
        #expect(PGError(.connectionFailed, detail: "FATAL:  database \"secret_name\" does not exist").reason == "database or role does not exist")
        #expect(PGError(.connectionFailed, detail: "something new").reason == "connection failed")
        #expect(PGError(.server, sqlState: "25006", detail: "cannot execute INSERT in a read-only transaction").reason == "read-only (a standby)")
        #expect(PGError(.timedOut).reason == "no answer within the call deadline")
    }
}
