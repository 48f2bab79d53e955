-- =============================================================================
-- Durable requests: a request outlives the call that opened it (SPEC §11)
-- =============================================================================
-- A person may need minutes to see a push, unlock and tap; an MCP client gives up after
-- about a minute. So a request opened as an MCP task, by `Prefer: respond-async`, or by a
-- get_phone_location call that reached its wait bound stays open until its own deadline,
-- whoever holds the call, and its result is kept — sealed — until a TTL. The columns
-- (resumable, durable, agent_key_id, keep_until, wrapped_secret, watcher_instance) and what
-- they mean are with relay.pending_requests (20_relay_schema.sql); relay.settle stores a
-- resumable request's sealed answer, and relay.register_instance and relay.reap leave
-- durable requests open.

-- -----------------------------------------------------------------------------
-- relay.sealed_results: the sealed fix of a resumable request, until its TTL
-- -----------------------------------------------------------------------------
create unlogged table relay.sealed_results (
  request_id uuid primary key references relay.pending_requests (id) on delete cascade,
  sealed text not null check (char_length(sealed) between 1 and 6000),
  stored_at timestamptz not null default now()
);
comment on table relay.sealed_results is
  'The answer of a resumable request, as the ciphertext sealed to its reply key; only the request_id''s holder can open it. Deleted with its request.';
alter table relay.sealed_results enable row level security;
revoke all on relay.sealed_results from public, anon, authenticated, service_role, whereabot_relay;

-- -----------------------------------------------------------------------------
-- Limits
-- -----------------------------------------------------------------------------
create or replace function private.max_durable_requests_per_agent()
returns int language sql immutable set search_path = '' as $$ select 20 $$;
comment on function private.max_durable_requests_per_agent() is
  'Open durable requests one (user, client) or one agent key may have (SPEC §11).';
revoke execute on function private.max_durable_requests_per_agent() from public, anon, authenticated;

create or replace function private.max_resumable_requests()
returns int language sql immutable set search_path = '' as $$ select 10000 $$;
comment on function private.max_resumable_requests() is
  'Resumable requests (and so result rows) past which only accounts holding their fair share (private.resumable_fair_share) are refused.';
revoke execute on function private.max_resumable_requests() from public, anon, authenticated;

create or replace function private.max_resumable_requests_per_account()
returns int language sql immutable set search_path = '' as $$ select 500 $$;
comment on function private.max_resumable_requests_per_account() is
  'Resumable requests (open or settled, until keep_until) one account may hold at once.';
revoke execute on function private.max_resumable_requests_per_account() from public, anon, authenticated;

create or replace function private.resumable_fair_share()
returns int language sql immutable set search_path = '' as $$ select 50 $$;
comment on function private.resumable_fair_share() is
  'Past private.max_resumable_requests() rows, an account holding this many is refused; one holding fewer still opens.';
revoke execute on function private.resumable_fair_share() from public, anon, authenticated;

create or replace function private.max_resumable_requests_hard()
returns int language sql immutable set search_path = '' as $$ select 100000 $$;
comment on function private.max_resumable_requests_hard() is
  'Resumable requests the whole database keeps at most, whoever holds them.';
revoke execute on function private.max_resumable_requests_hard() from public, anon, authenticated;

-- -----------------------------------------------------------------------------
-- private.binds(request, user, client, key) — whether a credential may see a request
-- -----------------------------------------------------------------------------
create or replace function private.binds(p_request relay.pending_requests, p_user uuid, p_client_id text, p_key uuid)
returns boolean
language sql
stable
set search_path = ''
as $$
  select p_request.resumable
     and coalesce(p_request.requester_id, p_request.owner_id) = p_user
     and p_request.client_id = p_client_id
     and p_request.agent_key_id is not distinct from p_key
     and p_request.keep_until > now()
$$;
comment on function private.binds(relay.pending_requests, uuid, text, uuid) is
  'A resumable request is visible only to the (user, client_id, agent key) that opened it, and only until keep_until.';
revoke execute on function private.binds(relay.pending_requests, uuid, text, uuid) from public, anon, authenticated;

create or replace function private.epoch_ms(p_time timestamptz)
returns bigint language sql immutable set search_path = '' as $$
  select (extract(epoch from p_time) * 1000)::bigint
$$;
comment on function private.epoch_ms(timestamptz) is 'Milliseconds since 1970 (null for null), as the relay reads times in JSON.';
revoke execute on function private.epoch_ms(timestamptz) from public, anon, authenticated;

-- -----------------------------------------------------------------------------
-- private.request_view(request) → what a poll says about a resumable request
-- -----------------------------------------------------------------------------
create or replace function private.request_view(p_request relay.pending_requests)
returns jsonb
language sql
stable
set search_path = ''
as $$
  select jsonb_build_object(
    'status', case when p_request.settled_at is null then 'waiting' else 'settled' end,
    'id', p_request.id, 'owner', p_request.owner_id,
    'outcome', p_request.outcome, 'reason', p_request.reason,
    'delivered', p_request.delivered_at is not null,
    'created_ms', private.epoch_ms(p_request.created_at),
    'created_us', (extract(epoch from p_request.created_at) * 1000000)::bigint, 'expires_ms', private.epoch_ms(p_request.expires_at),
    'settled_ms', private.epoch_ms(p_request.settled_at), 'keep_until_ms', private.epoch_ms(p_request.keep_until),
    'sealed', (select s.sealed from relay.sealed_results s where s.request_id = p_request.id))
$$;
comment on function private.request_view(relay.pending_requests) is
  'A resumable request as its agent sees it: status, outcome, times, and the sealed fix when there is one. Called only by security-definer relay functions (so not one itself).';
revoke execute on function private.request_view(relay.pending_requests) from public, anon, authenticated;

-- -----------------------------------------------------------------------------
-- relay.open_durable_request(...) → {status, connections, ping}
-- -----------------------------------------------------------------------------
-- open_request with the durable columns. status: opened, too_many (the owner's cap, or
-- the credential's 20 open durable requests), full (the database keeps its maximum of
-- resumable requests) or exists. p_durable false: a get_phone_location call that may
-- still answer in the call (relay.make_durable follows at its wait bound).
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

-- -----------------------------------------------------------------------------
-- relay.make_durable(id, instance) → {status: durable | settled | gone}
-- -----------------------------------------------------------------------------
create or replace function relay.make_durable(p_id uuid, p_instance text)
returns jsonb
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_request relay.pending_requests;
begin
  perform private.check_instance_id(p_instance);
  if p_id is null then
    raise exception 'make_durable needs a request id' using errcode = '22004';
  end if;
  update relay.pending_requests set durable = true
  where id = p_id and waiter_instance = p_instance and resumable and settled_at is null
  returning * into v_request;
  if found then
    return jsonb_build_object('status', 'durable');
  end if;
  select * into v_request from relay.pending_requests where id = p_id and waiter_instance = p_instance;
  if not found then
    return jsonb_build_object('status', 'gone');
  end if;
  return jsonb_build_object('status', 'settled');
end;
$$;
comment on function relay.make_durable(uuid, text) is
  'A get_phone_location call reached its wait bound: its request now outlives the waiting instance.';

-- -----------------------------------------------------------------------------
-- relay.durable_state(id, user, client, key, instance, watch) → the request's view, or
-- {status: unknown}
-- -----------------------------------------------------------------------------
-- A poll, or a repeated ask that joins the request (its own call may still be waiting for
-- it: a resumable request is visible to its credential before it is made durable). An open
-- request past its deadline (plus the 2 s grace a synchronous waiter gives a phone's own
-- no_answer) is expired here, and its pings cancelled. With p_watch,
-- an open request's answer is sent to p_instance too from now on (its poller waits there;
-- the opening instance stays the waiter, which runs the request's pushes).
create or replace function relay.durable_state(p_id uuid, p_user uuid, p_client_id text, p_key uuid,
                                               p_instance text, p_watch boolean default false)
returns jsonb
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_request relay.pending_requests;
begin
  perform private.check_instance_id(p_instance);
  if p_id is null or p_user is null or p_client_id is null then
    raise exception 'durable_state needs a request id, a user and a client id' using errcode = '22004';
  end if;
  select * into v_request from relay.pending_requests where id = p_id;
  if not found or not private.binds(v_request, p_user, p_client_id, p_key) then
    return jsonb_build_object('status', 'unknown');
  end if;
  if v_request.settled_at is null and v_request.expires_at < now() - interval '2 seconds' then
    update relay.pending_requests
    set settled_at = now(), outcome = 'expired', keep_until = least(keep_until, now() + interval '10 minutes')
    where id = p_id and settled_at is null
    returning * into v_request;
    if found then
      perform private.notify_cancel(p_id, v_request.owner_id);
    else
      select * into v_request from relay.pending_requests where id = p_id;
    end if;
  elsif v_request.settled_at is null and p_watch and v_request.watcher_instance is distinct from p_instance then
    update relay.pending_requests set watcher_instance = p_instance where id = p_id and settled_at is null;
  end if;
  return private.request_view(v_request);
end;
$$;
comment on function relay.durable_state(uuid, uuid, text, uuid, text, boolean) is
  'A poll of a resumable request (or a join of it) by the credential that opened it (anyone else: unknown); expires it past its deadline; with watch, its answer comes to the polling instance.';

-- -----------------------------------------------------------------------------
-- relay.cancel_durable(id, user, client, key, forget) → cancelled | settled | unknown
-- -----------------------------------------------------------------------------
-- tasks/cancel and DELETE: an open request is abandoned and its pings cancelled. With
-- p_forget (DELETE) the request and its result are deleted as well.
create or replace function relay.cancel_durable(p_id uuid, p_user uuid, p_client_id text, p_key uuid, p_forget boolean)
returns text
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_request relay.pending_requests;
  v_status text := 'settled';
begin
  if p_id is null or p_user is null or p_client_id is null or p_forget is null then
    raise exception 'cancel_durable needs a request id, a user, a client id and forget' using errcode = '22004';
  end if;
  select * into v_request from relay.pending_requests where id = p_id for update;
  if not found or not private.binds(v_request, p_user, p_client_id, p_key) or not v_request.durable then
    return 'unknown';
  end if;
  if v_request.settled_at is null then
    update relay.pending_requests
    set settled_at = now(), outcome = 'abandoned', keep_until = least(keep_until, now() + interval '10 minutes')
    where id = p_id;
    perform private.notify_cancel(p_id, v_request.owner_id);
    v_status := 'cancelled';
  end if;
  if p_forget then
    delete from relay.pending_requests where id = p_id;
  end if;
  return v_status;
end;
$$;
comment on function relay.cancel_durable(uuid, uuid, text, uuid, boolean) is
  'The agent cancels its durable request (phones get cancel); with forget, the request and its result are deleted.';

-- -----------------------------------------------------------------------------
-- relay.durable_requests(user, client, key, before_us, before_id, limit) — tasks/list
-- -----------------------------------------------------------------------------
-- The credential's durable requests that can still be listed (their secret is wrapped),
-- newest first, a page after the cursor (created_at in microseconds since 1970, id).
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

revoke execute on function
  relay.open_durable_request(uuid, uuid, uuid, text, text, uuid, text, bytea, timestamptz, timestamptz, boolean, bytea, int, text),
  relay.make_durable(uuid, text),
  relay.durable_state(uuid, uuid, text, uuid, text, boolean),
  relay.cancel_durable(uuid, uuid, text, uuid, boolean),
  relay.durable_requests(uuid, text, uuid, bigint, uuid, int),
  relay.joinable_request(uuid, text, uuid, uuid)
  from public, anon, authenticated, service_role;
grant execute on function
  relay.open_durable_request(uuid, uuid, uuid, text, text, uuid, text, bytea, timestamptz, timestamptz, boolean, bytea, int, text),
  relay.make_durable(uuid, text),
  relay.durable_state(uuid, uuid, text, uuid, text, boolean),
  relay.cancel_durable(uuid, uuid, text, uuid, boolean),
  relay.durable_requests(uuid, text, uuid, bigint, uuid, int),
  relay.joinable_request(uuid, text, uuid, uuid)
  to whereabot_relay;
