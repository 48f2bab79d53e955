-- =============================================================================
-- Relay requests: open, deliver, settle, finish
-- =============================================================================
-- A request's life: open_request (NOTIFY whereabot_locate) → mark_delivered when a phone
-- got the ping → settle by the first answer (NOTIFY whereabot_answer to the waiter, and
-- whereabot_cancel) or finish by the waiter at its deadline or when the agent hung up
-- (NOTIFY whereabot_cancel). Every change and its NOTIFY happen in one transaction.

-- -----------------------------------------------------------------------------
-- relay.open_request(...) → {status, connections}
-- -----------------------------------------------------------------------------
-- status: opened (NOTIFY whereabot_locate sent), too_many (the owner already has
-- max_waiting requests waiting: nothing was opened), exists (a row with this id exists:
-- nothing changed; re-creating a row lost in a crash inserts it again).
-- connections: how many sockets of the owner are live now (0: push at once).
-- A requester other than the owner needs an active share from the owner.
create or replace function relay.open_request(
  p_id uuid, p_owner uuid, p_requester uuid, p_client_id text, p_client_name text,
  p_instance text, p_reply_key bytea, p_expires_at timestamptz, p_max_waiting int default 5)
returns jsonb
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_request relay.pending_requests;
  v_waiting int;
  v_connections int;
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

  -- One opener per owner at a time, so that the cap holds under concurrency.
  perform pg_advisory_xact_lock(hashtextextended('whereabot_open_request:' || p_owner::text, 0));

  if exists (select from relay.pending_requests where id = p_id) then
    return jsonb_build_object('status', 'exists', 'connections', null);
  end if;
  select count(*) into v_waiting from relay.pending_requests
  where owner_id = p_owner and settled_at is null and expires_at > now();
  select count(*) into v_connections from relay.connections where user_id = p_owner;
  if v_waiting >= p_max_waiting then
    return jsonb_build_object('status', 'too_many', 'connections', v_connections);
  end if;

  insert into relay.instances (id) values (p_instance) on conflict (id) do nothing;
  insert into relay.pending_requests
    (id, owner_id, requester_id, client_id, client_name, waiter_instance, reply_key, expires_at)
  values (p_id, p_owner, nullif(p_requester, p_owner), p_client_id, p_client_name,
          p_instance, p_reply_key, p_expires_at)
  returning * into v_request;

  perform private.notify('whereabot_locate',
    jsonb_build_object('owner', p_owner) || private.locate_message(v_request));
  return jsonb_build_object('status', 'opened', 'connections', v_connections);
end;
$$;
comment on function relay.open_request(uuid, uuid, uuid, text, text, text, bytea, timestamptz, int) is
  'Opens a locate request for OWNER''s phones (NOTIFY whereabot_locate) unless MAX_WAITING are already waiting.';

-- -----------------------------------------------------------------------------
-- relay.mark_delivered(id) → whether the request still waits
-- -----------------------------------------------------------------------------
create or replace function relay.mark_delivered(p_id uuid)
returns boolean
language plpgsql
security definer
set search_path = ''
as $$
begin
  if p_id is null then
    raise exception 'mark_delivered needs a request id' using errcode = '22004';
  end if;
  update relay.pending_requests
  set delivered_at = coalesce(delivered_at, now())
  where id = p_id and settled_at is null;
  return found;
end;
$$;
comment on function relay.mark_delivered(uuid) is
  'Records that a device got the ping (first time only); false when the request no longer waits.';

-- -----------------------------------------------------------------------------
-- relay.settle(id, user, device, outcome, reason, sealed) → settled | gone | forbidden
-- -----------------------------------------------------------------------------
-- The first answer wins. forbidden: the request or the device belongs to another user
-- (or the device was removed). gone: no request waits under this id. On settled:
-- NOTIFY whereabot_answer {id, waiter, outcome, reason, sealed} and whereabot_cancel
-- {id, owner}. `sealed` (base64) is the location encrypted to the waiter's reply key;
-- it is required for outcome location and refused otherwise.
create or replace function relay.settle(
  p_id uuid, p_user uuid, p_device uuid, p_outcome text, p_reason text, p_sealed text)
returns text
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_request relay.pending_requests;
begin
  if p_id is null or p_user is null then
    raise exception 'settle needs a request id and a user id' using errcode = '22004';
  end if;
  if p_outcome is null or p_outcome not in ('location', 'denied', 'unavailable') then
    raise exception 'outcome must be location, denied or unavailable' using errcode = '22023';
  end if;
  if (p_outcome = 'location' and p_reason is not null)
     or (p_outcome = 'denied' and p_reason is distinct from 'user' and p_reason is distinct from 'no_answer')
     or (p_outcome = 'unavailable' and (p_reason is null or p_reason not in ('permission', 'no_fix', 'error'))) then
    raise exception 'reason does not fit the outcome' using errcode = '22023';
  end if;
  if (p_outcome = 'location') <> (p_sealed is not null) then
    raise exception 'a sealed answer comes with outcome location and only with it' using errcode = '22023';
  end if;
  if p_sealed is not null and (p_sealed !~ '^[A-Za-z0-9+/_-]+={0,2}$' or char_length(p_sealed) > 6000) then
    raise exception 'sealed must be base64 of at most 6000 characters' using errcode = '22023';
  end if;

  if p_device is not null and not exists (
       select from public.devices where id = p_device and user_id = p_user and revoked_at is null) then
    return 'forbidden';
  end if;

  select * into v_request from relay.pending_requests where id = p_id for update;
  if not found then
    return 'gone';
  end if;
  if v_request.owner_id <> p_user then
    return 'forbidden';
  end if;
  if v_request.settled_at is not null then
    return 'gone';
  end if;

  update relay.pending_requests
  set settled_at = now(), outcome = p_outcome, reason = p_reason, answered_by = p_device
  where id = p_id;

  perform private.notify('whereabot_answer', jsonb_build_object(
    'id', p_id, 'waiter', v_request.waiter_instance,
    'outcome', p_outcome, 'reason', p_reason, 'sealed', p_sealed));
  perform private.notify('whereabot_cancel', jsonb_build_object('id', p_id, 'owner', v_request.owner_id));
  return 'settled';
end;
$$;
comment on function relay.settle(uuid, uuid, uuid, text, text, text) is
  'First answer wins: settles request ID for USER''s DEVICE and notifies the waiter (sealed) and every holder (cancel).';

-- -----------------------------------------------------------------------------
-- relay.finish(id, instance, outcome) → {status, delivered, outcome, reason}
-- -----------------------------------------------------------------------------
-- The waiter ends its own request at the deadline (expired) or when the agent hung up
-- (abandoned). status: finished (NOTIFY whereabot_cancel), already_settled (an answer won
-- first; outcome and reason say which), gone (no such request). delivered: whether any
-- device got the ping (504 rather than 503).
create or replace function relay.finish(p_id uuid, p_instance text, p_outcome text)
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
    raise exception 'finish needs a request id' using errcode = '22004';
  end if;
  if p_outcome is null or p_outcome not in ('expired', 'abandoned') then
    raise exception 'outcome must be expired or abandoned' using errcode = '22023';
  end if;

  select * into v_request from relay.pending_requests where id = p_id for update;
  if not found then
    return jsonb_build_object('status', 'gone', 'delivered', null, 'outcome', null, 'reason', null);
  end if;
  if v_request.waiter_instance <> p_instance then
    raise exception 'only the waiting instance may finish a request' using errcode = '42501';
  end if;
  if v_request.settled_at is not null then
    return jsonb_build_object('status', 'already_settled',
      'delivered', v_request.delivered_at is not null,
      'outcome', v_request.outcome, 'reason', v_request.reason);
  end if;

  update relay.pending_requests set settled_at = now(), outcome = p_outcome where id = p_id;
  perform private.notify('whereabot_cancel', jsonb_build_object('id', p_id, 'owner', v_request.owner_id));
  return jsonb_build_object('status', 'finished',
    'delivered', v_request.delivered_at is not null, 'outcome', p_outcome, 'reason', null);
end;
$$;
comment on function relay.finish(uuid, text, text) is
  'The waiter ends its request (expired or abandoned), cancelling the pings; reports whether a device got it.';

-- -----------------------------------------------------------------------------
-- relay.request_states(ids) → the rows behind a waiter's requests
-- -----------------------------------------------------------------------------
-- For resync: a waiter whose listener reconnected re-reads its requests; ids missing from
-- the result vanished (crash) and are re-created with open_request.
create or replace function relay.request_states(p_ids uuid[])
returns table (id uuid, settled boolean, outcome text, reason text, delivered boolean)
language plpgsql
stable
security definer
set search_path = ''
as $$
begin
  if p_ids is null or cardinality(p_ids) > 10000 then
    raise exception 'request_states needs 0 to 10000 request ids' using errcode = '22023';
  end if;
  return query
    select r.id, r.settled_at is not null, r.outcome, r.reason, r.delivered_at is not null
    from relay.pending_requests r
    where r.id = any (p_ids);
end;
$$;
comment on function relay.request_states(uuid[]) is
  'State of the given requests (missing ids have vanished), for a waiter''s resync.';

revoke execute on all functions in schema relay from public, anon, authenticated, service_role;
grant execute on function
  relay.open_request(uuid, uuid, uuid, text, text, text, bytea, timestamptz, int),
  relay.mark_delivered(uuid),
  relay.settle(uuid, uuid, uuid, text, text, text),
  relay.finish(uuid, text, text),
  relay.request_states(uuid[])
  to whereabot_relay;
