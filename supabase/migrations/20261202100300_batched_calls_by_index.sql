-- =============================================================================
-- Batched calls look each id up: no plan that grows with the table times the batch
-- =============================================================================
-- relay.mark_delivered, relay.device_disconnects and relay.drain_connections locked their
-- rows in a subquery (for a fixed lock order) and joined the table to it. With statistics
-- taken while no request waited (after a burst of settled requests) the planner chose a
-- nested loop that re-read the locked subquery for every row: mark_delivered of 10,000 ids
-- took 30 s, and a reconnect storm after a busy minute took 19 s instead of 4 (make
-- bench-relay). Each now locks in the same order with one statement and then changes the
-- rows by their ids (a join with unnest, looked up by the primary key).

create or replace function relay.mark_delivered(p_ids uuid[])
returns int
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_count int;
begin
  if p_ids is null or cardinality(p_ids) > 10000 then
    raise exception 'mark_delivered needs 0 to 10000 request ids' using errcode = '22023';
  end if;
  -- The rows are locked in id order, as relay.settle_many takes them, so that the two
  -- never wait for each other in a cycle; then updated by the same ids. Both statements
  -- look each id up (a join with unnest): a join with the locking subquery could be
  -- planned as a loop over the batch for every row, which stale statistics (after a burst
  -- of settled requests) made take 30 s for 10,000 ids in a reconnect storm.
  perform 1 from relay.pending_requests p join unnest(p_ids) as u (id) on p.id = u.id
  where p.settled_at is null and p.delivered_at is null
  order by p.id
  for update of p;
  update relay.pending_requests r
  set delivered_at = now()
  from unnest(p_ids) as u (id)
  where r.id = u.id and r.settled_at is null and r.delivered_at is null;
  get diagnostics v_count = row_count;
  return v_count;
end;
$$;

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
