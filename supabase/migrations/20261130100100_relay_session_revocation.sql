-- =============================================================================
-- Device sockets as good as their credential: revocation, caps, stale hellos
-- =============================================================================
-- A socket is only as good as the session behind its token. Signing out deletes the
-- session's auth.sessions row; removing a device revokes the session that registered it
-- (that session can register no device again, a new device id included). Every socket
-- row records its session, so each instance can ask once per heartbeat which of its
-- sockets lost their session or device (relay.revoked_connections) and close them.
-- Also here: at most 20 device sockets per user across all instances, and a hello from a
-- socket older than the device's live one (a stale or late hello) no longer replaces it.

-- -----------------------------------------------------------------------------
-- private.revoked_sessions: sessions revoked by removing the device they registered
-- -----------------------------------------------------------------------------
-- Logged (it must survive a crash). A row lives as long as its auth.sessions row;
-- relay.reap deletes the rest.
create table if not exists private.revoked_sessions (
  session_id uuid primary key,
  user_id uuid not null references auth.users (id) on delete cascade,
  revoked_at timestamptz not null default now()
);
comment on table private.revoked_sessions is
  'Sessions revoked because a device they registered was removed; they may not connect or answer again.';
alter table private.revoked_sessions enable row level security;
revoke all on private.revoked_sessions from public, anon, authenticated, service_role;

-- The session that last said hello for each device (set by relay.device_hello only).
alter table public.devices add column if not exists session_id uuid;
comment on column public.devices.session_id is
  'The session that last registered this device; removing the device revokes it.';

-- Socket rows carry their session and when the socket was opened (newest wins).
alter table relay.connections add column if not exists session_id uuid;
alter table relay.connections add column if not exists opened_at timestamptz not null default now();
create index if not exists connections_session_id_idx on relay.connections (session_id);

-- -----------------------------------------------------------------------------
-- Removing a device revokes its session (only a session of the device's own user)
-- -----------------------------------------------------------------------------
create or replace function private.revoke_device_session()
returns trigger
language plpgsql
security definer
set search_path = ''
as $$
begin
  insert into private.revoked_sessions (session_id, user_id)
  select s.id, s.user_id from auth.sessions s
  where s.id = new.session_id and s.user_id = new.user_id
  on conflict (session_id) do nothing;
  return null;
end;
$$;
comment on function private.revoke_device_session() is
  'AFTER UPDATE trigger: a removed device revokes the session that registered it.';
revoke execute on function private.revoke_device_session() from public, anon, authenticated;

drop trigger if exists devices_revoke_session on public.devices;
create trigger devices_revoke_session
  after update of revoked_at on public.devices
  for each row when (old.revoked_at is null and new.revoked_at is not null and new.session_id is not null)
  execute function private.revoke_device_session();

-- -----------------------------------------------------------------------------
-- relay.session_state(session, user) → alive | signed_out | device_removed
-- -----------------------------------------------------------------------------
-- Replaces relay.session_alive, which could not tell a sign-out from a removed device.
drop function if exists relay.session_alive(uuid, uuid);
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
  if not exists (select from auth.sessions s
                 where s.id = p_session and s.user_id = p_user
                   and (s.not_after is null or s.not_after > now())) then
    return 'signed_out';
  end if;
  if exists (select from private.revoked_sessions r where r.session_id = p_session) then
    return 'device_removed';
  end if;
  return 'alive';
end;
$$;
comment on function relay.session_state(uuid, uuid) is
  'alive, signed_out (no auth.sessions row or past not_after) or device_removed (revoked by removing its device).';

-- -----------------------------------------------------------------------------
-- relay.device_hello(...) → {status, pending}
-- -----------------------------------------------------------------------------
-- status: ok (registered; pending holds the locate messages to send); revoked (the device
-- was removed, or the session was revoked or signed out: close 4000 "revoked");
-- forbidden (the device_id belongs to another user); replaced (a socket of this device
-- opened later is registered: this hello is stale, close it 4000 "replaced");
-- too_many (the user holds 20 sockets of other devices: close 4002 "too_many_devices").
-- On ok, older sockets of the device on any instance are replaced (whereabot_device
-- {device, event: hello, instance, connection}). Re-running hello for a live connection
-- (resync) is harmless.
drop function if exists relay.device_hello(text, uuid, uuid, uuid, text, text, text);
create or replace function relay.device_hello(
  p_instance text, p_connection uuid, p_user uuid, p_session uuid, p_device uuid,
  p_name text, p_platform text, p_app_version text, p_opened_at timestamptz,
  p_max_sockets int default 20)
returns jsonb
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_owner uuid;
  v_revoked_at timestamptz;
  v_known boolean;
  v_pending jsonb;
  v_name text := private.clean_display_text(p_name, 100);
  v_version text := private.clean_display_text(p_app_version, 50);
begin
  perform private.check_instance_id(p_instance);
  if p_connection is null or p_user is null or p_session is null or p_device is null or p_opened_at is null then
    raise exception 'device_hello needs a connection, user, session and device id and an opening time' using errcode = '22004';
  end if;
  if p_platform is null or p_platform not in ('ios', 'android', 'desktop', 'web') then
    raise exception 'platform must be ios, android, desktop or web' using errcode = '22023';
  end if;
  if p_max_sockets is null or p_max_sockets not between 1 and 1000 then
    raise exception 'max_sockets must be between 1 and 1000' using errcode = '22023';
  end if;
  if not exists (select from auth.users where id = p_user) then
    raise exception 'no such user' using errcode = 'P0002';
  end if;
  if relay.session_state(p_session, p_user) <> 'alive' then
    return jsonb_build_object('status', 'revoked', 'pending', '[]'::jsonb);
  end if;

  -- Hellos of one device are serialized (the newest socket wins) by an advisory lock, not
  -- a row lock: a row lock is WAL-logged and would make every hello wait for a disk flush.
  perform pg_advisory_xact_lock(hashtextextended('whereabot_device_hello:' || p_device::text, 0));
  select user_id, revoked_at into v_owner, v_revoked_at
  from public.devices where id = p_device;
  v_known := found;
  if v_known and v_owner <> p_user then
    return jsonb_build_object('status', 'forbidden', 'pending', '[]'::jsonb);
  end if;
  if v_known and v_revoked_at is not null then
    return jsonb_build_object('status', 'revoked', 'pending', '[]'::jsonb);
  end if;
  if exists (select from relay.connections
             where device_id = p_device and id <> p_connection and opened_at > p_opened_at) then
    return jsonb_build_object('status', 'replaced', 'pending', '[]'::jsonb);
  end if;
  if not exists (select from relay.connections where id = p_connection)
     and (select count(*) from relay.connections
          where user_id = p_user and device_id <> p_device) >= p_max_sockets then
    return jsonb_build_object('status', 'too_many', 'pending', '[]'::jsonb);
  end if;

  if v_known then
    -- Rewritten only when something changed or last_seen_at is older than the heartbeat's
    -- 30 s granularity, so a reconnect storm writes nothing durable.
    update public.devices
    set name = coalesce(nullif(v_name, ''), name),
        platform = p_platform,
        app_version = v_version,
        session_id = p_session,
        last_seen_at = now()
    where id = p_device
      and (name is distinct from coalesce(nullif(v_name, ''), name)
           or platform is distinct from p_platform
           or app_version is distinct from v_version
           or session_id is distinct from p_session
           or last_seen_at is null
           or last_seen_at < now() - interval '30 seconds');
  else
    insert into public.devices (id, user_id, name, platform, app_version, session_id, last_seen_at)
    values (p_device, p_user, v_name, p_platform, v_version, p_session, now());
  end if;

  insert into relay.instances (id) values (p_instance) on conflict (id) do nothing;
  delete from relay.connections where device_id = p_device and id <> p_connection;
  insert into relay.connections (id, instance_id, user_id, device_id, platform, session_id, opened_at)
  values (p_connection, p_instance, p_user, p_device, p_platform, p_session, p_opened_at)
  on conflict (id) do update set instance_id = excluded.instance_id;

  perform private.notify('whereabot_device', jsonb_build_object(
    'device', p_device, 'event', 'hello', 'instance', p_instance, 'connection', p_connection));

  select coalesce(jsonb_agg(p.message), '[]'::jsonb) into v_pending
  from relay.pending_locates(array[p_user]) p;
  return jsonb_build_object('status', 'ok', 'pending', v_pending);
end;
$$;
comment on function relay.device_hello(text, uuid, uuid, uuid, uuid, text, text, text, timestamptz, int) is
  'A device socket said hello: check its session, device, age and the per-user socket cap, register it, replace older sockets of the device, return pending pings.';

-- -----------------------------------------------------------------------------
-- relay.revoked_connections(instance) → sockets on INSTANCE to close 4000 "revoked"
-- -----------------------------------------------------------------------------
-- Asked at every heartbeat: sockets whose session was signed out or revoked, or whose
-- device was removed. Their rows are deleted here.
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
           or relay.session_state(c.session_id, c.user_id) <> 'alive'
           or exists (select from public.devices d where d.id = c.device_id and d.revoked_at is not null))
    returning c.id;
end;
$$;
comment on function relay.revoked_connections(text) is
  'Removes and returns the sockets on INSTANCE whose session is gone or revoked or whose device was removed.';

-- Revoked sessions are kept only while their auth.sessions row exists; at most LIMIT rows
-- are deleted per call, so the call's cost is bounded.
create or replace function relay.forget_ended_sessions(p_limit int)
returns int
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_deleted int;
begin
  if p_limit is null or p_limit not between 1 and 100000 then
    raise exception 'limit must be between 1 and 100000' using errcode = '22023';
  end if;
  delete from private.revoked_sessions r
  where r.session_id in (select x.session_id from private.revoked_sessions x
                         where not exists (select from auth.sessions s where s.id = x.session_id)
                         limit p_limit);
  get diagnostics v_deleted = row_count;
  return v_deleted;
end;
$$;
comment on function relay.forget_ended_sessions(int) is
  'Deletes up to LIMIT revoked-session rows whose auth.sessions row is gone (called with reap).';

revoke execute on function relay.session_state(uuid, uuid),
  relay.device_hello(text, uuid, uuid, uuid, uuid, text, text, text, timestamptz, int),
  relay.revoked_connections(text), relay.forget_ended_sessions(int)
  from public, anon, authenticated, service_role;
grant execute on function relay.session_state(uuid, uuid),
  relay.device_hello(text, uuid, uuid, uuid, uuid, text, text, text, timestamptz, int),
  relay.revoked_connections(text), relay.forget_ended_sessions(int)
  to whereabot_relay;
