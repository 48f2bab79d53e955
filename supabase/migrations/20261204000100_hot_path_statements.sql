-- =============================================================================
-- Fewer statements on a locate's path (issue 43)
-- =============================================================================
-- A statement PL/pgSQL runs (a query, a PERFORM) costs an executor start and end; an
-- expression it evaluates in place (IF, :=) costs little. Measured with pg_stat_statements
-- (track = all) over 2,040 sequential locates, relay.open_request ran 12 statements and
-- relay.settle 6; now:
-- * relay.open_request reads the tables in one statement after the owner's lock (the
--   owner, the share, the row's existence, quiet hours, the waiting count, the owner's
--   sockets), checks the instance id in place, cleans a reason only when there is one, and
--   calls notify_instances only when another instance holds the owner's sockets;
-- * relay.settle is one statement when nothing else is to be done: its UPDATE checks the
--   answering device (a device not the user's settles nothing and is told forbidden, as
--   before) and returns the owner's sockets and the always-allowed mark;
-- * relay.open_requests and relay.settle_many make the whole batch in one subtransaction
--   and, only when an element fails, make each element again in a subtransaction of its
--   own (before: one subtransaction per element, every time); the element's call is one
--   function (private.open_element, private.settle_element) for both ways.
-- * relay.open_request, relay.settle and private.locate_message plan their statements once
--   per session (plan_cache_mode = force_generic_plan): PostgreSQL's plan cache kept
--   choosing a custom plan for some of them and so planned them again on every call — time
--   that showed in no statement's own figure, only in the function's (open_request 588 ->
--   375-431 µs a call, settle 369 -> 231-263, pgbench of open + settle, one client).
-- Every result, status, error and lock order is as before.

create or replace function relay.open_request(
  p_id uuid, p_owner uuid, p_requester uuid, p_client_id text, p_client_name text,
  p_instance text, p_reply_key bytea, p_expires_at timestamptz, p_max_waiting int default 5,
  p_reason text default null)
returns jsonb
language plpgsql
security definer
set search_path = ''
set plan_cache_mode = force_generic_plan
as $$
declare
  v_request relay.pending_requests;
  v_known boolean;
  v_shared boolean;
  v_exists boolean;
  v_has_quiet boolean;
  v_waiting int;
  v_holders text[];
  v_connections int;
  v_ping jsonb;
  v_quiet jsonb;
  v_reason text := case when p_reason is not null then nullif(private.clean_display_text(p_reason, 4000), '') end;
begin
  -- The checks of the arguments are expressions, evaluated in place; the function takes
  -- the owner's lock, reads the tables in one statement and writes one row.
  if p_instance is null or p_instance !~ '^[A-Za-z0-9._:-]{1,64}$' then
    raise exception 'an instance id is 1 to 64 letters, digits or ._:-' using errcode = '22023';
  end if;
  if p_id is null or p_owner is null then
    raise exception 'open_request needs a request id and an owner' using errcode = '22004';
  end if;
  if p_client_id is null or char_length(p_client_id) not between 1 and 255 then
    raise exception 'client_id must be 1 to 255 characters' using errcode = '22023';
  end if;
  if char_length(p_client_name) > 200 then
    raise exception 'client_name must be at most 200 characters' using errcode = '22023';
  end if;
  if p_reply_key is null or octet_length(p_reply_key) <> 32 then
    raise exception 'reply_key must be a 32-byte X25519 public key' using errcode = '22023';
  end if;
  if p_expires_at is null or p_expires_at <= now() or p_expires_at > now() + interval '10 minutes' then
    raise exception 'expires_at must be in the next 10 minutes' using errcode = '22023';
  end if;
  if char_length(v_reason) > 120 then
    raise exception 'reason must be at most 120 characters' using errcode = '22023';
  end if;
  if p_max_waiting is null or p_max_waiting not between 1 and 100 then
    raise exception 'max_waiting must be between 1 and 100' using errcode = '22023';
  end if;
  -- One opener per owner at a time, so that the cap holds under concurrency; device_hello
  -- takes the same lock, so no hello of the owner's phones falls between this request's
  -- look at the owner's sockets and its commit.
  perform pg_advisory_xact_lock(hashtextextended('whereabot_open_request:' || p_owner::text, 0));

  -- Under the lock, in one statement: whether the owner exists and shares with the
  -- requester, whether the row exists already, whether the owner has quiet hours, the
  -- requests that wait (the owner's own agents and the people sharing with them count
  -- separately, so a viewer can never keep the owner's own agents out; durable requests are
  -- counted by open_durable_request against their own cap, so that an agent's tasks never
  -- fill the cap of calls that wait) and where the owner's sockets are.
  select exists (select from auth.users where id = p_owner),
         p_requester is null or p_requester = p_owner or exists (
           select from public.location_shares
           where owner_id = p_owner and viewer_id = p_requester and revoked_at is null),
         exists (select from relay.pending_requests where id = p_id),
         exists (select from public.quiet_hours where user_id = p_owner),
         (select count(*) from relay.pending_requests
          where owner_id = p_owner and settled_at is null and expires_at > now() and not durable
            and requester_id is not distinct from nullif(p_requester, p_owner)),
         sockets.instances, sockets.connections
    into v_known, v_shared, v_exists, v_has_quiet, v_waiting, v_holders, v_connections
    from (select coalesce(array_agg(distinct instance_id), '{}') as instances, count(*) as connections
          from relay.connections where user_id = p_owner) sockets;
  if not v_known then
    raise exception 'no such owner' using errcode = 'P0002';
  end if;
  if not v_shared then
    raise exception 'the owner does not share their location with the requester' using errcode = '42501';
  end if;
  if v_exists then
    return jsonb_build_object('status', 'exists', 'connections', null, 'ping', null);
  end if;
  -- Quiet hours (SPEC §14): nothing is stored, pinged or pushed for an agent that may not
  -- wake the owner; the agent learns until when (and the owner's name to say so).
  if v_has_quiet then
    v_quiet := private.quiet_until(p_owner, p_client_id, p_requester, now());
  end if;
  if v_quiet is not null then
    return jsonb_build_object('status', 'quiet', 'connections', null, 'ping', null,
      'quiet', v_quiet || jsonb_build_object('name', private.user_card(p_owner) ->> 'name',
        'until_ms', (extract(epoch from (v_quiet ->> 'until')::timestamptz) * 1000)::bigint));
  end if;
  -- Each requester also has a cap of their own across every owner who shares with them.
  if v_waiting < p_max_waiting and p_requester is not null and p_requester <> p_owner then
    perform pg_advisory_xact_lock(hashtextextended('whereabot_open_request_by:' || p_requester::text, 0));
    select count(*) into v_waiting from relay.pending_requests
    where requester_id = p_requester and settled_at is null and expires_at > now() and not durable;
  end if;
  if v_waiting >= p_max_waiting then
    return jsonb_build_object('status', 'too_many', 'connections', v_connections, 'ping', null);
  end if;

  insert into relay.pending_requests
    (id, owner_id, requester_id, client_id, client_name, waiter_instance, reply_key, expires_at, ask_reason)
  values (p_id, p_owner, nullif(p_requester, p_owner), p_client_id, p_client_name,
          p_instance, p_reply_key, p_expires_at, v_reason)
  returning * into v_request;

  if v_connections > 0 then
    v_ping := private.locate_ping(v_request);
    -- The other instances holding the owner's sockets (none, most often: no call then).
    if cardinality(array_remove(v_holders, p_instance)) > 0 then
      perform private.notify_instances(array_remove(v_holders, p_instance), v_ping || '{"kind":"locate"}');
    end if;
  end if;
  return jsonb_build_object('status', 'opened', 'connections', v_connections,
    'ping', case when p_instance = any (v_holders) then v_ping end);
end;
$$;
create or replace function relay.settle(
  p_id uuid, p_user uuid, p_device uuid, p_outcome text, p_reason text, p_sealed text,
  p_instance text default null, p_remind_after_s int default null)
returns text
language plpgsql
security definer
set search_path = ''
set plan_cache_mode = force_generic_plan
as $$
declare
  v_request relay.pending_requests;
  v_waiter text;
  v_owner uuid;
  v_holders text[];
  v_resumable boolean;
  v_watcher text;
  v_client_id text;
  v_requester uuid;
  v_always boolean;
begin
  if p_id is null or p_user is null then
    raise exception 'settle needs a request id and a user id' using errcode = '22004';
  end if;
  if p_remind_after_s is not null and p_remind_after_s not between 1 and 31536000 then
    raise exception 'remind_after_s must be from 1 to 31536000 seconds' using errcode = '22023';
  end if;
  if p_instance is not null and p_instance !~ '^[A-Za-z0-9._:-]{1,64}$' then
    raise exception 'an instance id is 1 to 64 letters, digits or ._:-' using errcode = '22023';
  end if;
  if p_outcome is null or p_outcome not in ('location', 'denied', 'unavailable') then
    raise exception 'outcome must be location, denied or unavailable' using errcode = '22023';
  end if;
  if (p_outcome = 'location' and p_reason is not null)
     or (p_outcome = 'denied' and p_reason is distinct from 'user' and p_reason is distinct from 'no_answer')
     or (p_outcome = 'unavailable' and (p_reason is null or p_reason not in ('permission', 'no_fix', 'error'))) then
    raise exception 'reason does not fit the outcome' using errcode = '22023';
  end if;
  if p_outcome <> 'location' and p_sealed is not null then
    raise exception 'a sealed answer comes with outcome location and only with it' using errcode = '22023';
  end if;
  if p_sealed is not null and (p_sealed !~ '^[A-Za-z0-9+/_-]+={0,2}$' or char_length(p_sealed) > 6000) then
    raise exception 'sealed must be base64 of at most 6000 characters' using errcode = '22023';
  end if;

  -- The first answer wins: one statement finds the waiting row of this user and settles
  -- it, if the answering device is the user's and not revoked (a fix crosses Postgres only
  -- sealed; it need not cross at all when the answering phone's instance is the waiter's,
  -- which hands it over in process).
  update relay.pending_requests
  set settled_at = now(), outcome = p_outcome, reason = p_reason, answered_by = p_device,
      delivered_at = coalesce(delivered_at, now()),
      keep_until = case when resumable then least(keep_until, now() + interval '10 minutes') end
  where id = p_id and owner_id = p_user and settled_at is null
    and (p_sealed is not null or p_outcome <> 'location' or (waiter_instance = p_instance and not resumable))
    and (p_device is null or exists (
           select from public.devices where id = p_device and user_id = p_user and revoked_at is null))
  -- The same statement reads where the owner's sockets are, and whether a location went
  -- to an agent the owner always allows (most do not: then no call below).
  returning waiter_instance, owner_id, resumable, watcher_instance, client_id, requester_id,
    (select coalesce(array_agg(distinct c.instance_id), '{}') from relay.connections c where c.user_id = p_user),
    p_outcome = 'location' and exists (
      select from public.always_allowed_agents a where a.user_id = p_user and a.client_id = pending_requests.client_id)
    into v_waiter, v_owner, v_resumable, v_watcher, v_client_id, v_requester, v_holders, v_always;
  if not found then
    if p_device is not null and not exists (
         select from public.devices where id = p_device and user_id = p_user and revoked_at is null) then
      return 'forbidden';
    end if;
    select * into v_request from relay.pending_requests where id = p_id;
    if not found then
      return 'gone';
    end if;
    if v_request.owner_id <> p_user then
      return 'forbidden';
    end if;
    if v_request.settled_at is not null then
      return 'gone';
    end if;
    raise exception 'a location for another instance''s waiter comes sealed' using errcode = '22023';
  end if;

  if v_resumable and p_sealed is not null then
    -- The agent may come back for it from any instance: the answer is kept (sealed) until
    -- the request's TTL, cut above to at most 10 minutes from now.
    insert into relay.sealed_results (request_id, sealed) values (p_id, p_sealed);
  end if;
  if v_always then
    perform private.note_always_allowed_use(v_owner, v_client_id, v_requester, p_remind_after_s, p_instance);
  end if;

  if v_waiter is distinct from p_instance then
    perform private.notify(private.instance_channel(v_waiter), jsonb_build_object(
      'kind', 'answer', 'id', p_id, 'waiter', v_waiter, 'owner', v_owner,
      'outcome', p_outcome, 'reason', p_reason, 'sealed', p_sealed, 'cancel', v_waiter = any (v_holders)));
  end if;
  if v_watcher is not null and v_watcher <> v_waiter and v_watcher is distinct from p_instance then
    perform private.notify(private.instance_channel(v_watcher), jsonb_build_object(
      'kind', 'answer', 'id', p_id, 'waiter', v_watcher, 'owner', v_owner,
      'outcome', p_outcome, 'reason', p_reason, 'sealed', p_sealed, 'cancel', false));
  end if;
  v_holders := array_remove(array_remove(v_holders, v_waiter), p_instance);
  if cardinality(v_holders) > 0 then
    perform private.notify_instances(v_holders, jsonb_build_object('kind', 'cancel', 'id', p_id, 'owner', v_owner));
  end if;
  return 'settled';
end;
$$;
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
create or replace function relay.settle_many(p_instance text, p_answers jsonb, p_remind_after_s int default null)
returns jsonb
language plpgsql
security definer
set search_path = ''
set lock_timeout = '50ms'
as $$
declare
  v_results jsonb[];
  v_element record;
  v_alone boolean := false;
begin
  perform private.check_instance_id(p_instance);
  if p_answers is null or jsonb_typeof(p_answers) <> 'array' or jsonb_array_length(p_answers) not between 1 and 32 then
    raise exception 'settle_many needs an array of 1 to 32 answers' using errcode = '22023';
  end if;
  -- As in open_requests: one subtransaction for the batch, one per element only after a failure.
  loop
    begin
      v_results := array_fill(null::jsonb, array[jsonb_array_length(p_answers)]);
      for v_element in
        select a.ord, a.value
        from jsonb_array_elements(p_answers) with ordinality a(value, ord)
        order by case when a.value ->> 'id' ~* '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'
                      then (a.value ->> 'id')::uuid end, a.ord
      loop
        if v_alone then
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

alter function private.locate_message(relay.pending_requests) set plan_cache_mode = force_generic_plan;
