-- =============================================================================
-- Relay device sockets: hellos in batches, disconnects, drain, revocation, backstop poll
-- =============================================================================
-- relay.device_hellos registers up to 1000 sockets in one call and returns, in the same
-- call, the pings waiting for their users: a reconnect storm of N phones costs N/batch
-- round trips and commits, not N. It never creates the instance's row: a reaped instance
-- (or one whose row was lost in a Postgres crash) finds out from its heartbeat, which
-- re-creates the row and tells it to re-register every socket; until then its hellos get
-- 'unregistered' and write nothing.
--
-- One account never fails a batch: each element gets its own status (a malformed hello is
-- 'invalid', a new device past the account's cap 'too_many_devices'); only what no peer can
-- cause (a batch that is not an array of 1 to 1000, a connection twice) refuses the call.
-- Whatever else could still fail for one element fails the call, and the relay then halves
-- that batch until the hello that fails stands alone (InstanceDriver.helloStatuses).
--
-- A device's row is rewritten only when its name, platform or app version changed, or
-- last_seen_at is older than 30 s (the heartbeat's granularity; online means seen in the
-- last 90 s): a transaction that changes only UNLOGGED tables commits without waiting for
-- a WAL flush, so a reconnect storm writes nothing durable. Hellos of one device are
-- serialized by an advisory lock, not a (WAL-logged) row lock.
--
-- Lock order. Every function that deletes rows of relay.connections takes their row locks
-- in one global order, (device_id, id), and a hello batch takes its devices' rows in that
-- order too, after its advisory locks (every device lock, sorted, then every owner lock,
-- sorted, as relay.open_request takes one owner lock) and before it changes anything: no
-- two batches, or a batch and a request or the heartbeat's revocation check, wait for each
-- other in a cycle. A request opened while a batch runs either sees its sockets (and
-- notifies this instance) or is in the batch's pending list.
--
-- relay.connections swings from empty to tens of thousands of rows within seconds and is
-- rarely analyzed in between; PL/pgSQL caches a generic plan. Functions that only ever look
-- its rows up by an indexed key switch sequential scans off.

-- -----------------------------------------------------------------------------
-- private.register_socket: one hello, under the device's and the owner's locks
-- -----------------------------------------------------------------------------
-- Returns ok | revoked | forbidden | replaced | too_many | too_many_devices. The caller
-- holds the advisory locks (device, then owner), the row locks of the device's sockets and
-- a key-share lock on the instance's row. A new device past the account's cap is this
-- socket's problem alone; it is checked under the owner's lock, so two batches of one user
-- cannot both pass.
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
revoke execute on function private.register_socket(text, uuid, uuid, uuid, uuid, text, text, text, timestamptz, int)
  from public, anon, authenticated;

-- -----------------------------------------------------------------------------
-- relay.device_hellos(instance, hellos, max_sockets) → {results, pending}
-- -----------------------------------------------------------------------------
-- hellos: [{connection, user, session, device, name, platform, app_version, opened_at}],
-- 1 to 1000 of them (app_version null: unchanged, as a re-registration sends it). results:
-- [{connection, status}] in the order given; status is ok, revoked (session ended, unknown
-- user or removed device: close 4000), forbidden (another user's device), replaced (a newer
-- socket of the device exists: close 4000), too_many (the user's 20 sockets: 4002),
-- too_many_devices (a new device past the account's cap: 4002), invalid (a hello without
-- its ids or opening time, or with an unknown platform: 1008) or unregistered (the
-- instance's row is gone: nothing written). pending: [{owner, message}], the pings waiting
-- for the users of the ok sockets, oldest first, but none that quiet hours hold back.
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
  -- The pings still waiting for the users of the ok sockets, oldest first; none of a
  -- request whose agent may not wake its owner in the quiet hours holding now
  -- (private.quiet_until, as relay.open_request asks it: docs/agents.md, "Quiet hours").
  select coalesce(jsonb_agg(jsonb_build_object('owner', r.owner_id, 'message', private.locate_ping(r))
                            order by r.created_at), '[]'::jsonb)
  into v_pending
  from relay.pending_requests r
  where r.owner_id = any (v_ok) and r.settled_at is null and r.expires_at > now()
    and (not exists (select from public.quiet_hours q where q.user_id = r.owner_id)
         or private.quiet_until(r.owner_id, r.client_id, r.requester_id, now()) is null);
  return jsonb_build_object('results', v_results, 'pending', v_pending);
end;
$$;
comment on function relay.device_hellos(text, jsonb, int) is
  'Registers up to 1000 sockets that said hello on INSTANCE; returns each one''s status (one element never fails another) and the pings waiting for their users (none that quiet hours hold back).';

-- -----------------------------------------------------------------------------
-- relay.device_disconnects(connections), relay.drain_connections(instance)
-- -----------------------------------------------------------------------------
-- The devices of closed sockets were seen now (written at most every 30 s per device).
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

-- Sockets closed; returns how many were registered (those already replaced or reaped are
-- skipped).
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
  -- Locked in (device, id) order, then deleted by the same ids (each looked up, never a
  -- join with the locking subquery: see relay.mark_delivered).
  perform 1 from relay.connections c join unnest(p_connections) as u (id) on c.id = u.id
  order by c.device_id, c.id
  for update of c;
  with gone as (delete from relay.connections c using unnest(p_connections) as u (id) where c.id = u.id
                returning c.device_id)
  select coalesce(array_agg(device_id), '{}') into v_devices from gone;
  return private.devices_seen(v_devices);
end;
$$;
comment on function relay.device_disconnects(uuid[]) is
  'Device sockets closed: forget them (those already replaced or reaped are skipped); returns how many were registered.';

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
  -- Locked in (device, id) order, then deleted by the instance (no join with the locking
  -- subquery: see relay.mark_delivered).
  perform 1 from relay.connections c where c.instance_id = p_instance
  order by c.device_id, c.id
  for update;
  with gone as (delete from relay.connections c where c.instance_id = p_instance returning c.device_id)
  select coalesce(array_agg(device_id), '{}') into v_devices from gone;
  return private.devices_seen(v_devices);
end;
$$;
comment on function relay.drain_connections(text) is
  'A draining INSTANCE forgets all of its sockets at once (before it closes them); returns how many.';

-- -----------------------------------------------------------------------------
-- relay.revoked_connections(instance) → sockets on INSTANCE to close 4000 "revoked"
-- -----------------------------------------------------------------------------
-- Asked at every heartbeat: sockets whose session was signed out or revoked, whose device
-- was removed, or whose user was banned or deleted (private.end_refused_user records each
-- of their sessions). Only what changed since the instance's last check is looked at: the
-- private.revocations rows and the sessions whose not_after passed since then (both by an
-- index), each joined to this instance's sockets by session or device (an index), with a
-- minute of overlap for a revocation whose transaction committed after a check that began
-- later than it. The first check of an instance (its row new or re-created) looks at all
-- of its sockets. Candidates are confirmed under the conditions of relay.session_states,
-- written as joins. Their rows are deleted here, locked in (device, id) order.
create or replace function relay.revoked_connections(p_instance text)
returns setof uuid
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_checked timestamptz;
  v_since timestamptz;
begin
  perform private.check_instance_id(p_instance);
  select revocations_checked_at into v_checked from relay.instances where id = p_instance for update;
  update relay.instances set revocations_checked_at = now() where id = p_instance;
  v_since := v_checked - interval '1 minute';
  return query
    with candidates as (
      select c.id from relay.connections c
      where v_checked is null and c.instance_id = p_instance
      union
      select c.id from private.revocations r join relay.connections c on c.session_id = r.session_id
      where r.revoked_at >= v_since and c.instance_id = p_instance
      union
      select c.id from private.revocations r join relay.connections c on c.device_id = r.device_id
      where r.revoked_at >= v_since and c.instance_id = p_instance
      union
      select c.id from auth.sessions s join relay.connections c on c.session_id = s.id
      where s.not_after >= v_since and s.not_after <= now() and c.instance_id = p_instance),
    doomed as (
      select c.id from relay.connections c join candidates k on k.id = c.id
      where c.session_id is null
         or not exists (select from auth.sessions s
                        where s.id = c.session_id and s.user_id = c.user_id
                          and (s.not_after is null or s.not_after > now()))
         or exists (select from private.revoked_sessions r where r.session_id = c.session_id)
         or exists (select from public.devices d where d.id = c.device_id and d.revoked_at is not null)
         or not exists (select from auth.users u
                        where u.id = c.user_id and u.deleted_at is null
                          and (u.banned_until is null or u.banned_until < now()))
      order by c.device_id, c.id
      for update of c)
    delete from relay.connections c using doomed where c.id = doomed.id
    returning c.id;
end;
$$;
comment on function relay.revoked_connections(text) is
  'Forgets and returns the sockets on INSTANCE whose session ended, whose device was removed or whose user was banned or deleted since its last check (row locks in (device, id) order).';

-- -----------------------------------------------------------------------------
-- relay.pending_locates_on(instance): the backstop poll's pings, by instance
-- -----------------------------------------------------------------------------
-- Every few seconds each instance looks for pings its phones should have but may have
-- missed (a lost notification). Asking by the instance's own sockets keeps the poll's cost
-- proportional to the requests waiting. The lateral probe leaves the planner one shape:
-- the waiting requests (partial index), each looked up by its owner in relay.connections
-- (index): O(waiting × log sockets); as a semi-join it could be cached as a nested loop
-- over every socket for every waiting request (0.9 s per call with 10,000 of each). A
-- request whose agent may not wake its owner in the quiet hours holding now is left out
-- (private.quiet_until, as relay.open_request asks it): it stays open, and its ping goes
-- out at the first poll after the window.
create or replace function relay.pending_locates_on(p_instance text)
returns table (owner_id uuid, message jsonb)
language plpgsql
stable
security definer
set search_path = ''
set enable_seqscan = off
as $$
begin
  perform private.check_instance_id(p_instance);
  return query
    select r.owner_id, private.locate_ping(r)
    from relay.pending_requests r
    cross join lateral (select from relay.connections c
                        where c.user_id = r.owner_id and c.instance_id = p_instance limit 1) held
    where r.settled_at is null and r.expires_at > now()
      and (not exists (select from public.quiet_hours q where q.user_id = r.owner_id)
           or private.quiet_until(r.owner_id, r.client_id, r.requester_id, now()) is null)
    order by r.created_at;
end;
$$;
comment on function relay.pending_locates_on(text) is
  'Locate messages of every request still waiting for a user with a socket on INSTANCE, oldest first (none that quiet hours hold back).';

revoke execute on function relay.device_hellos(text, jsonb, int), relay.device_disconnects(uuid[]),
  relay.drain_connections(text), relay.revoked_connections(text), relay.pending_locates_on(text)
  from public, anon, authenticated, service_role;
grant execute on function relay.device_hellos(text, jsonb, int), relay.device_disconnects(uuid[]),
  relay.drain_connections(text), relay.revoked_connections(text), relay.pending_locates_on(text)
  to whereabot_relay;
