-- A repeated ask joins the request its agent already opened even when it lands on another
-- instance (docs/agents.md, "Timeouts"): a get_phone_location call's request_id secret is
-- kept wrapped under the instances' REQUEST_ID_KEY as a task's is, `listed` keeps tasks/list
-- to the tasks, and relay.joinable_request finds the credential's waiting request for a
-- person, so any instance can wait for it by its request_id.

alter table relay.pending_requests add column listed boolean not null default false;
comment on column relay.pending_requests.listed is
  'Opened as a task or an async request (durable from the start), so tasks/list may name it; a call''s request is not.';
update relay.pending_requests set listed = true where durable and wrapped_secret is not null;
comment on column relay.pending_requests.wrapped_secret is
  'The request_id''s secret under the relay instances'' REQUEST_ID_KEY (AES-256-GCM), for tasks/list and for a repeated ask that joins on another instance; never the plain secret.';

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
        wrapped_secret = p_wrapped_secret, listed = p_durable and p_wrapped_secret is not null
    where id = p_id;
  end if;
  return v_opened;
end;
$$;
comment on function relay.open_durable_request(uuid, uuid, uuid, text, text, uuid, text, bytea, timestamptz, timestamptz, boolean, bytea, int, text) is
  'Opens a resumable (and, with p_durable, instance-independent) locate request bound to its credential; at most 20 open per credential and 500 kept per account; past 10,000 kept relay-wide only accounts over their fair share are refused.';

create or replace function relay.durable_requests(p_user uuid, p_client_id text, p_key uuid,
                                                  p_before_us bigint, p_before_id uuid, p_limit int)
returns table (view jsonb, wrapped_secret bytea)
language plpgsql
stable
security definer
set search_path = ''
as $$
begin
  if p_user is null or p_client_id is null then
    raise exception 'durable_requests needs a user and a client id' using errcode = '22004';
  end if;
  if p_limit is null or p_limit not between 1 and 100 then
    raise exception 'limit must be between 1 and 100' using errcode = '22023';
  end if;
  return query
    select private.request_view(r) - 'sealed', r.wrapped_secret
    from relay.pending_requests r
    where r.resumable and r.durable and r.listed
      and coalesce(r.requester_id, r.owner_id) = p_user and r.client_id = p_client_id
      and r.agent_key_id is not distinct from p_key and r.keep_until > now()
      and (p_before_us is null
           or ((extract(epoch from r.created_at) * 1000000)::bigint, r.id)
              < (p_before_us, coalesce(p_before_id, 'ffffffff-ffff-ffff-ffff-ffffffffffff'::uuid)))
    order by r.created_at desc, r.id desc
    limit p_limit;
end;
$$;
comment on function relay.durable_requests(uuid, text, uuid, bigint, uuid, int) is
  'One page of a credential''s own durable requests, newest first (tasks/list); never another credential''s.';

-- -----------------------------------------------------------------------------
-- relay.joinable_request(user, client, key, owner) — a repeated ask's request to join
-- -----------------------------------------------------------------------------
create or replace function relay.joinable_request(p_user uuid, p_client_id text, p_key uuid, p_owner uuid)
returns table (id uuid, wrapped_secret bytea)
language plpgsql
stable
security definer
set search_path = ''
as $$
begin
  if p_user is null or p_client_id is null or p_owner is null then
    raise exception 'joinable_request needs a user, a client id and an owner' using errcode = '22004';
  end if;
  return query
    select r.id, r.wrapped_secret
    from relay.pending_requests r
    where r.resumable and not r.listed and r.wrapped_secret is not null
      and coalesce(r.requester_id, r.owner_id) = p_user and r.client_id = p_client_id
      and r.agent_key_id is not distinct from p_key and r.owner_id = p_owner
      and r.settled_at is null and r.expires_at > now() and r.keep_until > now()
    order by r.created_at desc
    limit 1;
end;
$$;
comment on function relay.joinable_request(uuid, text, uuid, uuid) is
  'The newest get_phone_location request of one credential for one person still waiting for the person, with its wrapped request_id secret: a repeated ask joins it on any instance. Never another credential''s, never a task.';

revoke execute on function relay.joinable_request(uuid, text, uuid, uuid) from public, anon, authenticated, service_role;
grant execute on function relay.joinable_request(uuid, text, uuid, uuid) to whereabot_relay;
