-- =============================================================================
-- Phones at scale: hellos in batches, an instance-wide drain, no re-created instances
-- =============================================================================
-- relay.device_hellos registers up to 1000 sockets in one call and returns, in the same
-- call, the pings waiting for their users: a reconnect storm of N phones costs N/batch
-- round trips and commits, not N. relay.device_hello is that call for one socket.
--
-- Neither creates the instance's row any more. A reaped instance (or one whose row was
-- lost in a Postgres crash) must find out from its heartbeat, which re-creates the row and
-- tells it to re-register every socket; a hello that re-created the row silently would
-- hide the loss, and the instance's other sockets would stay unregistered (no ping would
-- reach them). Until then its hellos get status 'unregistered' and write nothing.
--
-- relay.device_disconnects forgets many closed sockets at once, and relay.drain_connections
-- all of an instance's sockets (at SIGTERM, before it closes them). The backstop poll
-- (relay.pending_locates_on) and the lookups by owner and device take one index probe per
-- row whatever the planner's statistics say.

-- -----------------------------------------------------------------------------
-- private.register_socket: one hello, under the device's and the owner's locks
-- -----------------------------------------------------------------------------
-- Returns ok | revoked | forbidden | replaced | too_many. The caller holds the advisory
-- locks (device, then owner) and a key-share lock on the instance's row.
create or replace function private.register_socket(p_instance text, p_connection uuid, p_user uuid, p_session uuid,
  p_device uuid, p_name text, p_platform text, p_app_version text, p_opened_at timestamptz, p_max_sockets int)
returns text
language plpgsql
set search_path = ''
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
-- hellos: [{connection, user, session, device, name, platform, app_version, opened_at}],
-- 1 to 1000 of them (app_version null: unchanged, as a re-registration sends it). results: [{connection, status}] in the order given; status is ok,
-- revoked (session ended, unknown user or removed device: close 4000), forbidden (another
-- user's device), replaced (a newer socket of the device exists: close 4000), too_many
-- (4002) or unregistered (the instance's row is gone: nothing written; its heartbeat
-- re-creates the row and the instance says hello again for every socket). pending:
-- [{owner, message}], the pings waiting for the users of the ok sockets, oldest first.
--
-- Locks are taken in one global order — every device lock (sorted), then every owner lock
-- (sorted) — as relay.open_request takes one owner lock: two batches, or a batch and a
-- request, never wait for each other in a cycle. A request opened while the batch runs
-- either sees its sockets (and notifies this instance) or is in `pending`.
create type private.socket_hello as (
  ord int, connection uuid, user_id uuid, session_id uuid, device_id uuid,
  name text, platform text, app_version text, opened_at timestamptz);
comment on type private.socket_hello is 'One element of relay.device_hellos'' argument, with its position.';

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
  -- Oldest socket first: of two sockets of one device the later one wins, and the oldest
  -- sockets of a user keep their places under the cap.
  select array_agg(row(e.ord, h.connection, h."user", h.session, h.device, h.name, h.platform, h.app_version,
                       h.opened_at)::private.socket_hello order by h.opened_at, e.ord)
  into v_hellos
  from jsonb_array_elements(p_hellos) with ordinality as e(value, ord),
       jsonb_to_record(e.value) as h(connection uuid, "user" uuid, session uuid, device uuid, name text,
                                     platform text, app_version text, opened_at timestamptz);
  if exists (select from unnest(v_hellos) h
             where h.connection is null or h.user_id is null or h.session_id is null or h.device_id is null
                or h.opened_at is null) then
    raise exception 'every hello needs a connection, user, session and device id and an opening time'
      using errcode = '22004';
  end if;
  if exists (select from unnest(v_hellos) h where h.platform is null or h.platform not in ('ios', 'android', 'desktop', 'web')) then
    raise exception 'platform must be ios, android, desktop or web' using errcode = '22023';
  end if;
  if (select count(distinct h.connection) from unnest(v_hellos) h) <> cardinality(v_hellos) then
    raise exception 'a connection says hello once per batch' using errcode = '22023';
  end if;
  v_status := array_fill('unregistered'::text, array[cardinality(v_hellos)]);

  -- The instance's row stays while the batch runs (the reaper skips a locked row).
  if exists (select from relay.instances where id = p_instance for key share) then
    perform pg_advisory_xact_lock(k)
    from (select distinct hashtextextended('whereabot_device_hello:' || h.device_id::text, 0) as k
          from unnest(v_hellos) h order by 1) devices;
    perform pg_advisory_xact_lock(k)
    from (select distinct hashtextextended('whereabot_open_request:' || h.user_id::text, 0) as k
          from unnest(v_hellos) h order by 1) owners;

    foreach v_hello in array v_hellos loop
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
  'Registers up to 1000 sockets that said hello on INSTANCE; returns each one''s status and the pings waiting for their users.';

-- -----------------------------------------------------------------------------
-- relay.device_hello: one socket, through relay.device_hellos
-- -----------------------------------------------------------------------------
create or replace function relay.device_hello(p_instance text, p_connection uuid, p_user uuid, p_session uuid,
  p_device uuid, p_name text, p_platform text, p_app_version text, p_opened_at timestamptz, p_max_sockets int default 20)
returns jsonb
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_result jsonb;
begin
  perform private.check_instance_id(p_instance);
  if p_connection is null or p_user is null or p_session is null or p_device is null or p_opened_at is null then
    raise exception 'device_hello needs a connection, user, session and device id and an opening time' using errcode = '22004';
  end if;
  if not exists (select from auth.users where id = p_user) then
    raise exception 'no such user' using errcode = 'P0002';
  end if;
  v_result := relay.device_hellos(p_instance, jsonb_build_array(jsonb_build_object(
    'connection', p_connection, 'user', p_user, 'session', p_session, 'device', p_device, 'name', p_name,
    'platform', p_platform, 'app_version', p_app_version, 'opened_at', p_opened_at)), p_max_sockets);
  return jsonb_build_object(
    'status', v_result -> 'results' -> 0 ->> 'status',
    'pending', coalesce((select jsonb_agg(p -> 'message') from jsonb_array_elements(v_result -> 'pending') p), '[]'::jsonb));
end;
$$;
comment on function relay.device_hello(text, uuid, uuid, uuid, uuid, text, text, text, timestamptz, int) is
  'One socket''s hello (relay.device_hellos with one element): {status, pending messages}.';

-- -----------------------------------------------------------------------------
-- relay.device_disconnects(connections) and relay.device_disconnect(connection)
-- -----------------------------------------------------------------------------
-- The devices of closed sockets were seen now (written at most every 30 s per device);
-- returns how many sockets closed.
create or replace function private.devices_seen(p_devices uuid[])
returns int
language plpgsql
set search_path = ''
as $$
begin
  update public.devices set last_seen_at = now()
  where id = any (p_devices) and (last_seen_at is null or last_seen_at < now() - interval '30 seconds');
  return cardinality(p_devices);
end;
$$;
comment on function private.devices_seen(uuid[]) is
  'The devices of sockets that just closed were seen now (at most every 30 s per device); returns how many.';
revoke execute on function private.devices_seen(uuid[]) from public, anon, authenticated;

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
  with gone as (delete from relay.connections where id = any (p_connections) returning device_id)
  select coalesce(array_agg(device_id), '{}') into v_devices from gone;
  return private.devices_seen(v_devices);
end;
$$;
comment on function relay.device_disconnects(uuid[]) is
  'Device sockets closed: forget them (those already replaced or reaped are skipped); returns how many were registered.';

create or replace function relay.device_disconnect(p_connection uuid)
returns boolean
language plpgsql
security definer
set search_path = ''
as $$
begin
  if p_connection is null then
    raise exception 'device_disconnect needs a connection id' using errcode = '22004';
  end if;
  return relay.device_disconnects(array[p_connection]) = 1;
end;
$$;
comment on function relay.device_disconnect(uuid) is
  'A device socket closed: forget it (false when it was already replaced or reaped).';

-- -----------------------------------------------------------------------------
-- relay.drain_connections(instance) → how many sockets the draining instance held
-- -----------------------------------------------------------------------------
-- At SIGTERM, before the instance closes its sockets (1012): no request addresses them any
-- more, and their devices were seen now. One statement, not one disconnect per phone.
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
  with gone as (delete from relay.connections where instance_id = p_instance returning device_id)
  select coalesce(array_agg(device_id), '{}') into v_devices from gone;
  return private.devices_seen(v_devices);
end;
$$;
comment on function relay.drain_connections(text) is
  'A draining INSTANCE forgets all of its sockets at once (before it closes them); returns how many.';

revoke execute on function relay.device_hellos(text, jsonb, int), relay.device_disconnects(uuid[]),
  relay.drain_connections(text) from public, anon, authenticated, service_role;
grant execute on function relay.device_hellos(text, jsonb, int), relay.device_disconnects(uuid[]),
  relay.drain_connections(text) to whereabot_relay;

-- -----------------------------------------------------------------------------
-- relay.pending_locates_on(instance): one index probe per waiting request
-- -----------------------------------------------------------------------------
-- The backstop poll runs at every heartbeat. Written as a semi-join it could be planned
-- (and cached by PL/pgSQL as a generic plan) as a nested loop over every socket for every
-- waiting request — 0.9 s per call with 10,000 of each, measured in the reconnect storm.
-- The lateral probe leaves one shape: the waiting requests (partial index), each looked up
-- by its owner in relay.connections (index): O(waiting × log sockets).
create or replace function relay.pending_locates_on(p_instance text)
returns table (owner_id uuid, message jsonb)
language plpgsql
stable
security definer
set search_path = ''
as $$
begin
  perform private.check_instance_id(p_instance);
  return query
    select r.owner_id, private.locate_ping(r)
    from relay.pending_requests r
    cross join lateral (select from relay.connections c
                        where c.user_id = r.owner_id and c.instance_id = p_instance limit 1) held
    where r.settled_at is null and r.expires_at > now()
    order by r.created_at;
end;
$$;

-- -----------------------------------------------------------------------------
-- relay.revoked_connections(instance): set-based, as relay.session_state decides
-- -----------------------------------------------------------------------------
-- The heartbeat's revocation check called relay.session_state once per socket (77 ms per
-- beat for 10,000 sockets, measured by make bench-scale); the conditions of
-- relay.session_states (below), as joins.
create or replace function relay.revoked_connections(p_instance text)
returns setof uuid
language plpgsql
security definer
set search_path = ''
as $$
begin
  perform private.check_instance_id(p_instance);
  return query
    delete from relay.connections c
    where c.instance_id = p_instance
      and (c.session_id is null
           or not exists (select from auth.sessions s
                          where s.id = c.session_id and s.user_id = c.user_id
                            and (s.not_after is null or s.not_after > now()))
           or exists (select from private.revoked_sessions r where r.session_id = c.session_id)
           or exists (select from public.devices d where d.id = c.device_id and d.revoked_at is not null))
    returning c.id;
end;
$$;

-- -----------------------------------------------------------------------------
-- Lookups in the UNLOGGED relay tables go through their indexes, whatever the statistics say
-- -----------------------------------------------------------------------------
-- relay.connections swings from empty to tens of thousands of rows within seconds (a
-- restart, a storm) and is rarely analyzed in between; PL/pgSQL caches a generic plan. A
-- plan chosen while it was empty scans it sequentially for every hello or request: O(sockets)
-- per call. These functions only ever look rows up by an indexed key, so sequential scans are
-- switched off for them.
alter function private.register_socket(text, uuid, uuid, uuid, uuid, text, text, text, timestamptz, int)
  set enable_seqscan = off;
-- By owner and instance in one probe (the backstop poll), by owner alone as its prefix.
create index if not exists connections_user_id_instance_id_idx on relay.connections (user_id, instance_id);
drop index if exists relay.connections_user_id_idx;
comment on index relay.connections_user_id_instance_id_idx is
  'relay.open_request (live sockets of the owner), the 20-sockets cap in device_hellos, and relay.pending_locates_on (is the owner on this instance).';
alter function relay.pending_locates_on(text) set enable_seqscan = off;
alter function private.owner_instances(uuid) set enable_seqscan = off;

-- -----------------------------------------------------------------------------
-- relay.session_states(sessions, users) → relay.session_state of each pair, in order
-- -----------------------------------------------------------------------------
-- The relay checks a token's session before a phone's socket opens; in a reconnect storm
-- the checks of many sockets go as one call (at most 1000 pairs).
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
             when not exists (select from auth.sessions s
                              where s.id = x.session_id and s.user_id = x.user_id
                                and (s.not_after is null or s.not_after > now())) then 'signed_out'
             when exists (select from private.revoked_sessions r where r.session_id = x.session_id) then 'device_removed'
             else 'alive'
           end
    from unnest(p_sessions, p_users) with ordinality as x(session_id, user_id, n)
    order by x.n);
end;
$$;
comment on function relay.session_states(uuid[], uuid[]) is
  'relay.session_state of each (session, user) pair, in order: alive, signed_out or device_removed.';
revoke execute on function relay.session_states(uuid[], uuid[]) from public, anon, authenticated, service_role;
grant execute on function relay.session_states(uuid[], uuid[]) to whereabot_relay;

-- relay.session_state is relay.session_states of one pair (one place decides).
create or replace function relay.session_state(p_session uuid, p_user uuid)
returns text
language plpgsql
stable
security definer
set search_path = ''
as $$
begin
  if p_session is null or p_user is null then
    raise exception 'session_state needs a session id and a user id' using errcode = '22004';
  end if;
  return (relay.session_states(array[p_session], array[p_user]))[1];
end;
$$;
