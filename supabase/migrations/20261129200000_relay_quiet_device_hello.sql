-- =============================================================================
-- Device hello and disconnect without durable writes in the common case
-- =============================================================================
-- A transaction that changes only UNLOGGED tables commits without waiting for a WAL
-- flush; one that touches public.devices (a logged table) waits for the disk. Hello and
-- disconnect used to rewrite the device row (and row-lock it) every time, so 10,000 phones
-- reconnecting after a restart meant 20,000 flushes. Now the row is rewritten only when
-- the name, platform or app version changed, or last_seen_at is older than 30 s (the
-- heartbeat's granularity; online still means seen in the last 90 s), and hellos of one
-- device are serialized by an advisory lock instead of a row lock.

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

  -- Hellos of one device are serialized (the newest socket wins) by an advisory lock, not
  -- a row lock: a row lock is WAL-logged and would make every hello wait for a disk flush.
  perform pg_advisory_xact_lock(hashtextextended('whereabot_device_hello:' || p_device::text, 0));
  select user_id, revoked_at into v_owner, v_revoked_at
  from public.devices where id = p_device;
  if found and v_owner <> p_user then
    return jsonb_build_object('status', 'forbidden', 'pending', '[]'::jsonb);
  end if;
  if found and v_revoked_at is not null then
    return jsonb_build_object('status', 'revoked', 'pending', '[]'::jsonb);
  end if;

  if found then
    -- Rewritten only when something changed or last_seen_at is older than the heartbeat's
    -- 30 s granularity, so a reconnect storm writes nothing durable.
    update public.devices
    set name = coalesce(nullif(left(btrim(p_name), 100), ''), name),
        platform = p_platform,
        app_version = left(coalesce(btrim(p_app_version), ''), 50),
        last_seen_at = now()
    where id = p_device
      and (name is distinct from coalesce(nullif(left(btrim(p_name), 100), ''), name)
           or platform is distinct from p_platform
           or app_version is distinct from left(coalesce(btrim(p_app_version), ''), 50)
           or last_seen_at is null
           or last_seen_at < now() - interval '30 seconds');
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
  update public.devices set last_seen_at = now()
  where id = v_device and (last_seen_at is null or last_seen_at < now() - interval '30 seconds');
  return true;
end;
$$;
comment on function relay.device_disconnect(uuid) is
  'A device socket closed: forget it (false when it was already replaced or reaped).';

revoke execute on function relay.device_hello(text, uuid, uuid, uuid, text, text, text),
  relay.device_disconnect(uuid) from public, anon, authenticated, service_role;
grant execute on function relay.device_hello(text, uuid, uuid, uuid, text, text, text),
  relay.device_disconnect(uuid) to whereabot_relay;
