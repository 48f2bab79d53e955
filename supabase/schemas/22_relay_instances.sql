-- =============================================================================
-- Relay instances: register, heartbeat, reap
-- =============================================================================
-- Every instance registers at start and beats every few seconds. Any instance may reap:
-- instances that stopped beating lose their sockets, their waiting requests (but durable
-- ones, which belong to no instance) are settled as abandoned and their pings cancelled,
-- and old settled requests are deleted. An instance that starts again under the same id
-- starts clean: registering forgets what the earlier process left, as the reaper would.

-- Shared argument check: a relay instance id.
create or replace function private.check_instance_id(p_instance text)
returns void
language plpgsql
immutable
set search_path = ''
as $$
begin
  if p_instance is null or p_instance !~ '^[A-Za-z0-9._:-]{1,64}$' then
    raise exception 'an instance id is 1 to 64 letters, digits or ._:-' using errcode = '22023';
  end if;
end;
$$;
comment on function private.check_instance_id(text) is 'Raises 22023 unless the instance id is well formed.';
revoke execute on function private.check_instance_id(text) from public, anon, authenticated;

-- -----------------------------------------------------------------------------
-- relay.register_instance(instance) → counts of what the previous process left
-- -----------------------------------------------------------------------------
-- A process that registers holds no socket and waits for no request yet. When it reuses
-- the id of an earlier process (INSTANCE_ID set by the deployment) whose heartbeat never
-- stopped long enough to be reaped, that process's socket rows would make its devices look
-- online forever and its waiting requests would never be answered: they are forgotten and
-- abandoned here. Durable requests stay open.
create or replace function relay.register_instance(p_instance text)
returns jsonb
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_request record;
  v_abandoned int := 0;
  v_connections int;
begin
  perform private.check_instance_id(p_instance);
  insert into relay.instances (id) values (p_instance)
  on conflict (id) do update set started_at = now(), heartbeat_at = now();

  delete from relay.connections where instance_id = p_instance;
  get diagnostics v_connections = row_count;

  for v_request in
    select id, owner_id from relay.pending_requests
    where waiter_instance = p_instance and settled_at is null and not durable
    order by id
    for update
  loop
    update relay.pending_requests set settled_at = now(), outcome = 'abandoned' where id = v_request.id;
    perform private.notify_cancel(v_request.id, v_request.owner_id);
    v_abandoned := v_abandoned + 1;
  end loop;

  return jsonb_build_object('connections', v_connections, 'abandoned', v_abandoned);
end;
$$;
comment on function relay.register_instance(text) is
  'Registers (or restarts) relay instance INSTANCE with a fresh heartbeat; forgets what an earlier process under the same id left (sockets, waiting requests).';

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

revoke execute on function relay.register_instance(text), relay.heartbeat(text), relay.reap(interval, interval)
  from public, anon, authenticated, service_role;
grant execute on function relay.register_instance(text), relay.heartbeat(text), relay.reap(interval, interval)
  to whereabot_relay;
