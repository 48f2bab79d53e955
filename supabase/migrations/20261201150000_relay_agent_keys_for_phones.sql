-- =============================================================================
-- Agent keys from the browser phone (issue 26, SPEC §12)
-- =============================================================================
-- The seeds: agent keys are created "in the app, shown once" and revoked in the app. On
-- Supabase the API's public.create_agent_key / public.revoke_agent_key serve a user's own
-- session; locally there is no PostgREST, so the browser phone asks over its socket, as it
-- does for its devices and always-allowed agents, and the relay calls these functions
-- with the socket's user (a phone credential: an agent's token can never open a phone
-- socket, so an agent can never mint itself a key). Both paths share one implementation.

-- -----------------------------------------------------------------------------
-- private.create_agent_key_for(user, name) / private.revoke_agent_key_for(user, id)
-- -----------------------------------------------------------------------------
create or replace function private.create_agent_key_for(p_user uuid, p_name text)
returns text
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_key text;
begin
  if p_user is null then
    raise exception 'creating an agent key needs a user' using errcode = '22004';
  end if;
  if p_name is null or char_length(btrim(p_name)) not between 1 and 100 then
    raise exception 'an agent key needs a name of 1 to 100 characters' using errcode = '22023';
  end if;
  v_key := 'wb_' || encode(extensions.gen_random_bytes(32), 'hex');
  insert into public.agent_keys (user_id, name, key_hash, key_prefix)
  values (p_user, private.clean_display_text(btrim(p_name), 100), encode(sha256(convert_to(v_key, 'UTF8')), 'hex'),
          left(v_key, 11));
  return v_key;
end;
$$;
comment on function private.create_agent_key_for(uuid, text) is
  'Creates an agent key for USER named NAME and returns its plaintext (only the hash is stored). Callers check who USER is.';
revoke execute on function private.create_agent_key_for(uuid, text) from public, anon, authenticated;

create or replace function private.revoke_agent_key_for(p_user uuid, p_id uuid)
returns boolean
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_revoked_at timestamptz;
begin
  if p_user is null or p_id is null then
    raise exception 'revoking an agent key needs a user and a key id' using errcode = '22004';
  end if;
  select revoked_at into v_revoked_at from public.agent_keys where id = p_id and user_id = p_user for update;
  if not found then
    raise exception 'no agent key with that id belongs to you' using errcode = 'P0002';
  end if;
  if v_revoked_at is not null then
    return false;
  end if;
  update public.agent_keys set revoked_at = now() where id = p_id;  -- whereabot_key tells every instance
  return true;
end;
$$;
comment on function private.revoke_agent_key_for(uuid, uuid) is
  'Revokes USER''s agent key ID (true now, false when it already was). Callers check who USER is.';
revoke execute on function private.revoke_agent_key_for(uuid, uuid) from public, anon, authenticated;

-- The API's functions, as before, on the shared implementation.
create or replace function private.create_agent_key(p_name text)
returns text
language plpgsql
security definer
set search_path = ''
as $$
begin
  if auth.uid() is null then
    raise exception 'creating an agent key needs a signed-in user' using errcode = '42501';
  end if;
  if (auth.jwt() ->> 'client_id') is not null then
    raise exception 'an agent credential cannot create agent keys' using errcode = '42501';
  end if;
  return private.create_agent_key_for(auth.uid(), p_name);
end;
$$;

create or replace function private.revoke_agent_key(p_id uuid)
returns boolean
language plpgsql
security definer
set search_path = ''
as $$
begin
  if auth.uid() is null or (auth.jwt() ->> 'client_id') is not null then
    raise exception 'revoking an agent key needs the user''s own session' using errcode = '42501';
  end if;
  if p_id is null then
    raise exception 'revoke_agent_key needs a key id' using errcode = '22004';
  end if;
  return private.revoke_agent_key_for(auth.uid(), p_id);
end;
$$;

-- -----------------------------------------------------------------------------
-- relay.agent_keys(user), relay.create_agent_key(user, name), relay.revoke_agent_key(user, id)
-- -----------------------------------------------------------------------------
create or replace function relay.agent_keys(p_user uuid)
returns jsonb
language plpgsql
stable
security definer
set search_path = ''
as $$
begin
  if p_user is null then
    raise exception 'agent_keys needs a user' using errcode = '22004';
  end if;
  return coalesce((
    select jsonb_agg(jsonb_build_object('id', k.id, 'name', k.name, 'prefix', k.key_prefix,
                                        'created_at', k.created_at, 'last_used_at', k.last_used_at)
                     order by k.created_at desc)
    from public.agent_keys k where k.user_id = p_user and k.revoked_at is null), '[]');
end;
$$;
comment on function relay.agent_keys(uuid) is
  'USER''s live agent keys for the browser phone: [{id, name, prefix, created_at, last_used_at}], never a hash or key.';

create or replace function relay.create_agent_key(p_user uuid, p_name text)
returns jsonb
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_key text := private.create_agent_key_for(p_user, p_name);
begin
  return jsonb_build_object('key', v_key, 'keys', relay.agent_keys(p_user));
end;
$$;
comment on function relay.create_agent_key(uuid, text) is
  'A phone socket of USER creates an agent key: {key (the plaintext, once), keys}.';

create or replace function relay.revoke_agent_key(p_user uuid, p_id uuid)
returns jsonb
language plpgsql
security definer
set search_path = ''
as $$
begin
  perform private.revoke_agent_key_for(p_user, p_id);
  return relay.agent_keys(p_user);
end;
$$;
comment on function relay.revoke_agent_key(uuid, uuid) is
  'A phone socket of USER revokes one of USER''s agent keys; returns the live keys.';

revoke execute on function relay.agent_keys(uuid), relay.create_agent_key(uuid, text), relay.revoke_agent_key(uuid, uuid)
  from public, anon, authenticated, service_role;
grant execute on function relay.agent_keys(uuid), relay.create_agent_key(uuid, text), relay.revoke_agent_key(uuid, uuid)
  to whereabot_relay;
