-- relay.open_requests opens an owner's common requests in one statement (issue 43): the
-- owner's own agents' requests, well-formed and new, with no quiet hours, no socket on
-- another instance and room under the cap for all of them were one relay.open_request call
-- each (a PL/pgSQL call, its checks, the owner's lock and its statements).

-- -----------------------------------------------------------------------------
-- relay.open_requests(instance, requests) → [open_request's result | {status: error, code}]
-- -----------------------------------------------------------------------------
-- The opens an instance has waiting while one call is in flight go as one call: one
-- round trip, one commit, one executor start, instead of one each. Each element is
-- relay.open_request's arguments as an object (id, owner, client_id, client_name,
-- reply_key in base64, expires_at in epoch seconds, max_waiting, reason). An owner's common
-- requests (its own agents', nothing to notify, room for all of them) open together in one
-- statement; the others are opened by relay.open_request.
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
set plan_cache_mode = force_generic_plan
as $$
declare
  v_count int;
  v_results jsonb[];
  v_element record;
  v_alone boolean := false;
  v_opened jsonb;
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
      v_opened := '{}';
      if not v_alone then
        -- Every owner's lock first, in the order of the locks' keys (relay.open_request
        -- takes the same lock again below, at no cost).
        perform pg_advisory_xact_lock(k.key)
        from (select distinct hashtextextended('whereabot_open_request:' || ((r.value ->> 'owner')::uuid)::text, 0) as key
              from jsonb_array_elements(p_requests) r(value)
              where jsonb_typeof(r.value) = 'object'
                and r.value ->> 'owner' ~* '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'
              order by 1) k;
        -- The common requests in one statement, not one relay.open_request each: every
        -- request of an owner opens together when each is well-formed, for the owner's own
        -- agent, new (its id once in the batch and not stored), and the owner is known, has no
        -- quiet hours, no socket on another instance (nobody to notify) and room under the
        -- smallest cap of its requests for all of them — then relay.open_request would open
        -- each, in any order, with the same row and ping. Every other request takes it below.
        with elements as (
          select r.ord, r.value as v,
                 jsonb_typeof(r.value) = 'object'
                 and r.value ->> 'id' ~* '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'
                 and r.value ->> 'owner' ~* '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'
                 and r.value ->> 'requester' is null
                 and char_length(r.value ->> 'client_id') between 1 and 255
                 and coalesce(char_length(r.value ->> 'client_name'), 0) <= 200
                 and r.value ->> 'reply_key' ~ '^[A-Za-z0-9+/]{43}=$'
                 and r.value ->> 'expires_at' ~ '^[0-9]{1,11}(\.[0-9]{1,9})?$'
                 and coalesce(r.value ->> 'max_waiting', '5') ~ '^[0-9]{1,3}$' as formed
          from jsonb_array_elements(p_requests) with ordinality r(value, ord)
        ), requests as (
          select e.ord, (e.v ->> 'id')::uuid as id, (e.v ->> 'owner')::uuid as owner, e.v ->> 'client_id' as client_id,
                 e.v ->> 'client_name' as client_name, decode(e.v ->> 'reply_key', 'base64') as reply_key,
                 to_timestamp((e.v ->> 'expires_at')::double precision) as expires_at,
                 coalesce((e.v ->> 'max_waiting')::int, 5) as max_waiting,
                 case when e.v ->> 'reason' is not null
                      then nullif(private.clean_display_text(e.v ->> 'reason', 4000), '') end as reason
          from elements e
          where e.formed
        ), checked as (
          select q.*, q.expires_at > now() and q.expires_at <= now() + interval '10 minutes'
                 and q.max_waiting between 1 and 100 and coalesce(char_length(q.reason), 0) <= 120
                 and (select count(*) from requests b where b.id = q.id) = 1
                 and not exists (select from relay.pending_requests p where p.id = q.id) as good
          from requests q
        ), owners as (
          select c.owner, count(*)::int as n, min(c.max_waiting) as cap, bool_and(c.good) as good,
                 sockets.instances, sockets.connections
          from checked c
          cross join lateral (select coalesce(array_agg(distinct s.instance_id), '{}') as instances, count(*)::int as connections
                              from relay.connections s where s.user_id = c.owner) sockets
          group by c.owner, sockets.instances, sockets.connections
        ), opening as (
          select c.*, o.connections
          from checked c join owners o on o.owner = c.owner
          where o.good and o.instances <@ array[p_instance]
            -- every element of the owner in the batch is here (none malformed)
            and o.n = (select count(*) from elements e where e.v ->> 'owner' ~* '^[0-9a-f-]{36}$'
                         and lower(e.v ->> 'owner') = c.owner::text)
            and exists (select from auth.users u where u.id = c.owner)
            and not exists (select from public.quiet_hours h where h.user_id = c.owner)
            and (select count(*) from relay.pending_requests p
                 where p.owner_id = c.owner and p.settled_at is null and p.expires_at > now() and not p.durable
                   and p.requester_id is null) + o.n <= o.cap
        ), inserted as (
          insert into relay.pending_requests
            (id, owner_id, requester_id, client_id, client_name, waiter_instance, reply_key, expires_at, ask_reason)
          select id, owner, null, client_id, client_name, p_instance, reply_key, expires_at, reason from opening
          returning id
        )
        select coalesce(jsonb_object_agg(o.ord::text, jsonb_build_object('status', 'opened', 'connections', o.connections,
                 'ping', case when o.connections > 0 then jsonb_build_object(
                   'type', 'locate', 'owner', o.owner, 'reply_key', encode(o.reply_key, 'base64'),
                   'id', o.id, 'client_id', o.client_id,
                   'agent_name', nullif(private.clean_display_text(o.client_name, 200), ''),
                   'expires_ms', (extract(epoch from o.expires_at) * 1000)::bigint,
                   'reason', o.reason, 'requester', null,
                   'always_allow', (select jsonb_build_object('precision', a.precision)
                                    from public.always_allowed_agents a
                                    where a.user_id = o.owner and a.client_id = o.client_id and a.requester_id is null
                                      and (a.expires_at is null or a.expires_at > now()))) end)), '{}')
          into v_opened
        from opening o
        where o.id in (select id from inserted);
      end if;
      for v_element in
        select r.ord, r.value
        from jsonb_array_elements(p_requests) with ordinality r(value, ord)
        order by hashtextextended('whereabot_open_request:' || (r.value ->> 'owner'), 0), r.ord
      loop
        if v_opened ? v_element.ord::text then
          v_results[v_element.ord] := v_opened -> v_element.ord::text;
        elsif v_alone then
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
