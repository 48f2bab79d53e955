-- =============================================================================
-- An instance that starts again under the same id starts clean
-- =============================================================================
-- A process that registers holds no socket and waits for no request yet. When it reuses
-- the id of an earlier process (INSTANCE_ID set by the deployment) whose heartbeat never
-- stopped long enough to be reaped, that process's socket rows would make its devices
-- look online forever and its waiting requests would never be answered. Registering
-- therefore forgets the id's sockets and abandons its waiting requests (cancelling their
-- pings), exactly as the reaper does for a dead instance.

-- -----------------------------------------------------------------------------
-- relay.register_instance(instance) → counts of what the previous process left
-- -----------------------------------------------------------------------------
drop function if exists relay.register_instance(text);
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
    where waiter_instance = p_instance and settled_at is null
    for update
  loop
    update relay.pending_requests set settled_at = now(), outcome = 'abandoned' where id = v_request.id;
    perform private.notify('whereabot_cancel', jsonb_build_object('id', v_request.id, 'owner', v_request.owner_id));
    v_abandoned := v_abandoned + 1;
  end loop;

  return jsonb_build_object('connections', v_connections, 'abandoned', v_abandoned);
end;
$$;
comment on function relay.register_instance(text) is
  'Registers (or restarts) relay instance INSTANCE with a fresh heartbeat; forgets what an earlier process under the same id left (sockets, waiting requests).';

revoke execute on function relay.register_instance(text) from public, anon, authenticated, service_role;
grant execute on function relay.register_instance(text) to whereabot_relay;
