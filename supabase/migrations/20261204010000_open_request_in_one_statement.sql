-- =============================================================================
-- relay.open_request: the common request in one statement after the lock (issue 43)
-- =============================================================================
-- pg_stat_user_functions per same-instance locate under the bench's load (2 instances,
-- 32 agents): relay.open_request 332 µs of self time, and the two functions that built
-- its ping 107 µs more (private.locate_message 78.5, private.locate_ping 28.4) — two
-- PL/pgSQL calls and one more statement (the always-allowed lookup) for a message whose
-- every field the function holds in its arguments. Now the statement that reads the
-- tables under the owner's lock also inserts the row when nothing stops it (the owner's
-- own agent, no quiet hours, under the cap: the common request) and reads the
-- always-allowed mark, and the ping is built in place, as private.locate_ping builds it
-- (pgTAP 60 compares the two). A request on someone else's behalf, an owner with quiet
-- hours, a full cap or an unknown owner take the path they took before, unchanged.

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
  v_always jsonb;
  v_opened boolean;
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
  -- fill the cap of calls that wait), where the owner's sockets are and whether the owner
  -- always allows this agent — and, when none of that stops it, the row is inserted by the
  -- same statement: the common request (the owner's own agent, no quiet hours) is one
  -- statement after the lock, and its ping is built in place below. Whatever stops the
  -- insert is told apart afterwards, as before.
  with facts as (
    select exists (select from auth.users where id = p_owner) as known,
           p_requester is null or p_requester = p_owner or exists (
             select from public.location_shares
             where owner_id = p_owner and viewer_id = p_requester and revoked_at is null) as shared,
           exists (select from relay.pending_requests where id = p_id) as present,
           exists (select from public.quiet_hours where user_id = p_owner) as has_quiet,
           (select count(*) from relay.pending_requests
            where owner_id = p_owner and settled_at is null and expires_at > now() and not durable
              and requester_id is not distinct from nullif(p_requester, p_owner))::int as waiting,
           sockets.instances, sockets.connections
      from (select coalesce(array_agg(distinct instance_id), '{}') as instances, count(*)::int as connections
            from relay.connections where user_id = p_owner) sockets
  ), inserted as (
    insert into relay.pending_requests
      (id, owner_id, requester_id, client_id, client_name, waiter_instance, reply_key, expires_at, ask_reason)
    select p_id, p_owner, null, p_client_id, p_client_name, p_instance, p_reply_key, p_expires_at, v_reason
      from facts
     where facts.known and not facts.present and not facts.has_quiet and facts.waiting < p_max_waiting
       and (p_requester is null or p_requester = p_owner)
    returning 1
  )
  select facts.known, facts.shared, facts.present, facts.has_quiet, facts.waiting, facts.instances, facts.connections,
         exists (select from inserted),
         (select jsonb_build_object('precision', a.precision)
            from public.always_allowed_agents a
           where facts.connections > 0 and exists (select from inserted)
             and a.user_id = p_owner and a.client_id = p_client_id and a.requester_id is null
             and (a.expires_at is null or a.expires_at > now()))
    into v_known, v_shared, v_exists, v_has_quiet, v_waiting, v_holders, v_connections, v_opened, v_always
    from facts;
  if v_opened then
    -- private.locate_ping of the row just inserted, built from what it holds.
    if v_connections > 0 then
      v_ping := jsonb_build_object(
        'type', 'locate', 'owner', p_owner, 'reply_key', encode(p_reply_key, 'base64'),
        'id', p_id, 'client_id', p_client_id,
        'agent_name', nullif(private.clean_display_text(p_client_name, 200), ''),
        'expires_ms', (extract(epoch from p_expires_at) * 1000)::bigint,
        'reason', v_reason, 'requester', null, 'always_allow', v_always);
      if cardinality(array_remove(v_holders, p_instance)) > 0 then
        perform private.notify_instances(array_remove(v_holders, p_instance), v_ping || '{"kind":"locate"}');
      end if;
    end if;
    return jsonb_build_object('status', 'opened', 'connections', v_connections,
      'ping', case when p_instance = any (v_holders) then v_ping end);
  end if;
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
