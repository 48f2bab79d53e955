-- =============================================================================
-- The relay's role keeps only the functions the relay calls
-- =============================================================================
-- relay.device_hello, relay.device_disconnect, relay.session_state and relay.pending_locates
-- were the one-element forms of relay.device_hellos, relay.device_disconnects,
-- relay.session_states and of the pending pings device_hellos returns. The relay calls only
-- the batch forms, yet the single ones stayed granted to whereabot_relay (issue 27). They are
-- dropped. The two functions that still used one internally now do without it, with the same
-- results: private.register_socket asks relay.session_states for its one pair, and
-- relay.device_hellos reads the pings waiting for its users itself (as pending_locates did:
-- the owner's waiting, unexpired requests, oldest first).

-- -----------------------------------------------------------------------------
-- private.register_socket: the session's state from relay.session_states
-- -----------------------------------------------------------------------------
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
      'device', p_device, 'event', 'hello', 'instance', p_instance, 'connection', p_connection));
  end if;
  return 'ok';
end;
$$;

-- -----------------------------------------------------------------------------
-- relay.device_hellos: the pending pings without relay.pending_locates
-- -----------------------------------------------------------------------------
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
  -- The pings still waiting for the users of the ok sockets, oldest first.
  select coalesce(jsonb_agg(jsonb_build_object('owner', r.owner_id, 'message', private.locate_ping(r))
                            order by r.created_at), '[]'::jsonb)
  into v_pending
  from relay.pending_requests r
  where r.owner_id = any (v_ok) and r.settled_at is null and r.expires_at > now();
  return jsonb_build_object('results', v_results, 'pending', v_pending);
end;
$$;

-- -----------------------------------------------------------------------------
-- The single forms go
-- -----------------------------------------------------------------------------
drop function if exists relay.device_hello(text, uuid, uuid, uuid, uuid, text, text, text, timestamptz, int);
drop function if exists relay.device_disconnect(uuid);
drop function if exists relay.session_state(uuid, uuid);
drop function if exists relay.pending_locates(uuid[]);

-- Descriptions that named them.
comment on function relay.session_states(uuid[], uuid[]) is
  'The state of each (session, user) pair, in order: alive, signed_out (no auth.sessions row or past not_after) or device_removed (revoked by removing its device).';
comment on index relay.connections_device_id_idx is 'relay.device_hellos (replaced sockets) and device revocation, by device.';
comment on index relay.pending_requests_waiting_owner_idx is
  'relay.open_request''s caps and relay.device_hellos'' pending pings: the requests still waiting for an owner.';
