-- =============================================================================
-- Batched calls report per element: one account's limit or bad hello never fails a batch
-- =============================================================================
-- A hello batch holds the sockets of many users. Until now one element could abort it: an
-- account with 50 devices (the cap of public.devices, which anybody can fill through the
-- API) made every hello of its with a new device id raise 54000 inside the batch, and the
-- relay closed every socket of that batch, other users' included. Now:
--
-- * private.register_socket checks the device cap itself, before the insert, and returns
--   'too_many_devices' (the relay closes that socket 4002); it runs under the owner's lock,
--   so two batches of one user cannot both pass the check.
-- * relay.device_hellos reports a malformed element (missing ids, unknown platform) as
--   'invalid' instead of refusing the batch. Only what no peer can cause (a batch that is
--   not an array of 1 to 1000, a connection twice) still refuses the call.
-- * Whatever else could still fail for one element (a device row inserted through the API
--   at the same moment, past the cap) fails the call, and the relay then sends that batch's
--   hellos one by one: only the element that fails is refused (DeviceHub.register).
--
-- Lock order. Every function that deletes rows of relay.connections takes their row locks in
-- one global order, (device_id, id), and a hello batch takes its devices' rows in that order
-- too, after its advisory locks and before it changes anything. The heartbeat's
-- relay.revoked_connections and a hello batch that replaced a socket of the same devices
-- used to lock rows in two different orders and could deadlock (40P01), failing the batch.

-- -----------------------------------------------------------------------------
-- The cap on a user's devices, in one place
-- -----------------------------------------------------------------------------
create or replace function private.max_devices_per_user()
returns int
language sql
immutable
set search_path = ''
as $$ select 50 $$;
comment on function private.max_devices_per_user() is
  'Devices (not removed) one user may have: the cap of public.devices'' trigger and of a hello.';
revoke execute on function private.max_devices_per_user() from public, anon, authenticated;

-- The table's trigger and the hello check read the same number.
create or replace function private.enforce_device_limit()
returns trigger
language plpgsql
security definer
set search_path = ''
as $$
begin
  if (select count(*) from public.devices where user_id = new.user_id and revoked_at is null)
     >= private.max_devices_per_user() then
    raise exception 'devices allows at most % rows per user', private.max_devices_per_user()
      using errcode = '54000';
  end if;
  return new;
end;
$$;
comment on function private.enforce_device_limit() is
  'BEFORE INSERT trigger of public.devices: refuses a device past private.max_devices_per_user() (54000).';
revoke execute on function private.enforce_device_limit() from public, anon, authenticated;

drop trigger if exists devices_per_user_limit on public.devices;
create trigger devices_per_user_limit
  before insert on public.devices
  for each row execute function private.enforce_device_limit();

-- -----------------------------------------------------------------------------
-- private.register_socket: one hello, under the device's and the owner's locks
-- -----------------------------------------------------------------------------
-- Returns ok | revoked | forbidden | replaced | too_many | too_many_devices. The caller
-- holds the advisory locks (device, then owner), the row locks of the device's sockets and
-- a key-share lock on the instance's row.
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
  if relay.session_state(p_session, p_user) <> 'alive' then
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
      'device', p_device, 'event', 'hello', 'instance', p_instance, 'connection', p_connection));
  end if;
  return 'ok';
end;
$$;
comment on function private.register_socket(text, uuid, uuid, uuid, uuid, text, text, text, timestamptz, int) is
  'One hello of relay.device_hellos (the caller holds the device and owner locks): upsert the device, register the socket; returns its status.';
revoke execute on function private.register_socket(text, uuid, uuid, uuid, uuid, text, text, text, timestamptz, int)
  from public, anon, authenticated;

-- -----------------------------------------------------------------------------
-- relay.device_hellos(instance, hellos, max_sockets) → {results, pending}
-- -----------------------------------------------------------------------------
-- As before (20261130150000_relay_batched_hellos.sql), with two more statuses:
-- too_many_devices (a new device past the account's cap: close 4002) and invalid (a hello
-- without its ids or opening time, or with an unknown platform: close 1008). Neither
-- affects any other element.
create or replace function relay.device_hellos(p_instance text, p_hellos jsonb, p_max_sockets int default 20)
returns jsonb
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_hellos private.socket_hello[];
  v_hello private.socket_hello;
  v_status text[];
  v_ok uuid[] := '{}';
  v_results jsonb;
  v_pending jsonb;
begin
  perform private.check_instance_id(p_instance);
  if p_hellos is null or jsonb_typeof(p_hellos) <> 'array'
     or jsonb_array_length(p_hellos) not between 1 and 1000 then
    raise exception 'device_hellos needs an array of 1 to 1000 hellos' using errcode = '22023';
  end if;
  if p_max_sockets is null or p_max_sockets not between 1 and 1000 then
    raise exception 'max_sockets must be between 1 and 1000' using errcode = '22023';
  end if;
  if exists (select from jsonb_array_elements(p_hellos) e where jsonb_typeof(e) <> 'object') then
    raise exception 'every hello is an object' using errcode = '22023';
  end if;
  -- Oldest socket first: of two sockets of one device the later one wins, and the oldest
  -- sockets of a user keep their places under the cap.
  select array_agg(row(e.ord, h.connection, h."user", h.session, h.device, h.name, h.platform, h.app_version,
                       h.opened_at)::private.socket_hello order by h.opened_at, e.ord)
  into v_hellos
  from jsonb_array_elements(p_hellos) with ordinality as e(value, ord),
       jsonb_to_record(e.value) as h(connection uuid, "user" uuid, session uuid, device uuid, name text,
                                     platform text, app_version text, opened_at timestamptz);
  if exists (select from unnest(v_hellos) h where h.connection is null) then
    raise exception 'every hello names its connection' using errcode = '22004';
  end if;
  if (select count(distinct h.connection) from unnest(v_hellos) h) <> cardinality(v_hellos) then
    raise exception 'a connection says hello once per batch' using errcode = '22023';
  end if;
  v_status := array_fill('unregistered'::text, array[cardinality(v_hellos)]);
  -- A malformed element is refused alone and takes no lock.
  foreach v_hello in array v_hellos loop
    if v_hello.user_id is null or v_hello.session_id is null or v_hello.device_id is null
       or v_hello.opened_at is null or v_hello.platform is null
       or v_hello.platform not in ('ios', 'android', 'desktop', 'web') then
      v_status[v_hello.ord] := 'invalid';
    end if;
  end loop;

  -- The instance's row stays while the batch runs (the reaper skips a locked row).
  if exists (select from relay.instances where id = p_instance for key share) then
    perform pg_advisory_xact_lock(k)
    from (select distinct hashtextextended('whereabot_device_hello:' || h.device_id::text, 0) as k
          from unnest(v_hellos) h where v_status[h.ord] <> 'invalid' order by 1) devices;
    perform pg_advisory_xact_lock(k)
    from (select distinct hashtextextended('whereabot_open_request:' || h.user_id::text, 0) as k
          from unnest(v_hellos) h where v_status[h.ord] <> 'invalid' order by 1) owners;
    -- The rows this batch may replace, locked in the global order before any change.
    perform from relay.connections c
    where c.device_id in (select h.device_id from unnest(v_hellos) h where v_status[h.ord] <> 'invalid')
    order by c.device_id, c.id
    for update;

    foreach v_hello in array v_hellos loop
      continue when v_status[v_hello.ord] = 'invalid';
      if exists (select from auth.users where id = v_hello.user_id) then
        v_status[v_hello.ord] := private.register_socket(p_instance, v_hello.connection, v_hello.user_id,
          v_hello.session_id, v_hello.device_id, v_hello.name, v_hello.platform, v_hello.app_version,
          v_hello.opened_at, p_max_sockets);
      else
        v_status[v_hello.ord] := 'revoked';
      end if;
    end loop;
    -- A socket of the batch that a later one of the same device replaced is replaced.
    foreach v_hello in array v_hellos loop
      if v_status[v_hello.ord] = 'ok' then
        if exists (select from relay.connections where id = v_hello.connection) then
          v_ok := v_ok || v_hello.user_id;
        else
          v_status[v_hello.ord] := 'replaced';
        end if;
      end if;
    end loop;
  end if;

  select jsonb_agg(jsonb_build_object('connection', h.connection, 'status', v_status[h.ord]) order by h.ord)
  into v_results from unnest(v_hellos) h;
  select coalesce(jsonb_agg(jsonb_build_object('owner', p.owner_id, 'message', p.message)), '[]'::jsonb)
  into v_pending
  from relay.pending_locates(array(select distinct u from unnest(v_ok) u)) p;
  return jsonb_build_object('results', v_results, 'pending', v_pending);
end;
$$;
comment on function relay.device_hellos(text, jsonb, int) is
  'Registers up to 1000 sockets that said hello on INSTANCE; returns each one''s status (one element never fails another) and the pings waiting for their users.';

-- -----------------------------------------------------------------------------
-- Deleting sockets: row locks in the global order (device_id, id)
-- -----------------------------------------------------------------------------
create or replace function relay.device_disconnects(p_connections uuid[])
returns int
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_devices uuid[];
begin
  if p_connections is null or cardinality(p_connections) > 10000 then
    raise exception 'device_disconnects needs 0 to 10000 connection ids' using errcode = '22023';
  end if;
  with doomed as (select c.id from relay.connections c where c.id = any (p_connections)
                  order by c.device_id, c.id for update),
       gone as (delete from relay.connections c using doomed where c.id = doomed.id returning c.device_id)
  select coalesce(array_agg(device_id), '{}') into v_devices from gone;
  return private.devices_seen(v_devices);
end;
$$;

create or replace function relay.drain_connections(p_instance text)
returns int
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_devices uuid[];
begin
  perform private.check_instance_id(p_instance);
  with doomed as (select c.id from relay.connections c where c.instance_id = p_instance
                  order by c.device_id, c.id for update),
       gone as (delete from relay.connections c using doomed where c.id = doomed.id returning c.device_id)
  select coalesce(array_agg(device_id), '{}') into v_devices from gone;
  return private.devices_seen(v_devices);
end;
$$;

create or replace function relay.revoked_connections(p_instance text)
returns setof uuid
language plpgsql
security definer
set search_path = ''
as $$
begin
  perform private.check_instance_id(p_instance);
  return query
    with doomed as (
      select c.id from relay.connections c
      where c.instance_id = p_instance
        and (c.session_id is null
             or not exists (select from auth.sessions s
                            where s.id = c.session_id and s.user_id = c.user_id
                              and (s.not_after is null or s.not_after > now()))
             or exists (select from private.revoked_sessions r where r.session_id = c.session_id)
             or exists (select from public.devices d where d.id = c.device_id and d.revoked_at is not null))
      order by c.device_id, c.id
      for update of c)
    delete from relay.connections c using doomed where c.id = doomed.id
    returning c.id;
end;
$$;
comment on function relay.revoked_connections(text) is
  'Forgets and returns the sockets on INSTANCE whose session ended or whose device was removed (row locks in (device, id) order).';
