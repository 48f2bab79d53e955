# =============================================================================
# DEVELOPMENT STAND-IN ONLY. Production never uses this file (see auth/standin/README.md).
# =============================================================================
"""The stand-in's state.

In the database, in Supabase Auth's own tables as the local shim (supabase/local/03_auth.sql)
shapes them, so a restart (`make auth`) forgets nothing and agents stay signed in:

- auth.oauth_authorizations: a pending authorization request (status `pending`; `user_id`
  set by the first user to read it); approved, with its code (`approved`,
  `authorization_code`, `approved_at`, `expires_at` moved to the code's expiry); denied
  (`denied`); and, unlike Supabase (which deletes the row at the exchange), a code once
  spent (`expired`), kept so that a reused code is caught. The session a code is exchanged
  for takes the row's `id`: a reused code finds it to revoke, and its refresh finds the
  `resource` the request named.
- auth.refresh_tokens: one row per refresh token (`revoked` once rotated out; `parent` the
  token it replaced). Its session (auth.sessions) holds the client (`oauth_client_id`) and
  the scopes (`scopes`); deleting the session deletes its tokens (on delete cascade).

Codes and refresh tokens are stored as their SHA-256 digests (common.digest), never in the
clear (Supabase keeps both as they were issued). Lifetimes: a request's and a code's are in
`expires_at`; a refresh token's is `created_at` + STANDIN_REFRESH_SECONDS. The bounds
(MAX_PENDING, MAX_CODES, MAX_REFRESH) are counted in SQL, under one advisory lock that every
stand-in on the database shares, after dropping what has expired.

In memory (State): sign-in links and the mail-rate marks only; a restart forgets them (a
link mailed before it no longer works; ask for a new one).
"""
import threading
import uuid
from dataclasses import dataclass, field

import psycopg

from common import MAX_CODES, MAX_PENDING, MAX_REFRESH

NIL_INSTANCE = "00000000-0000-0000-0000-000000000000"   # Supabase Auth's auth.*.instance_id
LOCK_KEY = 0x5354414E44494E                             # pg_advisory_xact_lock key ("STANDIN")
SECONDS = "interval '1 second' * %s"


def connect(database_url):
    """A connection to the database that holds the auth schema (autocommit)."""
    return psycopg.connect(database_url, autocommit=True, connect_timeout=5)


@dataclass
class Pending:
    """A pending authorization request."""
    key: str             # the row's id
    id: str              # authorization_id: what the consent page is given
    client_id: str
    user_id: str
    redirect_uri: str
    scope: str
    state: str
    resource: str
    code_challenge: str


@dataclass
class Code:
    """An authorization code's row: approved, or already spent."""
    key: str
    client_id: str
    user_id: str
    redirect_uri: str
    scope: str
    resource: str
    code_challenge: str
    spent: bool
    expired: bool


@dataclass
class Refresh:
    """A refresh token's row, with its session's client, scopes and resource."""
    id: int
    token: str           # the digest
    user_id: str
    session_id: str
    revoked: bool
    client_id: str       # None for the user's own session (from a sign-in link)
    scope: str
    resource: str


@dataclass
class Otp:
    """An emailed sign-in link's token (kept as its digest)."""
    user_id: str
    redirect_to: str
    expires: float


@dataclass
class State:
    """What stays in memory: sign-in links and when each address may get its next mail."""
    lock: threading.Lock = field(default_factory=threading.Lock)
    otps: dict = field(default_factory=dict)      # digest(link token) -> Otp
    sent: dict = field(default_factory=dict)      # email -> when it may get its next mail

    def purge(self, now):
        """Drops what has expired. Call with the lock held."""
        for key in [k for k, v in self.otps.items() if v.expires <= now]:
            del self.otps[key]
        for key in [k for k, v in self.sent.items() if v <= now]:
            del self.sent[key]


class Store:
    """Authorization requests, codes and refresh tokens in auth.oauth_authorizations and
    auth.refresh_tokens. Every method takes an open connection."""

    def __init__(self, authorization_seconds, code_seconds, refresh_seconds):
        self.authorization_seconds = authorization_seconds
        self.code_seconds = code_seconds
        self.refresh_seconds = refresh_seconds

    def lock_and_purge(self, conn):
        """In a transaction: waits for the other bounded writes, then drops what has expired
        (a spent code stays while the session it was exchanged for lives)."""
        conn.execute("select pg_advisory_xact_lock(%s)", (LOCK_KEY,))
        conn.execute("delete from auth.oauth_authorizations a where a.expires_at <= now() and not"
                     " (a.status = 'expired' and exists (select from auth.sessions s where s.id = a.id))")
        conn.execute(f"delete from auth.refresh_tokens where created_at <= now() - {SECONDS}", (self.refresh_seconds,))

    # --- authorization requests -------------------------------------------------------
    def add_pending(self, conn, client_id, redirect_uri, scope, state, resource, code_challenge):
        """A new pending request's authorization_id; None when MAX_PENDING are pending."""
        authorization_id = str(uuid.uuid4())
        with conn.transaction():
            self.lock_and_purge(conn)
            count = conn.execute("select count(*) from auth.oauth_authorizations where status = 'pending'")
            if count.fetchone()[0] >= MAX_PENDING:
                return None
            conn.execute(
                "insert into auth.oauth_authorizations (id, authorization_id, client_id, redirect_uri, scope, state,"
                " resource, code_challenge, code_challenge_method, response_type, status, created_at, expires_at)"
                " values (%s, %s, %s, %s, %s, %s, %s, %s, 's256', 'code', 'pending', now(),"
                f" now() + greatest({SECONDS}, interval '1 microsecond'))",
                (uuid.uuid4(), authorization_id, client_id, redirect_uri, scope, state or None, resource or None,
                 code_challenge, self.authorization_seconds))
        return authorization_id

    def pending(self, conn, authorization_id, user_id, bind):
        """The live pending request `authorization_id` if it is `user_id`'s; `bind` gives an
        unclaimed one to that user first."""
        if bind:
            conn.execute("update auth.oauth_authorizations set user_id = %s where authorization_id = %s"
                         " and status = 'pending' and user_id is null and expires_at > now()",
                         (user_id, authorization_id))
        row = conn.execute(
            "select id, authorization_id, client_id, user_id, redirect_uri, scope, coalesce(state, ''),"
            " coalesce(resource, ''), code_challenge from auth.oauth_authorizations where authorization_id = %s"
            " and status = 'pending' and expires_at > now() and user_id = %s", (authorization_id, user_id)).fetchone()
        if row is None:
            return None
        return Pending(str(row[0]), row[1], str(row[2]), str(row[3]), *row[4:])

    def approve(self, conn, pending, code_digest):
        """Gives the pending request its code: True; False when MAX_CODES are out (the
        request is dropped); None when it is no longer pending."""
        with conn.transaction():
            self.lock_and_purge(conn)
            count = conn.execute("select count(*) from auth.oauth_authorizations"
                                 " where authorization_code is not null and expires_at > now()")
            if count.fetchone()[0] >= MAX_CODES:
                gone = conn.execute("delete from auth.oauth_authorizations where id = %s and status = 'pending'"
                                    " and expires_at > now() returning id", (pending.key,)).fetchone()
                return False if gone else None
            approved = conn.execute(
                "update auth.oauth_authorizations set status = 'approved', authorization_code = %s,"
                f" approved_at = now(), expires_at = greatest(now() + {SECONDS}, created_at + interval '1 microsecond')"
                " where id = %s and status = 'pending' and user_id = %s and expires_at > now() returning id",
                (code_digest, self.code_seconds, pending.key, pending.user_id)).fetchone()
        return approved is not None

    def deny(self, conn, pending):
        conn.execute("update auth.oauth_authorizations set status = 'denied' where id = %s and status = 'pending'",
                     (pending.key,))

    def drop_grant(self, conn, user_id, client_id):
        """Forgets a user's codes and pending requests for a client."""
        conn.execute("delete from auth.oauth_authorizations where user_id = %s and client_id = %s",
                     (user_id, client_id))

    # --- codes --------------------------------------------------------------------------
    def claim_code(self, conn, code_digest):
        """In a transaction: the code's row, locked until it ends (a second exchange of the
        same code waits for the first to finish), or None."""
        row = conn.execute(
            "select id, client_id, user_id, redirect_uri, scope, coalesce(resource, ''), code_challenge,"
            " status = 'expired', expires_at <= now() from auth.oauth_authorizations"
            " where authorization_code = %s and status in ('approved', 'expired') for update",
            (code_digest,)).fetchone()
        if row is None:
            return None
        return Code(str(row[0]), str(row[1]), str(row[2]), *row[3:])

    def spend_code(self, conn, code):
        conn.execute("update auth.oauth_authorizations set status = 'expired' where id = %s", (code.key,))

    # --- refresh tokens -----------------------------------------------------------------
    def add_refresh(self, conn, token_digest, user_id, session_id, parent=None):
        """Stores a refresh token: True; False when MAX_REFRESH are kept; None when the
        session is gone (revoked meanwhile)."""
        with conn.transaction():
            self.lock_and_purge(conn)
            if conn.execute("select count(*) from auth.refresh_tokens").fetchone()[0] >= MAX_REFRESH:
                return False
            try:
                with conn.transaction():
                    conn.execute(
                        "insert into auth.refresh_tokens (instance_id, token, user_id, revoked, created_at,"
                        " updated_at, parent, session_id) values (%s, %s, %s, false, now(), now(), %s, %s)",
                        (NIL_INSTANCE, token_digest, str(user_id), parent, session_id))
            except psycopg.errors.ForeignKeyViolation:
                return None
        return True

    def claim_refresh(self, conn, token_digest):
        """In a transaction: the live (not expired) refresh token's row, locked until it
        ends, or None."""
        row = conn.execute(
            "select r.id, r.token, r.user_id, r.session_id, coalesce(r.revoked, false), s.oauth_client_id, s.scopes,"
            " a.resource from auth.refresh_tokens r join auth.sessions s on s.id = r.session_id"
            " left join auth.oauth_authorizations a on a.id = r.session_id"
            f" where r.token = %s and r.created_at > now() - {SECONDS} for update of r",
            (token_digest, self.refresh_seconds)).fetchone()
        if row is None:
            return None
        return Refresh(row[0], row[1], row[2], str(row[3]), row[4], str(row[5]) if row[5] else None, *row[6:])

    def spend_refresh(self, conn, entry):
        """Rotation: the token is spent. Only the newest spent token of a session is kept (to
        detect its reuse), so a session keeps at most two."""
        conn.execute("delete from auth.refresh_tokens where session_id = %s and revoked and id <> %s",
                     (entry.session_id, entry.id))
        conn.execute("update auth.refresh_tokens set revoked = true, updated_at = now() where id = %s", (entry.id,))

    def drop_refresh(self, conn, session_id):
        """Forgets every refresh token of a session."""
        conn.execute("delete from auth.refresh_tokens where session_id = %s", (session_id,))
