-- =============================================================================
-- Relay device sockets: hello and disconnect
-- =============================================================================

-- -----------------------------------------------------------------------------
-- private.locate_message(request): what a phone gets for a pending request
-- -----------------------------------------------------------------------------
-- {id, client_id, expires_ms, requester}: requester is null for the owner's own agents,
-- else {user_id, name, email} of the person whose agent asks.
create or replace function private.locate_message(p_request relay.pending_requests)
returns jsonb
language sql
stable
security definer
set search_path = ''
as $$
  select jsonb_build_object(
    'id', p_request.id,
    'client_id', p_request.client_id,
    'expires_ms', (extract(epoch from p_request.expires_at) * 1000)::bigint,
    'requester', case when p_request.requester_id is null then null
                      else private.user_card(p_request.requester_id) end)
$$;
comment on function private.locate_message(relay.pending_requests) is
  'The fields of a locate ping for one pending request.';
revoke execute on function private.locate_message(relay.pending_requests) from public, anon, authenticated;

-- -----------------------------------------------------------------------------
-- relay.pending_locates(users) → the pings still waiting for these users' phones
-- -----------------------------------------------------------------------------
-- For a device that says hello, and for resync after a listener reconnect.
create or replace function relay.pending_locates(p_users uuid[])
returns table (owner_id uuid, message jsonb)
language plpgsql
stable
security definer
set search_path = ''
as $$
begin
  if p_users is null or cardinality(p_users) > 10000 then
    raise exception 'pending_locates needs 0 to 10000 user ids' using errcode = '22023';
  end if;
  return query
    select r.owner_id, jsonb_build_object('type', 'locate') || private.locate_message(r)
    from relay.pending_requests r
    where r.owner_id = any (p_users) and r.settled_at is null and r.expires_at > now()
    order by r.created_at;
end;
$$;
comment on function relay.pending_locates(uuid[]) is
  'Locate messages of every request still waiting for the phones of USERS, oldest first.';

-- -----------------------------------------------------------------------------
-- relay.device_hello(...) → {status, pending}
-- -----------------------------------------------------------------------------
-- status: ok (registered; pending holds the locate messages to send), revoked (the
-- device was removed: close 4000 "revoked"), forbidden (the device_id belongs to another
-- user). On ok, any older socket of the same device on any instance is replaced: its row
-- is removed and whereabot_device {device, event: hello, instance, connection} tells the
-- instance holding it to close it with 4000 "replaced". Re-running hello for a live
-- connection (resync after a crash) is harmless.
create or replace function relay.device_hello(
  p_instance text, p_connection uuid, p_user uuid, p_device uuid,
  p_name text, p_platform text, p_app_version text)
returns jsonb
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_owner uuid;
  v_revoked_at timestamptz;
  v_pending jsonb;
begin
  perform private.check_instance_id(p_instance);
  if p_connection is null or p_user is null or p_device is null then
    raise exception 'device_hello needs a connection id, a user id and a device id' using errcode = '22004';
  end if;
  if p_platform is null or p_platform not in ('ios', 'android', 'desktop', 'web') then
    raise exception 'platform must be ios, android, desktop or web' using errcode = '22023';
  end if;
  if not exists (select from auth.users where id = p_user) then
    raise exception 'no such user' using errcode = 'P0002';
  end if;

  select user_id, revoked_at into v_owner, v_revoked_at
  from public.devices where id = p_device for update;
  if found and v_owner <> p_user then
    return jsonb_build_object('status', 'forbidden', 'pending', '[]'::jsonb);
  end if;
  if found and v_revoked_at is not null then
    return jsonb_build_object('status', 'revoked', 'pending', '[]'::jsonb);
  end if;

  if found then
    update public.devices
    set name = coalesce(nullif(left(btrim(p_name), 100), ''), name),
        platform = p_platform,
        app_version = left(coalesce(btrim(p_app_version), ''), 50),
        last_seen_at = now()
    where id = p_device;
  else
    insert into public.devices (id, user_id, name, platform, app_version, last_seen_at)
    values (p_device, p_user, left(coalesce(btrim(p_name), ''), 100), p_platform,
            left(coalesce(btrim(p_app_version), ''), 50), now());
  end if;

  insert into relay.instances (id) values (p_instance) on conflict (id) do nothing;
  delete from relay.connections where device_id = p_device and id <> p_connection;
  insert into relay.connections (id, instance_id, user_id, device_id, platform)
  values (p_connection, p_instance, p_user, p_device, p_platform)
  on conflict (id) do update set instance_id = excluded.instance_id;

  perform private.notify('whereabot_device', jsonb_build_object(
    'device', p_device, 'event', 'hello', 'instance', p_instance, 'connection', p_connection));

  select coalesce(jsonb_agg(p.message), '[]'::jsonb) into v_pending
  from relay.pending_locates(array[p_user]) p;
  return jsonb_build_object('status', 'ok', 'pending', v_pending);
end;
$$;
comment on function relay.device_hello(text, uuid, uuid, uuid, text, text, text) is
  'A device socket said hello: upsert the device, register the socket, replace older sockets of the device, return pending pings.';

-- -----------------------------------------------------------------------------
-- relay.device_disconnect(connection) → whether the socket was registered
-- -----------------------------------------------------------------------------
create or replace function relay.device_disconnect(p_connection uuid)
returns boolean
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_device uuid;
begin
  if p_connection is null then
    raise exception 'device_disconnect needs a connection id' using errcode = '22004';
  end if;
  delete from relay.connections where id = p_connection returning device_id into v_device;
  if v_device is null then
    return false;
  end if;
  update public.devices set last_seen_at = now() where id = v_device;
  return true;
end;
$$;
comment on function relay.device_disconnect(uuid) is
  'A device socket closed: forget it (false when it was already replaced or reaped).';

revoke execute on all functions in schema relay from public, anon, authenticated, service_role;
grant execute on function relay.pending_locates(uuid[]),
  relay.device_hello(text, uuid, uuid, uuid, text, text, text),
  relay.device_disconnect(uuid) to whereabot_relay;
