-- whereabot_device names the device's owner ({device, owner, event, instance[, connection]})
-- (issue 43, memory per phone): an instance finds the sockets of a replaced or removed
-- device among its owner's, which it indexes anyway for pings, and keeps no index of its
-- sockets by device (about 60 bytes per idle phone).

create or replace function private.notify_device_revoked()
returns trigger
language plpgsql
security definer
set search_path = ''
as $$
begin
  perform private.notify('whereabot_device',
    jsonb_build_object('device', new.id, 'owner', new.user_id, 'event', 'revoked', 'instance', null));
  return null;
end;
$$;
comment on function private.notify_device_revoked() is
  'AFTER UPDATE trigger: NOTIFY whereabot_device {device, owner, event: revoked} when a device is removed.';

create or replace function private.register_socket(p_instance text, p_connection uuid, p_user uuid, p_session uuid,
  p_device uuid, p_name text, p_platform text, p_app_version text, p_opened_at timestamptz, p_max_sockets int)
returns text
language plpgsql
set search_path = ''
set enable_seqscan = off
as $$
declare
  v_owner uuid;
  v_revoked_at timestamptz;
  v_known boolean;
  v_replaced int;
  v_name text := private.clean_display_text(p_name, 100);
  -- A null app version (a re-registration: the relay does not keep it) leaves it as it is.
  v_version text := case when p_app_version is not null then private.clean_display_text(p_app_version, 50) end;
begin
  if (relay.session_states(array[p_session], array[p_user]))[1] <> 'alive' then
    return 'revoked';
  end if;
  select user_id, revoked_at into v_owner, v_revoked_at from public.devices where id = p_device;
  v_known := found;
  if v_known and v_owner <> p_user then
    return 'forbidden';
  end if;
  if v_known and v_revoked_at is not null then
    return 'revoked';
  end if;
  -- A stale hello (a socket that closed, replayed at re-registration) never displaces a
  -- newer socket of the same device.
  if exists (select from relay.connections
             where device_id = p_device and id <> p_connection and opened_at > p_opened_at) then
    return 'replaced';
  end if;
  if not exists (select from relay.connections where id = p_connection)
     and (select count(*) from relay.connections
          where user_id = p_user and device_id <> p_device) >= p_max_sockets then
    return 'too_many';
  end if;
  -- A new device past the account's cap is this socket's problem alone.
  if not v_known and (select count(*) from public.devices where user_id = p_user and revoked_at is null)
                     >= private.max_devices_per_user() then
    return 'too_many_devices';
  end if;

  if v_known then
    -- Rewritten only when something changed or last_seen_at is older than the heartbeat's
    -- 30 s granularity, so a reconnect storm writes nothing durable.
    update public.devices
    set name = coalesce(nullif(v_name, ''), name),
        platform = p_platform,
        app_version = coalesce(v_version, app_version),
        session_id = p_session,
        last_seen_at = now()
    where id = p_device
      and (name is distinct from coalesce(nullif(v_name, ''), name)
           or platform is distinct from p_platform
           or (v_version is not null and app_version is distinct from v_version)
           or session_id is distinct from p_session
           or last_seen_at is null
           or last_seen_at < now() - interval '30 seconds');
  else
    insert into public.devices (id, user_id, name, platform, app_version, session_id, last_seen_at)
    values (p_device, p_user, v_name, p_platform, coalesce(v_version, ''), p_session, now());
  end if;

  delete from relay.connections where device_id = p_device and id <> p_connection;
  get diagnostics v_replaced = row_count;
  insert into relay.connections (id, instance_id, user_id, device_id, platform, session_id, opened_at)
  values (p_connection, p_instance, p_user, p_device, p_platform, p_session, p_opened_at)
  on conflict (id) do update set instance_id = excluded.instance_id;

  -- Only a replaced socket needs its instance told (a first hello has nobody to close).
  if v_replaced > 0 then
    perform private.notify('whereabot_device', jsonb_build_object(
      'device', p_device, 'owner', p_user, 'event', 'hello', 'instance', p_instance, 'connection', p_connection));
  end if;
  return 'ok';
end;
$$;
comment on function private.register_socket(text, uuid, uuid, uuid, uuid, text, text, text, timestamptz, int) is
  'One hello of relay.device_hellos (the caller holds the device and owner locks): upsert the device, register the socket; returns its status.';
