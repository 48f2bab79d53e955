# =============================================================================
# DEVELOPMENT STAND-IN ONLY. Production never uses this file (see auth/standin/README.md).
# =============================================================================
"""Sign-in by magic link (the users' own sessions): /otp mails a one-time link to the
development mailbox, /verify spends it, /token refreshes, /logout ends sessions."""
import html
import json
import secrets
import time
import urllib.parse
import uuid

from common import (EMAIL_RE, MAX_EMAIL, MAX_OTPS, MAX_URI, OTP_EXPIRED, USER_COLUMNS, api_error, digest,
                    grant_error, single)
from storage import Otp


class SignIn:
    """Magic link, the user's refresh grant and logout (a mixin of server.StandIn)."""

    # --- sign-in by magic link (the users' own sessions) --------------------------------
    def allowed_redirect(self, url):
        """`url` when it may receive a sign-in (same origin as AUTH_SITE_URL), else the site:
        as Supabase Auth falls back to SITE_URL for a redirect_to not on its allow-list."""
        if not url or not isinstance(url, str) or len(url) > MAX_URI or "#" in url or "\\" in url:
            return self.site_url
        if any(c.isspace() or ord(c) < 0x20 or ord(c) == 0x7f for c in url):
            return self.site_url
        try:
            parts = urllib.parse.urlsplit(url)
            parts.port
        except ValueError:
            return self.site_url
        if f"{parts.scheme.lower()}://{parts.netloc.lower()}" != self.site_origin.lower() or "@" in parts.netloc:
            return self.site_url
        return url

    def link_user(self, email, create_user, data):
        """The user a link for `email` signs in: found, or created (`create_user`)."""
        with self.db() as conn:
            find = ("select id, deleted_at is not null or coalesce(banned_until > now(), false)"
                    " from auth.users where lower(email) = %s and is_sso_user = false order by created_at limit 1")
            row = conn.execute(find, (email,)).fetchone()
            if row is None:
                if not create_user:
                    raise api_error(422, "otp_disabled", "Signups not allowed for otp")
                conn.execute(
                    "insert into auth.users (instance_id, id, aud, role, email, raw_app_meta_data, raw_user_meta_data,"
                    " created_at, updated_at, is_sso_user, is_anonymous)"
                    " values ('00000000-0000-0000-0000-000000000000', %s, 'authenticated', 'authenticated', %s, %s,"
                    " %s, now(), now(), false, false) on conflict do nothing",
                    (uuid.uuid4(), email, json.dumps({"provider": "email", "providers": ["email"]}),
                     json.dumps(data or {})))
                row = conn.execute(find, (email,)).fetchone()
            if row is None or row[1]:
                raise api_error(403, "user_banned", "User is banned")
            conn.execute("update auth.users set recovery_sent_at = now() where id = %s", (row[0],))
        return str(row[0])

    def send_magic_link(self, query, body):
        """POST /otp: a one-time sign-in link, mailed to the development mailbox. 200 {}."""
        if not isinstance(body, dict):
            raise api_error(400, "validation_failed", "the body must be a JSON object")
        if body.get("phone"):
            raise api_error(400, "validation_failed", "phone sign-in is not supported by the stand-in")
        if body.get("code_challenge") or body.get("code_challenge_method"):
            raise api_error(400, "validation_failed",
                            "the PKCE flow is not supported by the stand-in; use the implicit flow")
        email = body.get("email")
        if not isinstance(email, str) or not email.strip():
            raise api_error(400, "validation_failed", "An email address is required")
        email = email.strip().lower()
        if len(email) > MAX_EMAIL:
            raise api_error(400, "validation_failed", "An email address is too long")
        if not EMAIL_RE.match(email):
            raise api_error(400, "validation_failed", "Unable to validate email address: invalid format")
        create_user = body.get("create_user", True)
        data = body.get("data")
        if not isinstance(create_user, bool) or (data is not None and not isinstance(data, dict)):
            raise api_error(400, "validation_failed", "create_user must be a boolean and data an object")
        redirect = single(query, "redirect_to")
        if redirect is None:
            raise api_error(400, "validation_failed", "redirect_to must be given once")
        if not redirect and isinstance(body.get("redirect_to"), str):
            redirect = body["redirect_to"]
        redirect = self.allowed_redirect(redirect)
        now = time.time()
        with self.state.lock:
            self.state.purge(now)
            if email in self.state.sent:
                wait = max(1, int(self.state.sent[email] - now + 0.999))
                raise api_error(429, "over_email_send_rate_limit",
                                f"For security purposes, you can only request this after {wait} seconds.")
            if len(self.state.sent) >= MAX_OTPS:
                raise api_error(429, "over_email_send_rate_limit", "Email rate limit exceeded")
            if self.otp_interval > 0:
                self.state.sent[email] = now + self.otp_interval
        try:
            user_id = self.link_user(email, create_user, data)
        except BaseException:
            with self.state.lock:   # a refused request does not hold the address up
                self.state.sent.pop(email, None)
            raise
        token = secrets.token_urlsafe(32)
        with self.state.lock:
            # As Supabase Auth keeps one link per user and kind: a new link replaces the last.
            for key in [k for k, v in self.state.otps.items() if v.user_id == user_id]:
                del self.state.otps[key]
            if len(self.state.otps) >= MAX_OTPS:
                raise api_error(429, "over_email_send_rate_limit", "too many sign-in links pending; try again later")
            self.state.otps[digest(token)] = Otp(user_id=user_id, redirect_to=redirect,
                                                 expires=now + self.otp_seconds)
        link = self.issuer + "/verify?" + urllib.parse.urlencode(
            {"token": token, "type": "magiclink", "redirect_to": redirect})
        text = ("Magic Link\n\nFollow this link to login:\n\n" + link + "\n\n"
                "(Whereabot's local development stand-in for Supabase Auth; the link works once,"
                f" for {self.otp_seconds} seconds.)\n")
        body_html = ("<h2>Magic Link</h2>\n<p>Follow this link to login:</p>\n<p><a href=\"" + html.escape(link) +
                     "\">Log In</a></p>\n")
        self.mailbox.deliver(email, "Your Magic Link", text, body_html)
        return {}

    def verify_link(self, query, user_agent, ip):
        """GET /verify: spends a link's token and returns the URL to 303 to: the page that
        asked, with the session in the fragment (implicit flow) or Supabase's error."""
        token, kind = single(query, "token"), single(query, "type")
        if kind != "magiclink":
            raise api_error(400, "validation_failed", "Verify requires a verification type (magiclink)")
        if not token:
            raise api_error(400, "validation_failed", "Verify requires a token")
        now = time.time()
        with self.state.lock:
            self.state.purge(now)
            entry = self.state.otps.pop(digest(token), None)   # single use
        if entry is None:
            asked = single(query, "redirect_to")
            return self.allowed_redirect(asked) + "#" + urllib.parse.urlencode(OTP_EXPIRED)
        with self.db() as conn:
            user = conn.execute(
                "update auth.users u set email_confirmed_at = coalesce(u.email_confirmed_at, now()),"
                " last_sign_in_at = now(), updated_at = now()"
                " where u.id = %s and u.deleted_at is null and (u.banned_until is null or u.banned_until < now())"
                f" returning {USER_COLUMNS}", (entry.user_id,)).fetchone()
            if user is None:
                return entry.redirect_to + "#" + urllib.parse.urlencode(OTP_EXPIRED)
            session_id = str(uuid.uuid4())
            conn.execute(
                "insert into auth.sessions (id, user_id, created_at, updated_at, aal, user_agent, ip)"
                " values (%s, %s, now(), now(), 'aal1', %s, %s)",
                (session_id, entry.user_id, (user_agent or "")[:512] or None, ip))
            answer = self.tokens(conn, entry.user_id, session_id, None, None, None, user, "otp")
        fragment = urllib.parse.urlencode({
            "access_token": answer["access_token"], "expires_at": answer["expires_at"],
            "expires_in": answer["expires_in"], "refresh_token": answer["refresh_token"],
            "token_type": "bearer", "type": "magiclink"})
        return entry.redirect_to + "#" + fragment

    @staticmethod
    def user_json(user):
        email, phone, app_meta, user_meta, anonymous, user_id, aud, role, confirmed, created, updated, last = user
        stamp = lambda t: t.isoformat() if t else None  # noqa: E731
        return {"id": str(user_id), "aud": aud or "authenticated", "role": role or "authenticated",
                "email": email or "", "email_confirmed_at": stamp(confirmed), "phone": phone or "",
                "confirmed_at": stamp(confirmed), "last_sign_in_at": stamp(last),
                "app_metadata": app_meta or {}, "user_metadata": user_meta or {}, "is_anonymous": bool(anonymous),
                "created_at": stamp(created), "updated_at": stamp(updated)}

    def user_token_grant(self, query, body):
        """POST /token?grant_type=refresh_token with JSON {refresh_token}: Supabase Auth's
        own refresh (what auth-js and the browser phone send), for sessions from a link."""
        grant_type = single(query, "grant_type")
        if grant_type != "refresh_token":
            raise grant_error("validation_failed", "grant_type must be refresh_token (the stand-in signs in by"
                                                   " magic link only)", "unsupported_grant_type")
        token = body.get("refresh_token") if isinstance(body, dict) else None
        if not isinstance(token, str) or not token:
            raise grant_error("validation_failed", "refresh_token is required", "invalid_request")
        with self.db() as conn:
            entry, user = self.rotate_refresh(conn, token, None, grant_error)
            # As Supabase Auth, a refreshed token keeps the session's sign-in method in `amr`.
            answer = self.tokens(conn, entry.user_id, entry.session_id, None, None, None, user, "otp",
                                 parent=entry.token)
        answer["user"] = self.user_json(user)
        return answer

    def logout(self, bearer, query):
        """POST /logout: ends the bearer's session (scope local, the default here), or all
        the user's own sessions (global), or all but this one (others). Never OAuth
        clients' sessions: those end when their grant is revoked."""
        scope = single(query, "scope") or "local"
        if scope not in ("local", "global", "others"):
            raise api_error(400, "validation_failed", "scope must be local, global or others")
        with self.db() as conn:
            user_id, _, session_id = self.user_from_bearer(bearer, conn, with_session=True)
            if scope == "local":
                gone = [session_id]
            else:
                gone = [str(r[0]) for r in conn.execute(
                    "select id from auth.sessions where user_id = %s and oauth_client_id is null"
                    " and (%s or id <> %s)", (user_id, scope == "global", session_id)).fetchall()]
            for sid in gone:
                self.revoke_session(conn, sid)
