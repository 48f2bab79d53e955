import Foundation
import JSON
import PGBus
import Relay

/// `whereabot token` and `whereabot keys`: development helpers against ADMIN_DATABASE_URL.
enum TokenCommand {
    /// Runs `body` on a connection to ADMIN_DATABASE_URL and closes it before returning,
    /// also on errors: a close still running on another thread while the process exits
    /// races libpq's (and libldap's) exit handlers (a double free seen in CI).
    static func withAdminConnection<T: Sendable>(_ environment: [String: String],
                                                 _ body: (PGConnection) async throws -> T) async throws -> T {
        guard let url = environment["ADMIN_DATABASE_URL"], !url.isEmpty else {
            throw CommandError.usage("ADMIN_DATABASE_URL is required (run `make env` for the local one)")
        }
        let db = try await PGConnection.connect(PGConfiguration(url, applicationName: "whereabot-cli"))
        do {
            let result = try await body(db)
            await db.close()
            return result
        } catch {
            await db.close()
            throw error
        }
    }

    /// The JWT claims PostgREST would set for `user`, so that RLS decides as for the app.
    private static func userClaims(_ user: UUID) -> PGJSON {
        PGJSON(text: JSONValue.object(["sub": .string(user.uuidString.lowercased()), "role": "authenticated"]).text)
    }

    /// The user with `email`, created (with `name`) when missing.
    static func user(_ db: PGConnection, email: String, name: String?) async throws -> UUID {
        if let existing = try await db.query("select id from auth.users where lower(email) = lower($1)", [email]).first {
            return try existing.decode(0, as: UUID.self)
        }
        return try await db.query("""
            insert into auth.users (id, aud, role, email, raw_user_meta_data, email_confirmed_at, created_at, updated_at)
            values (gen_random_uuid(), 'authenticated', 'authenticated', $1, jsonb_build_object('full_name', $2::text), now(), now(), now())
            returning id
            """, [email, name ?? String(email.split(separator: "@").first ?? "")]).scalar(UUID.self)
    }

    /// `whereabot token --email E [--name N] [--agent CLIENT_NAME]`
    static func token(_ options: Options, environment: [String: String]) async throws {
        guard let secret = environment["SUPABASE_JWT_SECRET"], !secret.isEmpty else {
            throw CommandError.usage("SUPABASE_JWT_SECRET is required to sign development tokens")
        }
        guard let email = options["email"] else { throw CommandError.usage("token needs --email") }
        try await withAdminConnection(environment) { db in
            let userID = try await user(db, email: email, name: options["name"])
            var clientID: UUID?
            if let agent = options["agent"] {
                clientID = try await db.query("select id from auth.oauth_clients where client_name = $1 and deleted_at is null", [agent])
                    .first?.decode(0, as: UUID.self)
                if clientID == nil {
                    // Every column real Supabase Auth requires (none has a default there); the
                    // client never signs in through OAuth, so its redirect URI is never used.
                    clientID = try await db.query("""
                        insert into auth.oauth_clients (id, client_name, registration_type, client_type, redirect_uris,
                                                        grant_types, token_endpoint_auth_method)
                        values (gen_random_uuid(), $1, 'manual', 'public', 'http://localhost/unused',
                                'authorization_code,refresh_token', 'none')
                        returning id
                        """, [agent]).scalar(UUID.self)
                }
            }
            let session = try await db.query("""
                insert into auth.sessions (id, user_id, created_at, updated_at, aal, oauth_client_id)
                values (gen_random_uuid(), $1, now(), now(), 'aal1', $2) returning id
                """, [userID, clientID]).scalar(UUID.self)
            let now = Int(Date().timeIntervalSince1970)
            let lifetime = (Int(options["hours"] ?? "24") ?? 24) * 3600
            var claims: [String: JSONValue] = ["sub": .string(userID.uuidString.lowercased()), "aud": "authenticated",
                                               "role": "authenticated", "email": .string(email),
                                               "session_id": .string(session.uuidString.lowercased()), "iat": JSONValue(now),
                                               "exp": JSONValue(now + lifetime)]
            if let clientID { claims["client_id"] = .string(clientID.uuidString.lowercased()) }
            if let url = environment["SUPABASE_URL"], !url.isEmpty { claims["iss"] = .string(url + "/auth/v1") }
            let token = JWTSigner.hs256(claims: .object(claims), secret: secret)
            if options["app-link"] != nil, clientID == nil {
                // The browser phone signs in from the same fragment Supabase Auth returns (docs/protocol.md,
                // "Signing in the browser").
                // `whereabot_link=1` marks it as this command's link: the page started no sign-in
                // for it, so it signs in only after a confirmation naming the account (docs/security.md).
                let relay = (options["relay"] ?? environment["PUBLIC_URL"] ?? "http://127.0.0.1:8080")
                    .trimmingCharacters(in: CharacterSet(charactersIn: "/"))
                print("\(relay)/app/#access_token=\(token)&token_type=bearer&expires_in=\(lifetime)&sb&whereabot_link=1")
            } else {
                print(token)
            }
        }
    }

    /// `whereabot keys create --email E --name N` and `whereabot keys revoke ID`
    static func keys(_ arguments: [String], _ options: Options, environment: [String: String]) async throws {
        try await withAdminConnection(environment) { db in
            switch arguments.first {
            case "create":
                guard let email = options["email"], let name = options["name"] else {
                    throw CommandError.usage("keys create needs --email and --name")
                }
                let userID = try await user(db, email: email, name: nil)
                print(try await db.asUser(claims: userClaims(userID)) { try await $0.query("select public.create_agent_key($1)", [name]).scalar(String.self) })
            case "revoke":
                guard arguments.count > 1, let id = UUID(uuidString: arguments[1]) else { throw CommandError.usage("keys revoke needs a key id") }
                guard let owner = try await db.query("select user_id from public.agent_keys where id = $1", [id]).first else {
                    throw CommandError.usage("no agent key with that id")
                }
                let revoked = try await db.asUser(claims: userClaims(try owner.decode(0, as: UUID.self))) { try await $0.query("select public.revoke_agent_key($1)", [id]).scalar(Bool.self) }
                print(revoked ? "revoked" : "already revoked")
            default:
                throw CommandError.usage("keys create --email E --name N | keys revoke ID")
            }
        }
    }
}

/// `--name value` options after the command.
struct Options {
    private var values: [String: String] = [:]
    private(set) var positional: [String] = []

    init(_ arguments: [String]) {
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            if argument.hasPrefix("--"), index + 1 < arguments.count, !arguments[index + 1].hasPrefix("--") {
                values[String(argument.dropFirst(2))] = arguments[index + 1]
                index += 2
            } else if argument.hasPrefix("--") {
                values[String(argument.dropFirst(2))] = ""  // a flag such as --app-link
                index += 1
            } else {
                positional.append(argument)
                index += 1
            }
        }
    }

    subscript(name: String) -> String? { values[name] }
}
