-- =============================================================================
-- What an idle phone costs the database: a durable write every 5 minutes, not every beat,
-- and a revocation check that follows the revocations, not the sockets (issue 28)
-- =============================================================================
-- devices.last_seen_at was refreshed every 30 s for every connected device (about 33,000
-- durable row writes a second at a million phones), and every heartbeat of every instance
-- checked each of its sockets against auth.sessions, private.revoked_sessions and
-- public.devices. Now:
-- - relay.heartbeat refreshes last_seen_at every 5 minutes (a connect and a disconnect
--   still write it); whether a device is online comes from relay.connections through
--   public.online_devices() (the owner's own session only);
-- - every revocation leaves a row in private.revocations (triggers on auth.sessions,
--   private.revoked_sessions and public.devices), and relay.revoked_connections reads those
--   since the instance's last check, and the sessions whose not_after passed since then
--   (auth.sessions.not_after has an index in Supabase), each by an index;
-- - relay.reap deletes revocations older than an hour;
-- - public.devices keeps 30 % of each page free (fillfactor 70), so that a last_seen_at
--   refresh is a HOT update: no index entry, about half the WAL (365 → 180 bytes a row
--   measured on 10,000 rows). Pages written before this fill up to it as rows are rewritten
--   (VACUUM FULL public.devices applies it at once, under an exclusive lock).

comment on table public.devices is
  'Installs of the Whereabot app per user. last_seen_at: connect, disconnect, at most every 5 minutes; online: public.online_devices(); revoked_at set = removed.';

alter table public.devices set (fillfactor = 70);

alter table relay.instances
  add column seen_refreshed_at timestamptz not null default now(),
  add column revocations_checked_at timestamptz;
comment on column relay.instances.seen_refreshed_at is
  'When relay.heartbeat last refreshed the last_seen_at of this instance''s devices (every 5 minutes).';
comment on column relay.instances.revocations_checked_at is
  'When relay.revoked_connections last checked this instance''s sockets (null: never, all of them are checked).';

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

-- -----------------------------------------------------------------------------
-- relay.heartbeat(instance) → true when the instance's row had vanished
-- -----------------------------------------------------------------------------
-- A vanished row means Postgres lost the UNLOGGED tables (crash) or the instance was
-- reaped: the caller must resync (re-register its sockets, re-create its waiters' rows).
-- It is the only function besides register_instance that creates an instance's row, so a
-- reaped instance learns it here. Every 5 minutes it also refreshes devices.last_seen_at
-- of this instance's sockets whose row is older than that (a connect and a disconnect write
-- it too): an idle phone costs one durable write per 5 minutes, not one per beat. Whether
-- a device is online comes from relay.connections (public.online_devices), not from it.
create or replace function relay.heartbeat(p_instance text)
returns boolean
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_vanished boolean;
  v_refresh boolean;
begin
  perform private.check_instance_id(p_instance);
  update relay.instances set heartbeat_at = now() where id = p_instance;
  v_vanished := not found;
  if v_vanished then
    insert into relay.instances (id) values (p_instance);
  end if;
  update relay.instances set seen_refreshed_at = now()
  where id = p_instance and seen_refreshed_at < now() - interval '5 minutes';
  v_refresh := found;
  if v_refresh then
    update public.devices d set last_seen_at = now()
    from relay.connections c
    where c.instance_id = p_instance and d.id = c.device_id
      and d.last_seen_at < now() - interval '5 minutes';
  end if;
  return v_vanished;
end;
$$;
comment on function relay.heartbeat(text) is
  'Beats for INSTANCE (and every 5 minutes refreshes its devices'' last_seen_at); true when its row had vanished (resync needed).';

-- -----------------------------------------------------------------------------
-- relay.revoked_connections(instance) → sockets on INSTANCE to close 4000 "revoked"
-- -----------------------------------------------------------------------------
-- Asked at every heartbeat: sockets whose session was signed out or revoked, or whose
-- device was removed. Only what changed since the instance's last check is looked at: the
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
      order by c.device_id, c.id
      for update of c)
    delete from relay.connections c using doomed where c.id = doomed.id
    returning c.id;
end;
$$;
comment on function relay.revoked_connections(text) is
  'Forgets and returns the sockets on INSTANCE whose session ended or whose device was removed since its last check (row locks in (device, id) order).';

-- -----------------------------------------------------------------------------
-- relay.reap(dead_after, keep_settled) → counts of what was cleaned up
-- -----------------------------------------------------------------------------
-- The dead instances' sockets go first, so that no cancel is addressed to them. Resumable
-- requests are deleted once settled and past keep_until. Revocations older than an hour
-- (every heartbeat has read them by then) are deleted too.
create or replace function relay.reap(p_dead_after interval default '30 seconds', p_keep_settled interval default '10 minutes')
returns jsonb
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_dead text[];
  v_request record;
  v_abandoned int := 0;
  v_expired int := 0;
  v_connections int;
  v_deleted int;
begin
  if p_dead_after is null or p_dead_after < interval '1 second' or p_dead_after > interval '1 hour' then
    raise exception 'dead_after must be between 1 second and 1 hour' using errcode = '22023';
  end if;
  if p_keep_settled is null or p_keep_settled < interval '0' or p_keep_settled > interval '1 day' then
    raise exception 'keep_settled must be between 0 and 1 day' using errcode = '22023';
  end if;

  select coalesce(array_agg(id), '{}') into v_dead
  from (select id from relay.instances
        where heartbeat_at < now() - p_dead_after
        for update skip locked) dead;

  -- The dead instances' sockets go first, so that no cancel is addressed to them.
  delete from relay.connections where instance_id = any (v_dead);
  get diagnostics v_connections = row_count;

  -- Waiters of dead instances will never answer their agents: abandon and cancel.
  -- Requests far past their deadline whose waiter never finished them: expire and cancel.
  for v_request in
    select id, owner_id, waiter_instance = any (v_dead) and not durable as abandoned
    from relay.pending_requests
    where settled_at is null
      and ((waiter_instance = any (v_dead) and not durable) or expires_at < now() - interval '30 seconds')
    for update skip locked
  loop
    update relay.pending_requests
    set settled_at = now(),
        outcome = case when v_request.abandoned then 'abandoned' else 'expired' end
    where id = v_request.id;
    perform private.notify_cancel(v_request.id, v_request.owner_id);
    if v_request.abandoned then v_abandoned := v_abandoned + 1; else v_expired := v_expired + 1; end if;
  end loop;

  delete from relay.instances where id = any (v_dead);

  delete from relay.pending_requests
  where settled_at < now() - p_keep_settled or (resumable and settled_at is not null and keep_until < now());
  get diagnostics v_deleted = row_count;

  delete from private.revocations where revoked_at < now() - interval '1 hour';

  return jsonb_build_object(
    'instances', cardinality(v_dead), 'connections', v_connections,
    'abandoned', v_abandoned, 'expired', v_expired, 'deleted', v_deleted);
end;
$$;
comment on function relay.reap(interval, interval) is
  'Removes instances silent for DEAD_AFTER with their sockets, abandons their waiters, expires stuck requests, deletes requests settled longer than KEEP_SETTLED ago.';
