-- =============================================================================
-- Relay: what the browser phone at /app/ needs (APP.md §A.3-A.5, SPEC §12)
-- =============================================================================
-- The browser phone has no Supabase client of its own in local development, so the relay
-- carries for it, over its authenticated socket: its Web Push subscription, its
-- always-allowed list, its devices and its agent keys. Each function acts for the socket's
-- user only; only a phone socket (never an agent token) reaches them, so an agent can never
-- mint itself a key or allow itself.

-- -----------------------------------------------------------------------------
-- relay.save_web_push_subscription(user, device, endpoint, p256dh, auth, extra origins)
-- -----------------------------------------------------------------------------
-- saved | refused:device | refused:endpoint_not_allowed | refused:invalid | refused:limit
-- | refused:taken (another account saved this endpoint first; nothing changed). The
-- account's own endpoint again (the browser subscribed again) updates its one row.
create or replace function relay.save_web_push_subscription(
  p_user uuid, p_device uuid, p_endpoint text, p_p256dh text, p_auth text, p_extra_origins text[] default '{}',
  p_language text default 'en')
returns text
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_saved boolean;
begin
  if p_user is null or p_device is null then
    raise exception 'save_web_push_subscription needs a user and a device' using errcode = '22004';
  end if;
  if cardinality(p_extra_origins) > 20 then
    raise exception 'at most 20 extra origins' using errcode = '22023';
  end if;
  if p_language is null or p_language !~ '^[a-z]{2}$' then
    raise exception 'language must be two lowercase letters (ISO 639-1)' using errcode = '22023';
  end if;
  if not exists (select from public.devices where id = p_device and user_id = p_user and revoked_at is null) then
    return 'refused:device';
  end if;
  if p_endpoint is null or not private.is_push_endpoint_allowed(p_endpoint, p_extra_origins) then
    return 'refused:endpoint_not_allowed';
  end if;
  if p_p256dh is null or p_p256dh !~ '^[A-Za-z0-9_-]{87}=?$' or p_auth is null or p_auth !~ '^[A-Za-z0-9_-]{22}(==)?$' then
    return 'refused:invalid';
  end if;
  -- The account's own endpoint again (the browser subscribed again): new keys, no new row.
  update public.web_push_subscriptions set p256dh = p_p256dh, auth = p_auth, device_id = p_device, language = p_language
  where endpoint = p_endpoint and user_id = p_user;
  if found then
    return 'saved';
  end if;
  begin
    -- A row that appeared meanwhile is updated only if it is this account's.
    insert into public.web_push_subscriptions as s (endpoint, p256dh, auth, user_id, device_id, language)
    values (p_endpoint, p_p256dh, p_auth, p_user, p_device, p_language)
    on conflict (endpoint) do update
      set p256dh = excluded.p256dh, auth = excluded.auth, device_id = excluded.device_id, language = excluded.language
      where s.user_id = excluded.user_id
    returning true into v_saved;
  exception when sqlstate '54000' then
    return 'refused:limit';
  end;
  return case when v_saved then 'saved' else 'refused:taken' end;
end;
$$;
comment on function relay.save_web_push_subscription(uuid, uuid, text, text, text, text[], text) is
  'Stores the Web Push subscription of USER''s DEVICE (its phone socket sent it) and the language its notifications are written in; the endpoint must be a known push service and not another account''s.';

create or replace function relay.delete_web_push_subscriptions(p_user uuid, p_device uuid)
returns int
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_count int;
begin
  if p_user is null or p_device is null then
    raise exception 'delete_web_push_subscriptions needs a user and a device' using errcode = '22004';
  end if;
  delete from public.web_push_subscriptions where user_id = p_user and device_id = p_device;
  get diagnostics v_count = row_count;
  return v_count;
end;
$$;
comment on function relay.delete_web_push_subscriptions(uuid, uuid) is
  'Deletes the Web Push subscriptions of USER''s DEVICE (the page unsubscribed or signed out).';

-- -----------------------------------------------------------------------------
-- Always-allowed agents, for the phone socket
-- -----------------------------------------------------------------------------
create or replace function relay.always_allowed_agents(p_user uuid)
returns jsonb
language plpgsql
stable
security definer
set search_path = ''
as $$
begin
  if p_user is null then
    raise exception 'always_allowed_agents needs a user' using errcode = '22004';
  end if;
  return coalesce((
    select jsonb_agg(jsonb_build_object('client_id', a.client_id, 'client_name', a.client_name,
                                        'requester_id', a.requester_id, 'precision', a.precision,
                                        'expires_ms', (extract(epoch from a.expires_at) * 1000)::bigint,
                                        'last_used_ms', (extract(epoch from a.last_used_at) * 1000)::bigint) order by a.created_at)
    from public.always_allowed_agents a
    where a.user_id = p_user and (a.expires_at is null or a.expires_at > now())), '[]');
end;
$$;
comment on function relay.always_allowed_agents(uuid) is
  'USER''s always-allowed agents, none expired, as [{client_id, client_name, requester_id, precision, expires_ms, last_used_ms}].';

-- p_allowed true adds (or renames) the row, false removes it. Generic ids (unknown,
-- agent-key) are refused by the table (23514); a requester must share with USER.
-- p_precision: how the phone answers the agent; p_expires_in_s: "Allow for 1 hour" (a
-- second to a day; null: always). A new choice replaces the old one's precision and expiry
-- and counts as kept (its reminder comes GRANT_REMINDER_DAYS after it).
create or replace function relay.set_always_allowed(
  p_user uuid, p_client_id text, p_client_name text, p_requester uuid, p_allowed boolean,
  p_precision text default 'precise', p_expires_in_s int default null)
returns jsonb
language plpgsql
security definer
set search_path = ''
as $$
begin
  if p_user is null or p_client_id is null or p_allowed is null then
    raise exception 'set_always_allowed needs a user, a client id and a choice' using errcode = '22004';
  end if;
  if p_precision is null or p_precision not in ('precise', 'approximate') then
    raise exception 'precision is precise or approximate' using errcode = '22023';
  end if;
  if p_expires_in_s is not null and p_expires_in_s not between 1 and 86400 then
    raise exception 'expires_in_s must be from 1 to 86400 seconds' using errcode = '22023';
  end if;
  -- The user's expired choices go with any change of theirs (they count as absent already).
  delete from public.always_allowed_agents where user_id = p_user and expires_at <= now();
  if p_allowed then
    if p_requester is not null and p_requester <> p_user and not exists (
         select from public.location_shares where owner_id = p_user and viewer_id = p_requester and revoked_at is null) then
      raise exception 'the requester has no active share from this user' using errcode = '42501';
    end if;
    insert into public.always_allowed_agents (user_id, client_id, client_name, requester_id, precision, expires_at)
    values (p_user, p_client_id, coalesce(private.clean_display_text(p_client_name, 200), ''), nullif(p_requester, p_user),
            p_precision, now() + make_interval(secs => p_expires_in_s))
    on conflict on constraint always_allowed_agents_once do update
      set client_name = excluded.client_name, precision = excluded.precision, expires_at = excluded.expires_at,
          reminded_at = now();
  else
    delete from public.always_allowed_agents
    where user_id = p_user and client_id = p_client_id and requester_id is not distinct from nullif(p_requester, p_user);
  end if;
  return relay.always_allowed_agents(p_user);
end;
$$;
comment on function relay.set_always_allowed(uuid, text, text, uuid, boolean, text, int) is
  'Adds (with its precision, until EXPIRES_IN_S from now when set) or removes USER''s always-allow of agent CLIENT_ID (for REQUESTER''s requests when set); returns the new list.';

-- -----------------------------------------------------------------------------
-- The user's devices: list, rename, remove (removing revokes the device's session)
-- -----------------------------------------------------------------------------
create or replace function relay.user_devices(p_user uuid)
returns jsonb
language plpgsql
stable
security definer
set search_path = ''
as $$
begin
  if p_user is null then
    raise exception 'user_devices needs a user' using errcode = '22004';
  end if;
  return coalesce((
    select jsonb_agg(jsonb_build_object('id', d.id, 'name', d.name, 'platform', d.platform, 'app_version', d.app_version,
                                        'created_at', d.created_at) order by d.created_at)
    from public.devices d where d.user_id = p_user and d.revoked_at is null), '[]');
end;
$$;
comment on function relay.user_devices(uuid) is
  'USER''s devices that were not removed: [{id, name, platform, app_version, created_at}] (no presence).';

create or replace function relay.rename_device(p_user uuid, p_device uuid, p_name text)
returns jsonb
language plpgsql
security definer
set search_path = ''
as $$
begin
  if p_user is null or p_device is null or p_name is null then
    raise exception 'rename_device needs a user, a device and a name' using errcode = '22004';
  end if;
  update public.devices set name = private.clean_display_text(p_name, 100)
  where id = p_device and user_id = p_user and revoked_at is null;
  return relay.user_devices(p_user);
end;
$$;
comment on function relay.rename_device(uuid, uuid, text) is 'Renames USER''s DEVICE (cleaned, at most 100 characters); returns the list.';

create or replace function relay.remove_device(p_user uuid, p_device uuid)
returns jsonb
language plpgsql
security definer
set search_path = ''
as $$
begin
  if p_user is null or p_device is null then
    raise exception 'remove_device needs a user and a device' using errcode = '22004';
  end if;
  -- The devices_revoke_session trigger revokes the session that registered it, and
  -- whereabot_device {event: revoked} closes its sockets (4000 "revoked").
  update public.devices set revoked_at = now() where id = p_device and user_id = p_user and revoked_at is null;
  delete from public.web_push_subscriptions where user_id = p_user and device_id = p_device;
  delete from public.push_tokens where user_id = p_user and device_id = p_device;
  return relay.user_devices(p_user);
end;
$$;
comment on function relay.remove_device(uuid, uuid) is
  'Removes USER''s DEVICE: its session is revoked, its sockets close 4000, its push targets go; returns the list.';

-- -----------------------------------------------------------------------------
-- relay.agent_keys(user), relay.create_agent_key(user, name), relay.revoke_agent_key(user, id)
-- -----------------------------------------------------------------------------
-- The seeds: agent keys are created "in the app, shown once" and revoked in the app. On
-- Supabase the API's public.create_agent_key / public.revoke_agent_key serve a user's own
-- session; locally there is no PostgREST, so the browser phone asks over its socket and the
-- relay calls these with the socket's user. Both paths share private.create_agent_key_for
-- and private.revoke_agent_key_for (10_agent_keys.sql).
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

revoke execute on function relay.save_web_push_subscription(uuid, uuid, text, text, text, text[], text),
  relay.delete_web_push_subscriptions(uuid, uuid), relay.always_allowed_agents(uuid),
  relay.set_always_allowed(uuid, text, text, uuid, boolean, text, int), relay.user_devices(uuid),
  relay.rename_device(uuid, uuid, text), relay.remove_device(uuid, uuid),
  relay.agent_keys(uuid), relay.create_agent_key(uuid, text), relay.revoke_agent_key(uuid, uuid)
  from public, anon, authenticated, service_role;
grant execute on function relay.save_web_push_subscription(uuid, uuid, text, text, text, text[], text),
  relay.delete_web_push_subscriptions(uuid, uuid), relay.always_allowed_agents(uuid),
  relay.set_always_allowed(uuid, text, text, uuid, boolean, text, int), relay.user_devices(uuid),
  relay.rename_device(uuid, uuid, text), relay.remove_device(uuid, uuid),
  relay.agent_keys(uuid), relay.create_agent_key(uuid, text), relay.revoke_agent_key(uuid, uuid)
  to whereabot_relay;
