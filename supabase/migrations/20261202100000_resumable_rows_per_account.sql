-- =============================================================================
-- Resumable rows are bounded per account first (issue 38, finding 1)
-- =============================================================================
-- Every get_phone_location call, task and async request keeps a resumable row (and its
-- sealed result) in relay.pending_requests. The relay-wide cap of 10,000 such rows counted
-- settled rows kept for up to 10 minutes, while the per-credential cap of 20 counted only
-- open ones: one account with a few agent keys, opening and cancelling in a loop, filled
-- the table in half a minute, and from then on every user's call was refused.
--
-- * An account (the credential's user) keeps at most 500 resumable rows, open or settled,
--   until their keep_until: over it, its calls are refused (too_many), no one else's.
-- * Past 10,000 rows relay-wide, only accounts holding a fair share (50) or more are
--   refused (full); an account below it still opens. 100,000 rows is the hard ceiling.
-- * A get_phone_location call answered within the call (its row never made durable) keeps
--   its row 30 seconds after it settles (long enough for a lost answer to be read again),
--   not 10 minutes.
-- * The count and the opener's lock are per account, so the caps hold under concurrency.

comment on function private.max_resumable_requests() is
  'Resumable requests (and so result rows) past which only accounts holding their fair share (private.resumable_fair_share) are refused.';

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
-- A call's row is forgotten soon after the call is answered
-- -----------------------------------------------------------------------------
create or replace function private.forget_answered_call()
returns trigger
language plpgsql
set search_path = ''
as $$
begin
  new.keep_until := least(new.keep_until, now() + interval '30 seconds');
  return new;
end;
$$;
comment on function private.forget_answered_call() is
  'A resumable request settled before it was made durable (a call answered in the call) is kept 30 seconds, not 10 minutes.';
revoke execute on function private.forget_answered_call() from public, anon, authenticated;

create trigger pending_requests_forget_answered_call
  before update on relay.pending_requests
  for each row when (new.settled_at is not null and old.settled_at is null and new.resumable and not new.durable)
  execute function private.forget_answered_call();

-- -----------------------------------------------------------------------------
-- relay.open_durable_request: the account's cap, then the table's fair share
-- -----------------------------------------------------------------------------
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
comment on function relay.open_durable_request(uuid, uuid, uuid, text, text, uuid, text, bytea, timestamptz, timestamptz, boolean, bytea, int, text) is
  'Opens a resumable (and, with p_durable, instance-independent) locate request bound to its credential; at most 20 open per credential and 500 kept per account; past 10,000 kept relay-wide only accounts over their fair share are refused.';
