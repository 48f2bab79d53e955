-- =============================================================================
-- Relay credential checks: agent keys, sessions, OAuth client names
-- =============================================================================
-- A socket is only as good as the session behind its token. Signing out deletes the
-- session's auth.sessions row; removing a device revokes the session that registered it
-- (private.revoked_sessions, 11_devices.sql). A user who is banned (auth.users.banned_until
-- not yet passed) or deleted (deleted_at set) has no live session and no live agent key,
-- whatever their rows say (docs/agents.md, "Credentials").

-- -----------------------------------------------------------------------------
-- relay.agent_key_owner(key_hash) → user_id, key_id, key_name, email (no row: refuse)
-- -----------------------------------------------------------------------------
-- The relay hashes the presented key (SHA-256, hex) and never sends the plaintext here.
-- last_used_at is touched at most once a minute per key to spare writes.
create or replace function relay.agent_key_owner(p_key_hash text)
returns table (user_id uuid, key_id uuid, key_name text, email text)
language plpgsql
security definer
set search_path = ''
as $$
begin
  if p_key_hash is null or p_key_hash !~ '^[0-9a-f]{64}$' then
    raise exception 'key_hash must be 64 lowercase hex digits' using errcode = '22023';
  end if;
  update public.agent_keys k set last_used_at = now()
  where k.key_hash = p_key_hash and k.revoked_at is null
    and (k.last_used_at is null or k.last_used_at < now() - interval '1 minute');
  return query
    select k.user_id, k.id, k.name, u.email::text
    from public.agent_keys k
    join auth.users u on u.id = k.user_id
    where k.key_hash = p_key_hash and k.revoked_at is null
      and (u.banned_until is null or u.banned_until < now()) and u.deleted_at is null;
end;
$$;
comment on function relay.agent_key_owner(text) is
  'The owner of the live agent key with this SHA-256 hash, or no row.';

-- -----------------------------------------------------------------------------
-- relay.session_states(sessions, users) → alive | signed_out | device_removed, in order
-- -----------------------------------------------------------------------------
-- The relay checks a token's session before a phone's socket opens, and a hello checks it
-- again (private.register_socket); in a reconnect storm the checks of many sockets go as
-- one call (at most 1000 pairs). signed_out: no auth.sessions row of that user, or past
-- not_after, and no live token family of the relay's own OAuth server (its access tokens
-- name their family as session_id, 35_relay_oauth_server.sql), or a user who is banned or
-- deleted (as relay.agent_key_owner refuses them); device_removed: revoked by removing its
-- device.
create or replace function relay.session_states(p_sessions uuid[], p_users uuid[])
returns text[]
language plpgsql
stable
security definer
set search_path = ''
as $$
begin
  if p_sessions is null or p_users is null or cardinality(p_sessions) <> cardinality(p_users)
     or cardinality(p_sessions) > 1000 then
    raise exception 'session_states needs as many users as sessions, at most 1000' using errcode = '22023';
  end if;
  if array_position(p_sessions, null) is not null or array_position(p_users, null) is not null then
    raise exception 'session_states needs session and user ids' using errcode = '22004';
  end if;
  return array(
    select case
             when not exists (select from auth.users u
                              where u.id = x.user_id and u.deleted_at is null
                                and (u.banned_until is null or u.banned_until < now())) then 'signed_out'
             when exists (select from auth.sessions s
                          where s.id = x.session_id and s.user_id = x.user_id
                            and (s.not_after is null or s.not_after > now())) then
               case when exists (select from private.revoked_sessions r where r.session_id = x.session_id)
                    then 'device_removed' else 'alive' end
             when exists (select from private.oauth_families f join public.oauth_grants g on g.id = f.grant_id
                          where f.id = x.session_id and g.user_id = x.user_id
                            and f.revoked_at is null and f.expires_at > now()) then 'alive'
             else 'signed_out'
           end
    from unnest(p_sessions, p_users) with ordinality as x(session_id, user_id, n)
    order by x.n);
end;
$$;
comment on function relay.session_states(uuid[], uuid[]) is
  'The state of each (session, user) pair, in order: alive, signed_out (no auth.sessions row or live token family of the relay''s OAuth server, past not_after, or a banned or deleted user) or device_removed (revoked by removing its device).';

-- -----------------------------------------------------------------------------
-- relay.forget_ended_sessions(limit) → how many revoked sessions were forgotten
-- -----------------------------------------------------------------------------
-- Revoked sessions are kept only while their auth.sessions row exists; at most LIMIT rows
-- are deleted per call, so the call's cost is bounded.
create or replace function relay.forget_ended_sessions(p_limit int)
returns int
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_deleted int;
begin
  if p_limit is null or p_limit not between 1 and 100000 then
    raise exception 'limit must be between 1 and 100000' using errcode = '22023';
  end if;
  delete from private.revoked_sessions r
  where r.session_id in (select x.session_id from private.revoked_sessions x
                         where not exists (select from auth.sessions s where s.id = x.session_id)
                         limit p_limit);
  get diagnostics v_deleted = row_count;
  return v_deleted;
end;
$$;
comment on function relay.forget_ended_sessions(int) is
  'Deletes up to LIMIT revoked-session rows whose auth.sessions row is gone (called with reap).';

-- -----------------------------------------------------------------------------
-- relay.agent_key_secret() → the secret agent keys are signed with (10_agent_keys.sql)
-- -----------------------------------------------------------------------------
create or replace function relay.agent_key_secret()
returns bytea
language sql
security definer
set search_path = ''
as $$ select private.agent_key_secret() $$;
comment on function relay.agent_key_secret() is
  'The agent-key signing secret, for the relay''s check of a key''s signature before any lookup.';
revoke execute on function relay.agent_key_secret() from public, anon, authenticated, service_role;
grant execute on function relay.agent_key_secret() to whereabot_relay;

-- -----------------------------------------------------------------------------
-- relay.client_name(client_id) → the OAuth client's name, or null
-- -----------------------------------------------------------------------------
create or replace function relay.client_name(p_client_id text)
returns text
language plpgsql
stable
security definer
set search_path = ''
as $$
begin
  if p_client_id is null then
    raise exception 'client_name needs a client id' using errcode = '22004';
  end if;
  if p_client_id !~* '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$' then
    -- the relay's own clients (registered, or a metadata document's URL); agent-key has none
    return (select nullif(btrim(c.client_name), '') from private.oauth_clients c where c.client_id = p_client_id);
  end if;
  return (select nullif(btrim(c.client_name), '') from auth.oauth_clients c
          where c.id = p_client_id::uuid and c.deleted_at is null);
end;
$$;
comment on function relay.client_name(text) is
  'The name of OAuth client CLIENT_ID (the relay''s own, or Supabase Auth''s), or null when unknown, deleted or unnamed.';

-- -----------------------------------------------------------------------------
-- A revoked credential's waiting requests are cancelled (their phones get cancel)
-- -----------------------------------------------------------------------------
-- An OAuth grant revoked (its client's last session of the user deleted) or an agent key
-- revoked or deleted: the requests it opened stop prompting the person at once, and a
-- poll of them finds them abandoned (the relay also checks the credential again before it
-- delivers any result). An agent key's synchronous requests carry no key id; they end
-- with their call, within 120 s, and their answer is never delivered.
create or replace function private.cancel_revoked_credential_requests()
returns trigger
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_request record;
begin
  if tg_table_name = 'sessions' then
    if old.oauth_client_id is null or exists (
         select from auth.sessions s where s.user_id = old.user_id and s.oauth_client_id = old.oauth_client_id) then
      return null;
    end if;
    for v_request in
      update relay.pending_requests set settled_at = now(), outcome = 'abandoned'
      where settled_at is null and client_id = old.oauth_client_id::text
        and ((owner_id = old.user_id and requester_id is null) or requester_id = old.user_id)
      returning id, owner_id
    loop
      perform private.notify_cancel(v_request.id, v_request.owner_id);
    end loop;
  elsif tg_table_name = 'oauth_grants' then
    for v_request in
      update relay.pending_requests set settled_at = now(), outcome = 'abandoned'
      where settled_at is null and client_id = old.client_id
        and ((owner_id = old.user_id and requester_id is null) or requester_id = old.user_id)
      returning id, owner_id
    loop
      perform private.notify_cancel(v_request.id, v_request.owner_id);
    end loop;
  else
    for v_request in
      update relay.pending_requests set settled_at = now(), outcome = 'abandoned'
      where settled_at is null and agent_key_id = old.id
      returning id, owner_id
    loop
      perform private.notify_cancel(v_request.id, v_request.owner_id);
    end loop;
  end if;
  return null;
end;
$$;
comment on function private.cancel_revoked_credential_requests() is
  'AFTER trigger on auth.sessions (delete), public.oauth_grants (delete) and public.agent_keys (revoke, delete): a revoked OAuth grant''s or agent key''s waiting requests are abandoned and their phones told to cancel.';
revoke execute on function private.cancel_revoked_credential_requests() from public, anon, authenticated;

-- No WHEN clause on auth.sessions: a trigger condition naming a column of Supabase Auth's
-- table would block Auth's own migrations from altering that column.
create trigger sessions_cancel_revoked_client_requests
  after delete on auth.sessions
  for each row execute function private.cancel_revoked_credential_requests();
create trigger oauth_grants_cancel_requests_when_deleted
  after delete on public.oauth_grants
  for each row execute function private.cancel_revoked_credential_requests();
create trigger agent_keys_cancel_requests_when_revoked
  after update of revoked_at on public.agent_keys
  for each row when (old.revoked_at is null and new.revoked_at is not null)
  execute function private.cancel_revoked_credential_requests();
create trigger agent_keys_cancel_requests_when_deleted
  after delete on public.agent_keys
  for each row when (old.revoked_at is null)
  execute function private.cancel_revoked_credential_requests();

-- -----------------------------------------------------------------------------
-- A user banned or deleted: their sockets close, their keys and requests end
-- -----------------------------------------------------------------------------
-- When an update of auth.users bans a user (banned_until in the future) or deletes them
-- softly (deleted_at), and they could sign in before: each of their sessions is recorded in
-- private.revocations (the heartbeat's relay.revoked_connections closes their sockets,
-- 4000), every instance drops their live agent keys from its cache (whereabot_key; the next
-- lookup, relay.agent_key_owner, refuses them), and the requests waiting for or by them are
-- abandoned (their phones told to cancel). relay.session_states refuses their tokens from
-- then on. Every other update returns at once.
create or replace function private.end_refused_user()
returns trigger
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_request record;
begin
  if not ((new.deleted_at is not null or coalesce(new.banned_until >= now(), false))
          and old.deleted_at is null and (old.banned_until is null or old.banned_until < now())) then
    return null;
  end if;
  insert into private.revocations (session_id) select s.id from auth.sessions s where s.user_id = new.id;
  perform private.notify('whereabot_key', jsonb_build_object('key_id', k.id))
  from public.agent_keys k where k.user_id = new.id and k.revoked_at is null;
  for v_request in
    update relay.pending_requests set settled_at = now(), outcome = 'abandoned'
    where settled_at is null and (owner_id = new.id or requester_id = new.id)
    returning id, owner_id
  loop
    perform private.notify_cancel(v_request.id, v_request.owner_id);
  end loop;
  return null;
end;
$$;
comment on function private.end_refused_user() is
  'AFTER UPDATE trigger on auth.users (no column list: Auth''s own migrations must stay free to alter its columns): a user just banned or deleted has their sockets closed at the next heartbeat, their agent keys dropped from every cache and their waiting requests abandoned; returns at once for any other update.';
revoke execute on function private.end_refused_user() from public, anon, authenticated;

-- CREATE OR REPLACE: dropping a trigger needs to own auth.users (supabase_auth_admin);
-- replacing one needs only the TRIGGER privilege the migration role holds. No column list
-- and no WHEN clause (see whereabot_claim_waiting_shares in 15_location_shares.sql).
create or replace trigger whereabot_end_refused_user
  after update on auth.users
  for each row execute function private.end_refused_user();

revoke execute on function relay.agent_key_owner(text), relay.session_states(uuid[], uuid[]),
  relay.forget_ended_sessions(int), relay.client_name(text)
  from public, anon, authenticated, service_role;
grant execute on function relay.agent_key_owner(text), relay.session_states(uuid[], uuid[]),
  relay.forget_ended_sessions(int), relay.client_name(text)
  to whereabot_relay;
