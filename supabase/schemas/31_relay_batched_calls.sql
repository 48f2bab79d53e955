-- =============================================================================
-- Batched calls: relay.open_requests and relay.settle_many
-- =============================================================================
-- relay.open_request and relay.settle for several elements in one call, a result per
-- element (SPEC §8); see 24_relay_requests.sql for the single functions they call.

-- -----------------------------------------------------------------------------
-- One element of a batch: relay.open_request's or relay.settle's arguments as an object
-- -----------------------------------------------------------------------------
create or replace function private.open_element(p_instance text, p_count int, p_element jsonb)
returns jsonb
language plpgsql
set search_path = ''
as $$
begin
  if jsonb_typeof(p_element) <> 'object' then
    raise exception 'a request is an object' using errcode = '22023';
  end if;
  if p_count > 1 and p_element ->> 'requester' is not null and p_element ->> 'requester' <> p_element ->> 'owner' then
    raise exception 'a request on someone else''s behalf is opened alone' using errcode = '0A000';
  end if;
  return relay.open_request(
    (p_element ->> 'id')::uuid, (p_element ->> 'owner')::uuid, (p_element ->> 'requester')::uuid,
    p_element ->> 'client_id', p_element ->> 'client_name', p_instance,
    decode(p_element ->> 'reply_key', 'base64'), to_timestamp((p_element ->> 'expires_at')::double precision),
    coalesce((p_element ->> 'max_waiting')::int, 5), p_element ->> 'reason');
end;
$$;
comment on function private.open_element(text, int, jsonb) is
  'relay.open_request for one element of relay.open_requests (an object; on someone else''s behalf only alone).';
revoke execute on function private.open_element(text, int, jsonb) from public, anon, authenticated;

create or replace function private.settle_element(p_instance text, p_element jsonb, p_remind_after_s int)
returns jsonb
language plpgsql
set search_path = ''
as $$
begin
  if jsonb_typeof(p_element) <> 'object' then
    raise exception 'an answer is an object' using errcode = '22023';
  end if;
  return jsonb_build_object('status', relay.settle(
    (p_element ->> 'id')::uuid, (p_element ->> 'user')::uuid, (p_element ->> 'device')::uuid,
    p_element ->> 'outcome', p_element ->> 'reason', p_element ->> 'sealed', p_instance, p_remind_after_s));
end;
$$;
comment on function private.settle_element(text, jsonb, int) is
  'relay.settle for one element of relay.settle_many (an object), as {"status": …}.';
revoke execute on function private.settle_element(text, jsonb, int) from public, anon, authenticated;

-- -----------------------------------------------------------------------------
-- relay.open_requests(instance, requests) → [open_request's result | {status: error, code}]
-- -----------------------------------------------------------------------------
-- The opens an instance has waiting while one call is in flight go as one call: one
-- round trip, one commit, one executor start, instead of one each. Each element is
-- relay.open_request's arguments as an object (id, owner, client_id, client_name,
-- reply_key in base64, expires_at in epoch seconds, max_waiting, reason), opened by relay.open_request.
-- The batch runs in one subtransaction; if an element fails, it is undone and each element
-- is opened again in a block of its own, so that one bad element is refused alone: its result is
-- {"status": "error", "code": SQLSTATE}, the SQLSTATE relay.open_request raised, and the
-- others open. The results come in the elements' order.
--
-- Lock order: relay.open_request takes the owner's advisory lock, and relay.device_hellos
-- takes its owners' in ascending order of the lock's key; the elements run in that order
-- too, so no batch waits on a hello batch that waits on it. A request on someone else's
-- behalf takes a second lock (its requester's) after its owner's, which no order of
-- owners can keep: it is refused in a batch (0A000) and opened alone by open_request.
--
-- No element waits long for a lock: past lock_timeout (50 ms) it is refused alone with
-- 55P03, and the relay opens it with relay.open_request, so that one owner's lock held
-- elsewhere (a hello batch) holds up no other owner's request in the batch.
create or replace function relay.open_requests(p_instance text, p_requests jsonb)
returns jsonb
language plpgsql
security definer
set search_path = ''
set lock_timeout = '50ms'
as $$
declare
  v_count int;
  v_results jsonb[];
  v_element record;
  v_alone boolean := false;
begin
  perform private.check_instance_id(p_instance);
  if p_requests is null or jsonb_typeof(p_requests) <> 'array' or jsonb_array_length(p_requests) not between 1 and 32 then
    raise exception 'open_requests needs an array of 1 to 32 requests' using errcode = '22023';
  end if;
  v_count := jsonb_array_length(p_requests);
  -- Every element in one subtransaction; only if one fails is it undone, and each element
  -- made again in a subtransaction of its own, so that a bad element is refused alone.
  loop
    begin
      v_results := array_fill(null::jsonb, array[v_count]);
      for v_element in
        select r.ord, r.value
        from jsonb_array_elements(p_requests) with ordinality r(value, ord)
        order by hashtextextended('whereabot_open_request:' || (r.value ->> 'owner'), 0), r.ord
      loop
        if v_alone then
          begin
            v_results[v_element.ord] := private.open_element(p_instance, v_count, v_element.value);
          exception when others then
            v_results[v_element.ord] := jsonb_build_object('status', 'error', 'code', sqlstate);
          end;
        else
          v_results[v_element.ord] := private.open_element(p_instance, v_count, v_element.value);
        end if;
      end loop;
      return to_jsonb(v_results);
    exception when others then
      if v_alone then
        raise;
      end if;
      v_alone := true;
    end;
  end loop;
end;
$$;
comment on function relay.open_requests(text, jsonb) is
  'relay.open_request for 1 to 32 requests in one call: a result per element, in order; a bad element is {"status": "error", "code": SQLSTATE} alone.';

-- -----------------------------------------------------------------------------
-- relay.settle_many(instance, answers) → [{status} | {status: error, code}]
-- -----------------------------------------------------------------------------
-- The answers an instance's phones gave while one settle was in flight go as one call.
-- Each element is relay.settle's arguments as an object (id, user, device, outcome, reason,
-- sealed). The common ones (an answer to this instance's own call, nothing to notify) are
-- settled together in one statement, the others by relay.settle (in a block of its own
-- after a failure, as in open_requests): {"status": settled | gone |
-- forbidden}, or {"status": "error", "code": SQLSTATE} for an element relay.settle refused;
-- the others settle. The results come in the elements' order. The elements run in the
-- order of their request ids, so two batches that settle the same requests lock their rows
-- in one order, and relay.mark_delivered takes its rows in that order too. The rarer
-- statements that lock several rows (reap, a revoked share) keep
-- no such order, so no element waits for a row lock past lock_timeout (50 ms): it is refused alone with 55P03 and the relay settles
-- it with relay.settle, which locks one row and so closes no cycle. A cycle with another
-- statement lasts at most those 50 ms (Postgres's deadlock check comes after a second) and
-- costs only that element a second call; no batch holds up another's answers for long.
create or replace function relay.settle_many(p_instance text, p_answers jsonb, p_remind_after_s int default null)
returns jsonb
language plpgsql
security definer
set search_path = ''
set lock_timeout = '50ms'
set plan_cache_mode = force_generic_plan
as $$
declare
  c_uuid constant text := '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$';
  v_results jsonb[];
  v_element record;
  v_alone boolean := false;
  v_settled bigint[];
begin
  perform private.check_instance_id(p_instance);
  if p_answers is null or jsonb_typeof(p_answers) <> 'array' or jsonb_array_length(p_answers) not between 1 and 32 then
    raise exception 'settle_many needs an array of 1 to 32 answers' using errcode = '22023';
  end if;
  -- As in open_requests: one subtransaction for the batch, one per element only after a failure.
  loop
    begin
      v_results := array_fill(null::jsonb, array[jsonb_array_length(p_answers)]);
      v_settled := '{}';
      if not v_alone then
        -- The common answers in one statement, not one relay.settle each: a well-formed,
        -- unsealed answer (its id named once in the batch) to a request that waits on this
        -- instance for a call, from a device of the owner that is not removed, when no other
        -- instance holds the owner's sockets and a location goes to no always-allowed agent
        -- — nothing to notify, keep or note. relay.settle would update the same row the same
        -- way and return settled; every other answer takes it below. Two batches of two
        -- instances that settle the same requests may lock them in two orders: the second
        -- waits past lock_timeout and the whole batch goes again element by element.
        with answers as (
          select a.ord, (a.value ->> 'id')::uuid as id, (a.value ->> 'user')::uuid as user_id,
            (a.value ->> 'device')::uuid as device, a.value ->> 'outcome' as outcome, a.value ->> 'reason' as reason
          from jsonb_array_elements(p_answers) with ordinality a(value, ord)
          where jsonb_typeof(a.value) = 'object'
            and a.value ->> 'id' ~* c_uuid
            and a.value ->> 'user' ~* c_uuid
            and (a.value ->> 'device' is null
                 or a.value ->> 'device' ~* c_uuid)
            and a.value ->> 'sealed' is null
            and ((a.value ->> 'outcome' = 'location' and a.value ->> 'reason' is null)
                 or (a.value ->> 'outcome' = 'denied' and a.value ->> 'reason' in ('user', 'no_answer'))
                 or (a.value ->> 'outcome' = 'unavailable' and a.value ->> 'reason' in ('permission', 'no_fix', 'error')))
        ), once as (
          select * from answers a where (select count(*) from answers b where b.id = a.id) = 1
        ), settled as (
          update relay.pending_requests p
          set settled_at = now(), outcome = o.outcome, reason = o.reason, answered_by = o.device,
              delivered_at = coalesce(p.delivered_at, now())
          from once o
          where p.id = o.id and p.owner_id = o.user_id and p.settled_at is null
            and p.waiter_instance = p_instance and not p.resumable and p.watcher_instance is null
            and (o.device is null or exists (
                   select from public.devices d where d.id = o.device and d.user_id = o.user_id and d.revoked_at is null))
            and not exists (select from relay.connections c where c.user_id = o.user_id and c.instance_id <> p_instance)
            and not (o.outcome = 'location' and exists (
                   select from public.always_allowed_agents aa where aa.user_id = o.user_id and aa.client_id = p.client_id))
          returning o.ord
        )
        select coalesce(array_agg(ord), '{}') into v_settled from settled;
      end if;
      for v_element in
        select a.ord, a.value
        from jsonb_array_elements(p_answers) with ordinality a(value, ord)
        order by case when a.value ->> 'id' ~* c_uuid
                      then (a.value ->> 'id')::uuid end, a.ord
      loop
        if v_element.ord = any (v_settled) then
          v_results[v_element.ord] := '{"status": "settled"}'::jsonb;
        elsif v_alone then
          begin
            v_results[v_element.ord] := private.settle_element(p_instance, v_element.value, p_remind_after_s);
          exception when others then
            v_results[v_element.ord] := jsonb_build_object('status', 'error', 'code', sqlstate);
          end;
        else
          v_results[v_element.ord] := private.settle_element(p_instance, v_element.value, p_remind_after_s);
        end if;
      end loop;
      return to_jsonb(v_results);
    exception when others then
      if v_alone then
        raise;
      end if;
      v_alone := true;
    end;
  end loop;
end;
$$;
comment on function relay.settle_many(text, jsonb, int) is
  'relay.settle for 1 to 32 answers in one call (REMIND_AFTER_S as relay.settle''s): a result per element, in order; a refused element is {"status": "error", "code": SQLSTATE} alone.';

revoke execute on function relay.open_requests(text, jsonb), relay.settle_many(text, jsonb, int)
  from public, anon, authenticated, service_role;
grant execute on function relay.open_requests(text, jsonb), relay.settle_many(text, jsonb, int) to whereabot_relay;
