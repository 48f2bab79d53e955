-- =============================================================================
-- relay.register_instance locks the rows it abandons in id order
-- =============================================================================
-- A restarting instance abandons its old synchronous waiters while other instances mark
-- the same requests delivered (relay.mark_delivered locks in id order). Locking in no
-- order deadlocked under a reconnect storm (make bench-relay, 10,000 pending requests);
-- both now lock in the same order.

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
