-- =============================================================================
-- Relay requests: open, deliver, settle, finish
-- =============================================================================
-- A request's life: open_request (the locate goes to the instances holding the owner's
-- sockets) → mark_delivered when a phone got the ping → settle by the first answer (the
-- answer to the waiter's channel, the cancel to the holders') or finish by the waiter at its
-- deadline or when the agent hung up (the cancel). Every change and its NOTIFY happen in
-- one transaction; the calling instance is never notified of its own work.
--
-- A phone's hello and a request for its user are serialized by the owner's advisory lock:
-- either the hello's socket row is committed when open_request reads where the owner's
-- sockets are, or the request is committed when the hello reads the pending pings.

-- -----------------------------------------------------------------------------
-- relay.open_request(...) → {status, connections, ping}
-- -----------------------------------------------------------------------------
-- status: opened, too_many (max_waiting requests already wait: nothing was opened), exists
-- (a row with this id exists: nothing changed; re-creating a row lost in a crash inserts it
-- again), quiet (the owner is in quiet hours and the agent may not wake them: nothing was
-- opened; quiet = {until, until_ms, local (HH:MM, the owner's time), time_zone, name}). The owner's own agents have the cap to themselves, each requester's requests for
-- one owner have it too, and a requester's waiting requests across all owners are capped
-- as well, so someone the owner shares with can never keep the owner's own agents out.
-- connections: how many sockets of the owner are live now (0: push at once). ping: the
-- message for the caller's own sockets of the owner (else null); the other holders are
-- notified. A requester other than the owner needs an active share from the owner. The
-- instance's row is never created here (relay.heartbeat re-creates a reaped one). reason:
-- the agent's words for the person (cleaned of controls and invisible characters, at most
-- 120 characters), kept only until the request settles and shown in the ping.
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
comment on function relay.open_request(uuid, uuid, uuid, text, text, text, bytea, timestamptz, int, text) is
  'Opens a locate request for OWNER''s phones (NOTIFY whereabot_locate) unless MAX_WAITING are already waiting.';

-- -----------------------------------------------------------------------------
-- relay.mark_delivered(ids) → how many waiting requests were marked
-- -----------------------------------------------------------------------------
-- The holder marks the pings it sent in batches, off the locate's path.
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
  -- The rows are locked in id order, as relay.settle_many takes them, so that the two
  -- never wait for each other in a cycle; then updated by the same ids. Both statements
  -- look each id up (a join with unnest): a join with the locking subquery could be
  -- planned as a loop over the batch for every row, which stale statistics (after a burst
  -- of settled requests) made take 30 s for 10,000 ids in a reconnect storm.
  perform 1 from relay.pending_requests p join unnest(p_ids) as u (id) on p.id = u.id
  where p.settled_at is null and p.delivered_at is null
  order by p.id
  for update of p;
  update relay.pending_requests r
  set delivered_at = now()
  from unnest(p_ids) as u (id)
  where r.id = u.id and r.settled_at is null and r.delivered_at is null;
  get diagnostics v_count = row_count;
  return v_count;
end;
$$;
comment on function relay.mark_delivered(uuid[]) is
  'Records that a device got these pings (for 504 rather than 503 at the deadline).';

-- -----------------------------------------------------------------------------
-- relay.settle(id, user, device, outcome, reason, sealed, instance) → settled | gone | forbidden
-- -----------------------------------------------------------------------------
-- The first answer wins. forbidden: the request or the device belongs to another user (or
-- the device was removed). gone: no request waits under this id. An answer proves the ping
-- was delivered. The answer goes to the waiter's channel (and a durable request's watcher),
-- the cancel to the channels of the instances holding the owner's sockets — one
-- notification where they are the same instance, none to `p_instance`, the caller, which
-- delivers and cancels in process. A null p_instance (psql, tests) notifies every instance
-- concerned.
--
-- Sealing exists so that a location crosses Postgres only as ciphertext on its way from
-- the instance holding the answering phone to the instance holding the agent. When they
-- are one instance the fix does not cross Postgres at all: the relay hands it over in
-- process and settles with `outcome = 'location'` and no `sealed`. A location without
-- `sealed` from any other caller is refused (22023), and so is one for a resumable
-- request, whose reply key is derived from the agent's request_id (the waiting instance
-- may no longer hold it): its ciphertext is stored in relay.sealed_results and its
-- keep_until cut to at most 10 minutes from now.
--
-- The waiting row is found and settled by one UPDATE ... RETURNING; only a refused answer
-- reads it again to say why. A location marks the use of the owner's always-allow of the
-- agent, if any, and may claim its reminder (p_remind_after_s: the relay's
-- GRANT_REMINDER_DAYS in seconds; null: no reminders), which p_instance pushes:
-- private.note_always_allowed_use.
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
comment on function relay.settle(uuid, uuid, uuid, text, text, text, text, int) is
  'First answer wins: records it, sends the answer to the waiter''s channel and the cancel to the holders'' (never to p_instance, the caller). A location comes sealed unless p_instance is the waiter''s, and marks the use of the agent''s always-allow (a reminder after REMIND_AFTER_S).';

-- -----------------------------------------------------------------------------
-- relay.finish(id, instance, outcome) → {status, delivered, outcome, reason}
-- -----------------------------------------------------------------------------
-- The waiter ends its own request at the deadline (expired) or when the agent hung up
-- (abandoned). status: finished (the holders get the cancel), already_settled (an answer won
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
  perform private.notify_cancel(p_id, v_request.owner_id);
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

-- -----------------------------------------------------------------------------
-- relay.reply_key(id, user): the key a holder seals a phone's answer to
-- -----------------------------------------------------------------------------
-- For POST /v1/device/answer: the instance holding the answering phone reads the waiter's
-- per-request X25519 public key and seals the fix to it (pings carry it otherwise).
create or replace function relay.reply_key(p_id uuid, p_user uuid)
returns bytea
language plpgsql
stable
security definer
set search_path = ''
as $$
begin
  if p_id is null or p_user is null then
    raise exception 'reply_key needs a request id and a user id' using errcode = '22004';
  end if;
  return (select r.reply_key from relay.pending_requests r
          where r.id = p_id and r.owner_id = p_user and r.settled_at is null);
end;
$$;
comment on function relay.reply_key(uuid, uuid) is
  'The waiter''s public key of request ID if it still waits for USER''s phones, else null.';

revoke execute on function
  relay.open_request(uuid, uuid, uuid, text, text, text, bytea, timestamptz, int, text),
  relay.mark_delivered(uuid[]),
  relay.settle(uuid, uuid, uuid, text, text, text, text, int),
  relay.finish(uuid, text, text),
  relay.request_states(uuid[]),
  relay.reply_key(uuid, uuid)
  from public, anon, authenticated, service_role;
grant execute on function
  relay.open_request(uuid, uuid, uuid, text, text, text, bytea, timestamptz, int, text),
  relay.mark_delivered(uuid[]),
  relay.settle(uuid, uuid, uuid, text, text, text, text, int),
  relay.finish(uuid, text, text),
  relay.request_states(uuid[]),
  relay.reply_key(uuid, uuid)
  to whereabot_relay;
