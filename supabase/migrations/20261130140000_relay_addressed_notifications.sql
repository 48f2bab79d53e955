-- =============================================================================
-- Addressed notifications and one round trip per side of a locate
-- =============================================================================
-- Until now every instance heard every locate, answer and cancel on the broadcast channels
-- whereabot_locate / whereabot_answer / whereabot_cancel and dropped what was not for it,
-- so each notification cost every instance a wake-up and a decode. Now each instance has a
-- channel of its own, private.instance_channel(instance), and hears only:
--   {"kind":"locate", ...ping, owner, reply_key} — a request for an owner with sockets here;
--   {"kind":"answer", id, waiter, outcome, reason, sealed, cancel} — the answer for a request
--     waiting here (cancel: true when the owner also has sockets here: the cancel rides along);
--   {"kind":"cancel", id, owner} — settled or expired; cancel the pings sent from here.
-- The instance that calls open_request or settle is never notified of its own work: it
-- pings its own phones and delivers its own answers in process, after the commit.
--
-- The reply key travels with the ping (notification, device_hello's pending list,
-- pending_locates_on), so the holder seals a fix without asking for it (relay.reply_key
-- stays for POST /v1/device/answer). Settling marks the request delivered, and
-- mark_delivered takes many ids at once, so no write of it sits on a locate's path.
--
-- A phone's hello and a request for its user are serialized by the owner's advisory lock
-- (the one open_request already takes): either the hello's socket row is committed when
-- open_request reads where the owner's sockets are, or the request is committed when the
-- hello reads the pending pings. Nothing falls between the two.
--
-- Still broadcast (rare, and every instance may need them): whereabot_device,
-- whereabot_key, whereabot_replay.

-- -----------------------------------------------------------------------------
-- private.instance_channel(instance) → the instance's own channel name
-- -----------------------------------------------------------------------------
-- Instance ids are up to 64 characters and channel names at most 63 bytes, so the channel
-- is named after a hash of the id: 'whereabot_i_' and 32 hex digits of its SHA-256.
create or replace function private.instance_channel(p_instance text)
returns text
language sql
immutable
set search_path = ''
as $$
  select 'whereabot_i_' || left(encode(pg_catalog.sha256(pg_catalog.convert_to(p_instance, 'UTF8')), 'hex'), 32)
$$;

comment on function private.instance_channel(text) is
  'The LISTEN channel of one relay instance: whereabot_i_ and 32 hex digits of the SHA-256 of its id.';
revoke execute on function private.instance_channel(text) from public, anon, authenticated;

-- -----------------------------------------------------------------------------
-- private.notify_instances(instances, payload) — one notification per instance channel
-- -----------------------------------------------------------------------------
create or replace function private.notify_instances(p_instances text[], p_payload jsonb)
returns void
language plpgsql
set search_path = ''
as $$
declare
  v_instance text;
begin
  foreach v_instance in array coalesce(p_instances, '{}') loop
    perform private.notify(private.instance_channel(v_instance), p_payload);
  end loop;
end;
$$;

comment on function private.notify_instances(text[], jsonb) is
  'Sends the same payload to each listed instance''s own channel.';
revoke execute on function private.notify_instances(text[], jsonb) from public, anon, authenticated;

-- -----------------------------------------------------------------------------
-- private.owner_instances(owner) → the instances holding the owner's sockets
-- -----------------------------------------------------------------------------
create or replace function private.owner_instances(p_owner uuid)
returns text[]
language sql
stable
security definer
set search_path = ''
as $$
  select coalesce(array_agg(distinct c.instance_id), '{}') from relay.connections c where c.user_id = p_owner
$$;

comment on function private.owner_instances(uuid) is
  'The instances that hold at least one socket of the user (where their pings and cancels go).';
revoke execute on function private.owner_instances(uuid) from public, anon, authenticated;

-- -----------------------------------------------------------------------------
-- private.locate_ping(request) → the ping as the holder needs it: the phone's message,
-- its reply key (base64, never sent to the phone) and its owner
-- -----------------------------------------------------------------------------
create or replace function private.locate_ping(p_request relay.pending_requests)
returns jsonb
language sql
stable
security definer
set search_path = ''
as $$
  select jsonb_build_object('type', 'locate', 'owner', p_request.owner_id,
                            'reply_key', encode(p_request.reply_key, 'base64'))
         || private.locate_message(p_request)
$$;

comment on function private.locate_ping(relay.pending_requests) is
  'A waiting request as its holders need it: the phone''s locate message plus owner and reply_key.';
revoke execute on function private.locate_ping(relay.pending_requests) from public, anon, authenticated;

-- -----------------------------------------------------------------------------
-- private.cancel_request(request) — tells the instances holding the owner's sockets
-- -----------------------------------------------------------------------------
create or replace function private.notify_cancel(p_id uuid, p_owner uuid)
returns void
language sql
security definer
set search_path = ''
as $$
  select private.notify_instances(private.owner_instances(p_owner),
    jsonb_build_object('kind', 'cancel', 'id', p_id, 'owner', p_owner))
$$;

comment on function private.notify_cancel(uuid, uuid) is
  'Tells every instance holding a socket of the owner that the request is over (cancel its pings).';
revoke execute on function private.notify_cancel(uuid, uuid) from public, anon, authenticated;

-- -----------------------------------------------------------------------------
-- relay.open_request(...) → {status, connections, ping}
-- -----------------------------------------------------------------------------
-- As before (caps, shares, exists), but the locate goes only to the instances holding the
-- owner's sockets, not to the caller: when the caller holds some, `ping` is the message
-- for them (else null). The instance row is no longer created here (relay.heartbeat
-- notices a reaped row and re-creates it, re-registering its sockets).
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
  v_holders text[];
  v_connections int;
  v_ping jsonb;
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
  select count(*) into v_waiting from relay.pending_requests
  where owner_id = p_owner and settled_at is null and expires_at > now()
    and requester_id is not distinct from nullif(p_requester, p_owner);
  if v_waiting < p_max_waiting and p_requester is not null and p_requester <> p_owner then
    perform pg_advisory_xact_lock(hashtextextended('whereabot_open_request_by:' || p_requester::text, 0));
    select count(*) into v_waiting from relay.pending_requests
    where requester_id = p_requester and settled_at is null and expires_at > now();
  end if;
  select coalesce(array_agg(distinct instance_id), '{}'), count(*) into v_holders, v_connections
  from relay.connections where user_id = p_owner;
  if v_waiting >= p_max_waiting then
    return jsonb_build_object('status', 'too_many', 'connections', v_connections, 'ping', null);
  end if;

  insert into relay.pending_requests
    (id, owner_id, requester_id, client_id, client_name, waiter_instance, reply_key, expires_at)
  values (p_id, p_owner, nullif(p_requester, p_owner), p_client_id, p_client_name,
          p_instance, p_reply_key, p_expires_at)
  returning * into v_request;

  if v_connections > 0 then
    v_ping := private.locate_ping(v_request);
    perform private.notify_instances(array_remove(v_holders, p_instance), v_ping || '{"kind":"locate"}');
  end if;
  return jsonb_build_object('status', 'opened', 'connections', v_connections,
    'ping', case when p_instance = any (v_holders) then v_ping end);
end;
$$;

-- -----------------------------------------------------------------------------
-- relay.settle(id, user, device, outcome, reason, sealed, instance) → status
-- -----------------------------------------------------------------------------
-- As before, and: the request counts as delivered (an answer proves it), and the answer
-- goes to the waiter's channel, the cancel to the channels of the instances holding the
-- owner's sockets — one notification where they are the same instance, none to
-- `p_instance`, the caller, which delivers and cancels in process. A null p_instance
-- (psql, tests) notifies every instance concerned.
--
-- Sealing exists so that a location crosses Postgres only as ciphertext on its way from
-- the instance holding the answering phone to the instance holding the agent. When they
-- are one instance the fix does not cross Postgres at all: the relay hands it over in
-- process and settles with `outcome = 'location'` and no `sealed` (saving two X25519
-- operations, HKDF and AES-GCM). A location without `sealed` from any other caller is
-- refused (22023).
--
-- The waiting row is found and settled by one UPDATE ... RETURNING (the row lock and the
-- update were two statements); only a refused answer reads it again to say why. Measured
-- with pgbench (open_request + settle, -c1): settle 0.32 -> 0.27 ms on average.
drop function if exists relay.settle(uuid, uuid, uuid, text, text, text);
create or replace function relay.settle(
  p_id uuid, p_user uuid, p_device uuid, p_outcome text, p_reason text, p_sealed text,
  p_instance text default null)
returns text
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_request relay.pending_requests;
  v_waiter text;
  v_owner uuid;
  v_holders text[];
begin
  if p_id is null or p_user is null then
    raise exception 'settle needs a request id and a user id' using errcode = '22004';
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

  if p_device is not null and not exists (
       select from public.devices where id = p_device and user_id = p_user and revoked_at is null) then
    return 'forbidden';
  end if;

  -- The first answer wins: one statement finds the waiting row of this user and settles
  -- it (a fix crosses Postgres only sealed; it need not cross at all when the answering
  -- phone's instance is the waiter's, which hands it over in process).
  update relay.pending_requests
  set settled_at = now(), outcome = p_outcome, reason = p_reason, answered_by = p_device,
      delivered_at = coalesce(delivered_at, now())
  where id = p_id and owner_id = p_user and settled_at is null
    and (p_sealed is not null or p_outcome <> 'location' or waiter_instance = p_instance)
  returning waiter_instance, owner_id into v_waiter, v_owner;
  if not found then
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

  select coalesce(array_agg(distinct c.instance_id), '{}') into v_holders
  from relay.connections c where c.user_id = v_owner;
  if v_waiter is distinct from p_instance then
    perform private.notify(private.instance_channel(v_waiter), jsonb_build_object(
      'kind', 'answer', 'id', p_id, 'waiter', v_waiter, 'owner', v_owner,
      'outcome', p_outcome, 'reason', p_reason, 'sealed', p_sealed, 'cancel', v_waiter = any (v_holders)));
  end if;
  v_holders := array_remove(array_remove(v_holders, v_waiter), p_instance);
  if cardinality(v_holders) > 0 then
    perform private.notify_instances(v_holders, jsonb_build_object('kind', 'cancel', 'id', p_id, 'owner', v_owner));
  end if;
  return 'settled';
end;
$$;

comment on function relay.settle(uuid, uuid, uuid, text, text, text, text) is
  'First answer wins: records it, sends the answer to the waiter''s channel and the cancel to the holders'' (never to p_instance, the caller). A location comes sealed unless p_instance is the waiter''s.';
revoke execute on function relay.settle(uuid, uuid, uuid, text, text, text, text) from public, anon, authenticated, service_role;
grant execute on function relay.settle(uuid, uuid, uuid, text, text, text, text) to whereabot_relay;

-- -----------------------------------------------------------------------------
-- relay.mark_delivered(ids) → how many waiting requests were marked
-- -----------------------------------------------------------------------------
-- The holder marks the pings it sent in batches, off the locate's path (replaces the
-- one-id version).
drop function if exists relay.mark_delivered(uuid);
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
  update relay.pending_requests
  set delivered_at = now()
  where id = any (p_ids) and settled_at is null and delivered_at is null;
  get diagnostics v_count = row_count;
  return v_count;
end;
$$;

comment on function relay.mark_delivered(uuid[]) is
  'Records that a device got these pings (for 504 rather than 503 at the deadline).';
revoke execute on function relay.mark_delivered(uuid[]) from public, anon, authenticated, service_role;
grant execute on function relay.mark_delivered(uuid[]) to whereabot_relay;

-- -----------------------------------------------------------------------------
-- relay.finish, relay.register_instance, relay.reap: cancels to the holders' channels
-- -----------------------------------------------------------------------------
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
  perform private.notify_cancel(p_id, v_request.owner_id);
  return jsonb_build_object('status', 'finished',
    'delivered', v_request.delivered_at is not null, 'outcome', p_outcome, 'reason', null);
end;
$$;

create or replace function relay.register_instance(p_instance text)
returns jsonb
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_request record;
  v_abandoned int := 0;
  v_connections int;
begin
  perform private.check_instance_id(p_instance);
  insert into relay.instances (id) values (p_instance)
  on conflict (id) do update set started_at = now(), heartbeat_at = now();

  delete from relay.connections where instance_id = p_instance;
  get diagnostics v_connections = row_count;

  for v_request in
    select id, owner_id from relay.pending_requests
    where waiter_instance = p_instance and settled_at is null
    for update
  loop
    update relay.pending_requests set settled_at = now(), outcome = 'abandoned' where id = v_request.id;
    perform private.notify_cancel(v_request.id, v_request.owner_id);
    v_abandoned := v_abandoned + 1;
  end loop;

  return jsonb_build_object('connections', v_connections, 'abandoned', v_abandoned);
end;
$$;

create or replace function relay.reap(p_dead_after interval default '30 seconds', p_keep_settled interval default '10 minutes')
returns jsonb
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_dead text[];
  v_request record;
  v_abandoned int := 0;
  v_expired int := 0;
  v_connections int;
  v_deleted int;
begin
  if p_dead_after is null or p_dead_after < interval '1 second' or p_dead_after > interval '1 hour' then
    raise exception 'dead_after must be between 1 second and 1 hour' using errcode = '22023';
  end if;
  if p_keep_settled is null or p_keep_settled < interval '0' or p_keep_settled > interval '1 day' then
    raise exception 'keep_settled must be between 0 and 1 day' using errcode = '22023';
  end if;

  select coalesce(array_agg(id), '{}') into v_dead
  from (select id from relay.instances
        where heartbeat_at < now() - p_dead_after
        for update skip locked) dead;

  -- The dead instances' sockets go first, so that no cancel is addressed to them.
  delete from relay.connections where instance_id = any (v_dead);
  get diagnostics v_connections = row_count;

  -- Waiters of dead instances will never answer their agents: abandon and cancel.
  -- Requests far past their deadline whose waiter never finished them: expire and cancel.
  for v_request in
    select id, owner_id, waiter_instance = any (v_dead) as abandoned
    from relay.pending_requests
    where settled_at is null
      and (waiter_instance = any (v_dead) or expires_at < now() - interval '30 seconds')
    for update skip locked
  loop
    update relay.pending_requests
    set settled_at = now(),
        outcome = case when v_request.abandoned then 'abandoned' else 'expired' end
    where id = v_request.id;
    perform private.notify_cancel(v_request.id, v_request.owner_id);
    if v_request.abandoned then v_abandoned := v_abandoned + 1; else v_expired := v_expired + 1; end if;
  end loop;

  delete from relay.instances where id = any (v_dead);

  delete from relay.pending_requests where settled_at < now() - p_keep_settled;
  get diagnostics v_deleted = row_count;

  return jsonb_build_object(
    'instances', cardinality(v_dead), 'connections', v_connections,
    'abandoned', v_abandoned, 'expired', v_expired, 'deleted', v_deleted);
end;
$$;

-- -----------------------------------------------------------------------------
-- relay.replay_answer: the replayed answer goes to the waiter's channel
-- -----------------------------------------------------------------------------
create or replace function relay.replay_answer(p_id uuid, p_sealed text)
returns boolean
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_request relay.pending_requests;
begin
  if p_id is null or p_sealed is null then
    raise exception 'replay_answer needs a request id and the sealed answer' using errcode = '22004';
  end if;
  if p_sealed !~ '^[A-Za-z0-9+/_-]+={0,2}$' or char_length(p_sealed) > 6000 then
    raise exception 'sealed must be base64 of at most 6000 characters' using errcode = '22023';
  end if;
  select * into v_request from relay.pending_requests where id = p_id and outcome = 'location';
  if not found then
    return false;
  end if;
  perform private.notify(private.instance_channel(v_request.waiter_instance), jsonb_build_object(
    'kind', 'answer', 'id', p_id, 'waiter', v_request.waiter_instance, 'owner', v_request.owner_id,
    'outcome', 'location', 'reason', null, 'sealed', p_sealed, 'cancel', false));
  return true;
end;
$$;

-- -----------------------------------------------------------------------------
-- relay.pending_locates, relay.pending_locates_on: the pings with their reply keys
-- -----------------------------------------------------------------------------
create or replace function relay.pending_locates(p_users uuid[])
returns table (owner_id uuid, message jsonb)
language plpgsql
stable
security definer
set search_path = ''
as $$
begin
  if p_users is null or cardinality(p_users) > 10000 then
    raise exception 'pending_locates needs 0 to 10000 user ids' using errcode = '22023';
  end if;
  return query
    select r.owner_id, private.locate_ping(r)
    from relay.pending_requests r
    where r.owner_id = any (p_users) and r.settled_at is null and r.expires_at > now()
    order by r.created_at;
end;
$$;

create or replace function relay.pending_locates_on(p_instance text)
returns table (owner_id uuid, message jsonb)
language plpgsql
stable
security definer
set search_path = ''
as $$
begin
  perform private.check_instance_id(p_instance);
  return query
    select r.owner_id, private.locate_ping(r)
    from relay.pending_requests r
    where r.settled_at is null and r.expires_at > now()
      and exists (select from relay.connections c
                  where c.user_id = r.owner_id and c.instance_id = p_instance)
    order by r.created_at;
end;
$$;

-- -----------------------------------------------------------------------------
-- relay.device_hello: takes the owner's lock before it registers the socket
-- -----------------------------------------------------------------------------
-- (see the top of this file: a request opened during the hello reaches the phone either
-- through its notification or through the pending list returned here)
create or replace function relay.device_hello(p_instance text, p_connection uuid, p_user uuid, p_session uuid, p_device uuid, p_name text, p_platform text, p_app_version text, p_opened_at timestamp with time zone, p_max_sockets integer DEFAULT 20)
returns jsonb
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_owner uuid;
  v_revoked_at timestamptz;
  v_known boolean;
  v_pending jsonb;
  v_name text := private.clean_display_text(p_name, 100);
  v_version text := private.clean_display_text(p_app_version, 50);
begin
  perform private.check_instance_id(p_instance);
  if p_connection is null or p_user is null or p_session is null or p_device is null or p_opened_at is null then
    raise exception 'device_hello needs a connection, user, session and device id and an opening time' using errcode = '22004';
  end if;
  if p_platform is null or p_platform not in ('ios', 'android', 'desktop', 'web') then
    raise exception 'platform must be ios, android, desktop or web' using errcode = '22023';
  end if;
  if p_max_sockets is null or p_max_sockets not between 1 and 1000 then
    raise exception 'max_sockets must be between 1 and 1000' using errcode = '22023';
  end if;
  if not exists (select from auth.users where id = p_user) then
    raise exception 'no such user' using errcode = 'P0002';
  end if;
  if relay.session_state(p_session, p_user) <> 'alive' then
    return jsonb_build_object('status', 'revoked', 'pending', '[]'::jsonb);
  end if;

  -- Hellos of one device are serialized (the newest socket wins) by an advisory lock, not
  -- a row lock: a row lock is WAL-logged and would make every hello wait for a disk flush.
  perform pg_advisory_xact_lock(hashtextextended('whereabot_device_hello:' || p_device::text, 0));
  -- Then the owner's lock, as open_request takes it: a request opened meanwhile either sees
  -- this socket (and notifies this instance) or is in the pending list read below
  -- (and the cap on the user's sockets holds under concurrent hellos).
  perform pg_advisory_xact_lock(hashtextextended('whereabot_open_request:' || p_user::text, 0));
  select user_id, revoked_at into v_owner, v_revoked_at
  from public.devices where id = p_device;
  v_known := found;
  if v_known and v_owner <> p_user then
    return jsonb_build_object('status', 'forbidden', 'pending', '[]'::jsonb);
  end if;
  if v_known and v_revoked_at is not null then
    return jsonb_build_object('status', 'revoked', 'pending', '[]'::jsonb);
  end if;
  if exists (select from relay.connections
             where device_id = p_device and id <> p_connection and opened_at > p_opened_at) then
    return jsonb_build_object('status', 'replaced', 'pending', '[]'::jsonb);
  end if;
  if not exists (select from relay.connections where id = p_connection)
     and (select count(*) from relay.connections
          where user_id = p_user and device_id <> p_device) >= p_max_sockets then
    return jsonb_build_object('status', 'too_many', 'pending', '[]'::jsonb);
  end if;

  if v_known then
    -- Rewritten only when something changed or last_seen_at is older than the heartbeat's
    -- 30 s granularity, so a reconnect storm writes nothing durable.
    update public.devices
    set name = coalesce(nullif(v_name, ''), name),
        platform = p_platform,
        app_version = v_version,
        session_id = p_session,
        last_seen_at = now()
    where id = p_device
      and (name is distinct from coalesce(nullif(v_name, ''), name)
           or platform is distinct from p_platform
           or app_version is distinct from v_version
           or session_id is distinct from p_session
           or last_seen_at is null
           or last_seen_at < now() - interval '30 seconds');
  else
    insert into public.devices (id, user_id, name, platform, app_version, session_id, last_seen_at)
    values (p_device, p_user, v_name, p_platform, v_version, p_session, now());
  end if;

  insert into relay.instances (id) values (p_instance) on conflict (id) do nothing;
  delete from relay.connections where device_id = p_device and id <> p_connection;
  insert into relay.connections (id, instance_id, user_id, device_id, platform, session_id, opened_at)
  values (p_connection, p_instance, p_user, p_device, p_platform, p_session, p_opened_at)
  on conflict (id) do update set instance_id = excluded.instance_id;

  perform private.notify('whereabot_device', jsonb_build_object(
    'device', p_device, 'event', 'hello', 'instance', p_instance, 'connection', p_connection));

  select coalesce(jsonb_agg(p.message), '[]'::jsonb) into v_pending
  from relay.pending_locates(array[p_user]) p;
  return jsonb_build_object('status', 'ok', 'pending', v_pending);
end;
$$;

-- -----------------------------------------------------------------------------
-- private.end_share: an ended share's cancels go to the holders' channels too
-- -----------------------------------------------------------------------------
create or replace function private.end_share()
returns trigger
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_share public.location_shares := old;
  v_request record;
begin
  if tg_op = 'UPDATE' and not (old.revoked_at is null and new.revoked_at is not null) then
    return new;
  end if;
  if tg_op = 'DELETE' and old.revoked_at is not null then
    return old;
  end if;
  if v_share.viewer_id is not null then
    delete from public.always_allowed_agents
    where user_id = v_share.owner_id and requester_id = v_share.viewer_id;
    for v_request in
      update relay.pending_requests set settled_at = now(), outcome = 'abandoned'
      where owner_id = v_share.owner_id and requester_id = v_share.viewer_id and settled_at is null
      returning id, owner_id
    loop
      perform private.notify_cancel(v_request.id, v_request.owner_id);
    end loop;
  end if;
  return case when tg_op = 'DELETE' then old else new end;
end;
$$;
comment on function private.end_share() is
  'AFTER UPDATE/DELETE trigger: an ended share cancels the viewer''s waiting requests and drops the owner''s always-allows for that viewer.';
