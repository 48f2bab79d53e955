-- =============================================================================
-- Devices: each install of the phone app
-- =============================================================================
-- `id` is the install's stable device_id. The relay upserts the row at hello
-- (relay.device_hellos) and keeps last_seen_at fresh while the socket is up; a device is
-- online when last_seen_at is under 90 s old. Users rename and remove (revoked_at) their
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
);
comment on table public.devices is
  'Installs of the Whereabot app per user. Online = last_seen_at under 90 s old; revoked_at set = removed.';
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
-- whereabot_device {device, event: revoked}: the instance holding the socket closes it
-- -----------------------------------------------------------------------------
create or replace function private.notify_device_revoked()
returns trigger
language plpgsql
security definer
set search_path = ''
as $$
begin
  perform private.notify('whereabot_device',
    jsonb_build_object('device', new.id, 'event', 'revoked', 'instance', null));
  return null;
end;
$$;
comment on function private.notify_device_revoked() is
  'AFTER UPDATE trigger: NOTIFY whereabot_device {device, event: revoked} when a device is removed.';
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
