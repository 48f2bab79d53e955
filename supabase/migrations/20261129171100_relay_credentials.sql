-- =============================================================================
-- Relay credential checks: agent keys, sessions, OAuth client names
-- =============================================================================

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
-- relay.session_alive(session, user) → whether a JWT's session still exists
-- -----------------------------------------------------------------------------
-- Supabase deletes the auth.sessions row at sign-out; a JWT whose session is gone is
-- revoked even before it expires.
create or replace function relay.session_alive(p_session uuid, p_user uuid)
returns boolean
language plpgsql
stable
security definer
set search_path = ''
as $$
begin
  if p_session is null or p_user is null then
    raise exception 'session_alive needs a session id and a user id' using errcode = '22004';
  end if;
  return exists (
    select from auth.sessions s
    where s.id = p_session and s.user_id = p_user
      and (s.not_after is null or s.not_after > now()));
end;
$$;
comment on function relay.session_alive(uuid, uuid) is
  'True while session SESSION of USER exists and has not passed not_after.';

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
    return null;  -- agent-key and other non-OAuth ids have no client row
  end if;
  return (select nullif(btrim(c.client_name), '') from auth.oauth_clients c
          where c.id = p_client_id::uuid and c.deleted_at is null);
end;
$$;
comment on function relay.client_name(text) is
  'The registered name of OAuth client CLIENT_ID, or null when unknown, deleted or unnamed.';

revoke execute on all functions in schema relay from public, anon, authenticated, service_role;
grant execute on function relay.agent_key_owner(text), relay.session_alive(uuid, uuid),
  relay.client_name(text) to whereabot_relay;
