-- =============================================================================
-- Tasks and async requests keep a cap of their own (issue 38, also seen)
-- =============================================================================
-- relay.open_request counted every waiting request of the owner's own agents against the
-- cap of 5 a call that waits is given: five durable requests of one of the user's own
-- agents (tasks, async requests, each open up to 600 s) refused every get_phone_location
-- call and POST /v1/locate for that long. open_request now counts only requests that are
-- not durable; open_durable_request counts the durable ones against their own cap (100
-- for the owner's own agents, 5 for a viewer across every owner who shares with them).

create or replace function relay.open_request(
  p_id uuid, p_owner uuid, p_requester uuid, p_client_id text, p_client_name text,
  p_instance text, p_reply_key bytea, p_expires_at timestamptz, p_max_waiting int default 5,
  p_reason text default null)
returns jsonb
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_request relay.pending_requests;
  v_waiting int;
  v_holders text[];
  v_connections int;
  v_ping jsonb;
  v_reason text := nullif(private.clean_display_text(p_reason, 4000), '');
begin
  perform private.check_instance_id(p_instance);
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
  if not exists (select from auth.users where id = p_owner) then
    raise exception 'no such owner' using errcode = 'P0002';
  end if;
  if p_requester is not null and p_requester <> p_owner and not exists (
       select from public.location_shares
       where owner_id = p_owner and viewer_id = p_requester and revoked_at is null) then
    raise exception 'the owner does not share their location with the requester' using errcode = '42501';
  end if;

  -- One opener per owner at a time, so that the cap holds under concurrency; device_hello
  -- takes the same lock, so no hello of the owner's phones falls between this request's
  -- look at the owner's sockets and its commit.
  perform pg_advisory_xact_lock(hashtextextended('whereabot_open_request:' || p_owner::text, 0));

  if exists (select from relay.pending_requests where id = p_id) then
    return jsonb_build_object('status', 'exists', 'connections', null, 'ping', null);
  end if;
  -- The owner's own agents and the people sharing with them count separately, so a viewer
  -- can never keep the owner's own agents out; each requester also has a cap of their own
  -- across every owner who shares with them.
  -- Durable requests (tasks, async requests) are counted by open_durable_request against
  -- their own cap, so that an agent's tasks never fill the cap of calls that wait.
  select count(*) into v_waiting from relay.pending_requests
  where owner_id = p_owner and settled_at is null and expires_at > now() and not durable
    and requester_id is not distinct from nullif(p_requester, p_owner);
  if v_waiting < p_max_waiting and p_requester is not null and p_requester <> p_owner then
    perform pg_advisory_xact_lock(hashtextextended('whereabot_open_request_by:' || p_requester::text, 0));
    select count(*) into v_waiting from relay.pending_requests
    where requester_id = p_requester and settled_at is null and expires_at > now() and not durable;
  end if;
  select coalesce(array_agg(distinct instance_id), '{}'), count(*) into v_holders, v_connections
  from relay.connections where user_id = p_owner;
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
    perform private.notify_instances(array_remove(v_holders, p_instance), v_ping || '{"kind":"locate"}');
  end if;
  return jsonb_build_object('status', 'opened', 'connections', v_connections,
    'ping', case when p_instance = any (v_holders) then v_ping end);
end;
$$;

create or replace function relay.open_durable_request(
  p_id uuid, p_owner uuid, p_requester uuid, p_client_id text, p_client_name text, p_key uuid,
  p_instance text, p_reply_key bytea, p_expires_at timestamptz, p_keep_until timestamptz,
  p_durable boolean, p_wrapped_secret bytea, p_max_waiting int default 5, p_reason text default null)
returns jsonb
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_user uuid := coalesce(p_requester, p_owner);
  v_open int;
  v_kept int;
  v_total int;
  v_waiting int;
  v_opened jsonb;
begin
  perform private.check_instance_id(p_instance);
  if p_durable is null then
    raise exception 'open_durable_request needs p_durable' using errcode = '22004';
  end if;
  if p_keep_until is null or p_expires_at is null or p_keep_until < p_expires_at
     or p_keep_until > p_expires_at + interval '10 minutes' then
    raise exception 'keep_until must lie between expires_at and 10 minutes after it' using errcode = '22023';
  end if;
  if p_wrapped_secret is not null and octet_length(p_wrapped_secret) not between 40 and 80 then
    raise exception 'wrapped_secret must be 40 to 80 bytes' using errcode = '22023';
  end if;
  if p_key is not null and p_client_id <> 'agent-key' then
    raise exception 'an agent key''s requests have client_id agent-key' using errcode = '22023';
  end if;

  -- One opener per account at a time, so that its caps hold under concurrency (taken
  -- before open_request's owner lock, always in this order).
  perform pg_advisory_xact_lock(hashtextextended('whereabot_durable:' || v_user::text, 0));
  -- The account's rows, open or settled, until they are forgotten (the partial index by
  -- account; the count stops at the cap).
  select count(*), count(*) filter (where r.client_id = p_client_id and r.agent_key_id is not distinct from p_key
                                          and r.settled_at is null and r.expires_at > now())
  into v_kept, v_open
  from (select r.client_id, r.agent_key_id, r.settled_at, r.expires_at from relay.pending_requests r
        where r.resumable and coalesce(r.requester_id, r.owner_id) = v_user and r.keep_until > now()
        limit private.max_resumable_requests_per_account()) r;
  if v_open >= private.max_durable_requests_per_agent() or v_kept >= private.max_resumable_requests_per_account() then
    return jsonb_build_object('status', 'too_many', 'connections', null, 'ping', null);
  end if;
  -- The table's bound: past it only an account holding its fair share or more is refused;
  -- past the hard ceiling everyone is. Each count stops at its bound.
  select count(*) into v_total
  from (select from relay.pending_requests where resumable limit private.max_resumable_requests()) kept;
  if v_total >= private.max_resumable_requests()
     and (v_kept >= private.resumable_fair_share()
          or (select count(*) from (select from relay.pending_requests where resumable
                                    limit private.max_resumable_requests_hard()) kept) >= private.max_resumable_requests_hard()) then
    return jsonb_build_object('status', 'full', 'connections', null, 'ping', null);
  end if;

  -- The owner's (or the requester's) durable requests waiting, against their own cap: the
  -- own agents' for the owner, a viewer's across every owner who shares with them.
  select count(*) into v_waiting from relay.pending_requests r
  where r.settled_at is null and r.expires_at > now() and r.durable
    and (case when p_requester is null or p_requester = p_owner then r.owner_id = p_owner and r.requester_id is null
              else r.requester_id = p_requester end);
  if v_waiting >= p_max_waiting then
    return jsonb_build_object('status', 'too_many', 'connections', null, 'ping', null);
  end if;

  v_opened := relay.open_request(p_id, p_owner, p_requester, p_client_id, p_client_name, p_instance,
                                 p_reply_key, p_expires_at, p_max_waiting, p_reason);
  if v_opened->>'status' = 'opened' then
    update relay.pending_requests
    set resumable = true, durable = p_durable, agent_key_id = p_key, keep_until = p_keep_until,
        wrapped_secret = p_wrapped_secret
    where id = p_id;
  end if;
  return v_opened;
end;
$$;
