-- =============================================================================
-- Devices: each install of the phone app
-- =============================================================================
-- `id` is the install's stable device_id. The relay upserts the row at hello
-- (relay.device_hello) and keeps last_seen_at fresh while the socket is up; a device is
-- online when last_seen_at is under 90 s old. Users rename and remove (revoked_at) their
-- devices with plain updates; removal is final and closes the device's socket at once.

create table if not exists public.devices (
  id uuid primary key,
  user_id uuid not null references auth.users (id) on delete cascade,
  name text not null default '' check (char_length(name) <= 100),
  platform text not null check (platform in ('ios', 'android', 'desktop', 'web')),
  app_version text not null default '' check (char_length(app_version) <= 50),
  created_at timestamptz not null default now(),
  last_seen_at timestamptz not null default now(),
  revoked_at timestamptz
);
comment on table public.devices is
  'Installs of the Whereabot app per user. Online = last_seen_at under 90 s old; revoked_at set = removed.';

create index if not exists devices_user_id_idx on public.devices (user_id);

alter table public.devices enable row level security;

revoke all on public.devices from anon, authenticated;
grant select, insert on public.devices to authenticated;
grant update (name, revoked_at) on public.devices to authenticated;

drop policy if exists "Users can read their own devices" on public.devices;
create policy "Users can read their own devices"
  on public.devices for select to authenticated
  using (user_id = (select auth.uid()));

drop policy if exists "Users can register their own devices from their own session" on public.devices;
create policy "Users can register their own devices from their own session"
  on public.devices for insert to authenticated
  with check (user_id = (select auth.uid())
              and (select auth.jwt() ->> 'client_id') is null
              and revoked_at is null);

drop policy if exists "Users can rename and remove their own devices from their own session" on public.devices;
create policy "Users can rename and remove their own devices from their own session"
  on public.devices for update to authenticated
  using (user_id = (select auth.uid()) and (select auth.jwt() ->> 'client_id') is null)
  with check (user_id = (select auth.uid()) and (select auth.jwt() ->> 'client_id') is null);

drop trigger if exists devices_revocation_is_final on public.devices;
create trigger devices_revocation_is_final
  before update on public.devices
  for each row execute function private.forbid_unrevoke();

drop trigger if exists devices_per_user_limit on public.devices;
create trigger devices_per_user_limit
  before insert on public.devices
  for each row execute function private.enforce_per_user_limit('user_id', '50');

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

drop trigger if exists devices_notify_revoked on public.devices;
create trigger devices_notify_revoked
  after update of revoked_at on public.devices
  for each row when (old.revoked_at is null and new.revoked_at is not null)
  execute function private.notify_device_revoked();
