-- =============================================================================
-- Devices: each install of the phone app
-- =============================================================================
-- `id` is the install's stable device_id. The relay upserts the row at hello
-- (relay.device_hellos) and writes last_seen_at on connect, on disconnect and at most every
-- 5 minutes while the socket is up; a device is online while it has a socket in
-- relay.connections (public.online_devices). Users rename and remove (revoked_at) their
-- devices with plain updates; removal is final, closes the device's socket at once and
-- revokes the session that registered it. An agent's token reads no device (last_seen_at
-- would tell it whether a phone is online without asking the person).

create table public.devices (
  id uuid primary key,
  user_id uuid not null references auth.users (id) on delete cascade,
  name text not null default '' check (char_length(name) <= 100),
  platform text not null check (platform in ('ios', 'android', 'desktop', 'web')),
  app_version text not null default '' check (char_length(app_version) <= 50),
  created_at timestamptz not null default now(),
  last_seen_at timestamptz not null default now(),
  revoked_at timestamptz,
  session_id uuid
) with (fillfactor = 70);  -- room on each page: a last_seen_at refresh is a HOT update (no index entry)
comment on table public.devices is
  'Installs of the Whereabot app per user. last_seen_at: connect, disconnect, at most every 5 minutes; online: public.online_devices(); revoked_at set = removed.';
comment on column public.devices.session_id is
  'The session that last registered this device; removing the device revokes it.';

create index devices_user_id_idx on public.devices (user_id);
comment on index public.devices_user_id_idx is 'relay.user_devices, the 50-devices limit trigger, deleting a user (cascade).';

alter table public.devices enable row level security;

revoke all on public.devices from anon, authenticated;
grant select, insert on public.devices to authenticated;
grant update (name, revoked_at) on public.devices to authenticated;

create policy "Users can read their own devices from their own session"
  on public.devices for select to authenticated
  using (user_id = (select auth.uid()) and (select auth.jwt()) ->> 'client_id' is null);

create policy "Users can register their own devices from their own session"
  on public.devices for insert to authenticated
  with check (user_id = (select auth.uid()) and (select auth.jwt()) ->> 'client_id' is null and revoked_at is null);

create policy "Users can rename and remove devices from their own session"
  on public.devices for update to authenticated
  using (user_id = (select auth.uid()) and (select auth.jwt()) ->> 'client_id' is null)
  with check (user_id = (select auth.uid()) and (select auth.jwt()) ->> 'client_id' is null);

create trigger devices_revocation_is_final
  before update on public.devices
  for each row execute function private.forbid_unrevoke();

-- -----------------------------------------------------------------------------
-- The cap on a user's devices, in one place
-- -----------------------------------------------------------------------------
-- The table's trigger and the hello check (private.register_socket) read the same number.
create or replace function private.max_devices_per_user()
returns int
language sql
immutable
set search_path = ''
as $$ select 50 $$;
comment on function private.max_devices_per_user() is
  'Devices (not removed) one user may have: the cap of public.devices'' trigger and of a hello.';
revoke execute on function private.max_devices_per_user() from public, anon, authenticated;

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

-- One account's inserts wait for each other, so the cap holds under concurrency.
create trigger devices_lock_user
  before insert on public.devices
  for each row execute function private.lock_user_inserts();
create trigger devices_per_user_limit
  before insert on public.devices
  for each row execute function private.enforce_device_limit();

-- -----------------------------------------------------------------------------
-- private.is_own_device(device): for policies of tables that point at a device
-- -----------------------------------------------------------------------------
-- Security invoker: it sees devices through RLS, so it is true only for the caller's own
-- devices. A null device (not tied to one) counts as own.
create or replace function private.is_own_device(p_device uuid)
returns boolean
language sql
stable
set search_path = ''
as $$
  select p_device is null
      or exists (select from public.devices d where d.id = p_device and d.user_id = (select auth.uid()))
$$;
comment on function private.is_own_device(uuid) is
  'True when DEVICE is null or one of the calling user''s devices; used by RLS policies.';
revoke execute on function private.is_own_device(uuid) from public, anon;
grant execute on function private.is_own_device(uuid) to authenticated;

-- -----------------------------------------------------------------------------
-- whereabot_device {device, owner, event: revoked}: the instance holding the socket closes it
-- -----------------------------------------------------------------------------
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
revoke execute on function private.notify_device_revoked() from public, anon, authenticated;

create trigger devices_notify_revoked
  after update of revoked_at on public.devices
  for each row when (old.revoked_at is null and new.revoked_at is not null)
  execute function private.notify_device_revoked();

-- -----------------------------------------------------------------------------
-- private.revoked_sessions: sessions revoked by removing the device they registered
-- -----------------------------------------------------------------------------
-- Such a session can register no device again, a new device id included, and its sockets
-- are closed at the next heartbeat (relay.revoked_connections). Logged (it must survive a
-- crash). A row lives as long as its auth.sessions row; relay.forget_ended_sessions deletes
-- the rest.
create table private.revoked_sessions (
  session_id uuid primary key,
  user_id uuid not null references auth.users (id) on delete cascade,
  revoked_at timestamptz not null default now()
);
comment on table private.revoked_sessions is
  'Sessions revoked because a device they registered was removed; they may not connect or answer again.';
alter table private.revoked_sessions enable row level security;
revoke all on private.revoked_sessions from public, anon, authenticated, service_role;

-- Removing a device revokes its session (only a session of the device's own user).
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

create trigger devices_revoke_session
  after update of revoked_at on public.devices
  for each row when (old.revoked_at is null and new.revoked_at is not null and new.session_id is not null)
  execute function private.revoke_device_session();

-- -----------------------------------------------------------------------------
-- private.revocations: what ended a session or a device, for the heartbeat's check
-- -----------------------------------------------------------------------------
-- A signed-out or deleted session (its auth.sessions row deleted), a session revoked by
-- removing its device, and a removed device each leave a row here, written by a trigger.
-- relay.revoked_connections reads only the rows since its last check (by revoked_at, an
-- index), so a heartbeat's cost follows the revocations, not the sockets. Rows older than
-- an hour are deleted by relay.reap. Logged, like revoked_sessions.
create table private.revocations (
  id bigint generated always as identity primary key,
  session_id uuid,
  device_id uuid,
  revoked_at timestamptz not null default now(),
  check (num_nonnulls(session_id, device_id) = 1)
);
comment on table private.revocations is
  'Sessions that ended and devices that were removed, by time, for the heartbeat''s incremental revocation check; kept an hour.';
create index revocations_revoked_at_idx on private.revocations (revoked_at);
comment on index private.revocations_revoked_at_idx is
  'relay.revoked_connections: the revocations since the last check; relay.reap: rows past an hour.';
alter table private.revocations enable row level security;
revoke all on private.revocations from public, anon, authenticated, service_role;

create or replace function private.record_revocation()
returns trigger
language plpgsql
security definer
set search_path = ''
as $$
declare
  -- TG_ARGV: what ended ('session' or 'device') and the column of the row that names it.
  v_id uuid := (to_jsonb(case when tg_op = 'DELETE' then old else new end) ->> tg_argv[1])::uuid;
begin
  if tg_argv[0] = 'session' then
    insert into private.revocations (session_id) values (v_id);
  else
    insert into private.revocations (device_id) values (v_id);
  end if;
  return null;
end;
$$;
comment on function private.record_revocation() is
  'AFTER trigger on auth.sessions (delete), private.revoked_sessions (insert) and public.devices (removal): the sockets of what ended close at the next heartbeat.';
revoke execute on function private.record_revocation() from public, anon, authenticated;

create trigger revoked_sessions_record_revocation
  after insert on private.revoked_sessions
  for each row execute function private.record_revocation('session', 'session_id');

create trigger devices_record_revocation
  after update of revoked_at on public.devices
  for each row when (old.revoked_at is null and new.revoked_at is not null)
  execute function private.record_revocation('device', 'id');

-- CREATE OR REPLACE: dropping a trigger needs to own auth.sessions (supabase_auth_admin);
-- replacing one needs only the TRIGGER privilege the migration role holds.
create or replace trigger whereabot_record_session_end
  after delete on auth.sessions
  for each row execute function private.record_revocation('session', 'id');

-- -----------------------------------------------------------------------------
-- online_devices() → the caller's devices with a live socket
-- -----------------------------------------------------------------------------
-- Presence for the owner's own device list: a device is online while one of its sockets
-- is registered on a relay instance (relay.connections), whatever its last_seen_at says
-- (that is written on connect, on disconnect and at most every 5 minutes). Needs the
-- user's own session: an agent's token learns nothing about the phones (SPEC §4).
create or replace function private.online_devices()
returns setof uuid
language plpgsql
stable
security definer
set search_path = ''
as $$
begin
  if auth.uid() is null or (auth.jwt() ->> 'client_id') is not null then
    raise exception 'presence needs the user''s own session' using errcode = '42501';
  end if;
  return query
    select distinct c.device_id from relay.connections c
    join public.devices d on d.id = c.device_id and d.user_id = c.user_id
    where c.user_id = auth.uid() and d.revoked_at is null
    order by c.device_id;
end;
$$;
comment on function private.online_devices() is
  'The calling user''s devices with a socket registered on a relay instance.';
revoke execute on function private.online_devices() from public, anon;
grant execute on function private.online_devices() to authenticated;

create or replace function public.online_devices()
returns setof uuid
language sql
stable
security invoker
set search_path = ''
as $$ select private.online_devices() $$;
comment on function public.online_devices() is
  'Ids of your devices that are connected now (online). Needs your own session, not an agent''s token.';
revoke execute on function public.online_devices() from public, anon;
grant execute on function public.online_devices() to authenticated;
