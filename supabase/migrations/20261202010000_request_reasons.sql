-- =============================================================================
-- The agent says why (issue 29, SPEC §13): a reason travels with the request
-- =============================================================================
-- get_phone_location and POST /v1/locate take an optional reason (the relay cleans it:
-- controls become spaces, bidi controls go, whitespace collapses; at most 120 characters).
-- It waits in relay.pending_requests.ask_reason (UNLOGGED, like the row) and goes out in
-- the ping (private.locate_message) and the push claim (for the alert text); a trigger
-- clears it when the request settles, and a check holds that no settled row keeps one.
-- relay.open_request and relay.open_durable_request take it as a last argument.

alter table relay.pending_requests
  add column ask_reason text check (char_length(ask_reason) between 1 and 120),
  add constraint pending_requests_reason_until_settled check (settled_at is null or ask_reason is null);
comment on column relay.pending_requests.ask_reason is
  'The agent''s reason for asking, shown to the person (cleaned, at most 120 characters); cleared when the request settles.';

-- -----------------------------------------------------------------------------
-- The agent's reason lives only while the request waits
-- -----------------------------------------------------------------------------
-- Every statement that settles a request (an answer, the deadline, a hang-up, the reaper,
-- a revoked share) clears its reason by this trigger, and the table's check holds it.
create or replace function private.forget_ask_reason()
returns trigger
language plpgsql
set search_path = ''
as $$
begin
  new.ask_reason := null;
  return new;
end;
$$;
comment on function private.forget_ask_reason() is
  'Clears relay.pending_requests.ask_reason when a request settles (the reason is never kept after).';
revoke execute on function private.forget_ask_reason() from public, anon, authenticated;

create trigger pending_requests_forget_reason_when_settled
  before update on relay.pending_requests
  for each row when (new.settled_at is not null and new.ask_reason is not null)
  execute function private.forget_ask_reason();

-- The ping and the push claim carry the reason.
create or replace function private.locate_message(p_request relay.pending_requests)
returns jsonb
language plpgsql
stable
security definer
set search_path = ''
as $$
begin
  return jsonb_build_object(
    'id', p_request.id,
    'client_id', p_request.client_id,
    'agent_name', nullif(private.clean_display_text(p_request.client_name, 200), ''),
    'expires_ms', (extract(epoch from p_request.expires_at) * 1000)::bigint,
    'reason', p_request.ask_reason,
    'requester', case when p_request.requester_id is null then null
                      else private.user_card(p_request.requester_id) end);
end;
$$;

create or replace function relay.claim_push(p_id uuid, p_instance text, p_stage text,
  p_per_target int default 30, p_per_account int default 100)
returns jsonb
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_request relay.pending_requests;
  v_always boolean;
  v_kind text;
  v_apns jsonb;
  v_web jsonb;
  v_paid_apns jsonb := '[]';
  v_paid_web jsonb := '[]';
  v_target jsonb;
  v_key text;
  v_account_left int;
begin
  perform private.check_instance_id(p_instance);
  if p_id is null or p_stage is null then
    raise exception 'claim_push needs a request id and a stage' using errcode = '22004';
  end if;
  if p_stage not in ('wake', 'checking') then
    raise exception 'stage must be wake or checking' using errcode = '22023';
  end if;
  if p_per_target is null or p_per_target not between 1 and 1000
     or p_per_account is null or p_per_account not between 1 and 10000 then
    raise exception 'push budgets must be 1 to 1000 per target and 1 to 10000 per account' using errcode = '22023';
  end if;

  select * into v_request from relay.pending_requests where id = p_id for update;
  if not found then
    return jsonb_build_object('status', 'gone');
  end if;
  if v_request.waiter_instance <> p_instance then
    raise exception 'only the waiting instance sends pushes for a request' using errcode = '42501';
  end if;
  if v_request.settled_at is not null then
    return jsonb_build_object('status', 'settled');
  end if;
  if v_request.expires_at <= now() then
    return jsonb_build_object('status', 'expired');
  end if;

  if p_stage = 'wake' then
    if v_request.wake_claimed_at is not null then
      return jsonb_build_object('status', 'already');
    end if;
    begin
      v_always := relay.is_always_allowed(v_request.owner_id, v_request.client_id, v_request.requester_id);
    exception when others then
      v_always := false;  -- a failed read counts as "not always allowed"
    end;
  else
    if v_request.wake_kind is distinct from 'silent' then
      return jsonb_build_object('status', 'not_applicable');
    end if;
    if v_request.checking_claimed_at is not null then
      return jsonb_build_object('status', 'already');
    end if;
  end if;

  select coalesce(jsonb_agg(jsonb_build_object('token', t.token, 'environment', t.environment)), '[]')
    into v_apns from relay.apns_tokens(v_request.owner_id) t;
  select coalesce(jsonb_agg(jsonb_build_object('endpoint', s.endpoint, 'p256dh', s.p256dh, 'auth', s.auth)), '[]')
    into v_web from relay.web_push_subscriptions(v_request.owner_id) s;

  if p_stage = 'checking' then
    v_kind := 'checking';
    update relay.pending_requests set checking_claimed_at = now() where id = p_id;
  else
    if not v_always then
      v_kind := 'alert';
    elsif jsonb_array_length(v_apns) > 0 then
      v_kind := 'silent';
      v_web := '[]';  -- a service worker cannot answer silently: Web Push waits for checking
    else
      v_kind := 'checking';
    end if;
    update relay.pending_requests set wake_kind = v_kind, wake_claimed_at = now() where id = p_id;
  end if;

  -- Pay for each target out of the account's budget (its row locked first) and the
  -- target's own; a target over its own budget costs the account nothing.
  v_account_left := p_per_account - private.recent_pushes('account', v_request.owner_id::text);
  for v_target in select value from jsonb_array_elements(v_apns) loop
    exit when v_account_left <= 0;
    v_key := private.push_target_key('apns', v_target ->> 'token');
    if private.recent_pushes('target', v_key) < p_per_target then
      perform private.record_pushes('target', v_key, 1);
      v_paid_apns := v_paid_apns || v_target;
      v_account_left := v_account_left - 1;
    end if;
  end loop;
  for v_target in select value from jsonb_array_elements(v_web) loop
    exit when v_account_left <= 0;
    v_key := private.push_target_key('web', v_target ->> 'endpoint');
    if private.recent_pushes('target', v_key) < p_per_target then
      perform private.record_pushes('target', v_key, 1);
      v_paid_web := v_paid_web || v_target;
      v_account_left := v_account_left - 1;
    end if;
  end loop;
  perform private.record_pushes('account', v_request.owner_id::text,
                                jsonb_array_length(v_paid_apns) + jsonb_array_length(v_paid_web));

  -- A few rows of targets and accounts not pushed for an hour go (bounded work per claim).
  delete from relay.push_budgets
  where (scope, key) in (select b.scope, b.key from relay.push_budgets b
                         where b.last_at < now() - interval '1 hour' order by b.last_at limit 32);

  return jsonb_build_object(
    'status', 'claimed', 'kind', v_kind, 'apns', v_paid_apns, 'web', v_paid_web,
    'limited', jsonb_build_object('apns', jsonb_array_length(v_apns) - jsonb_array_length(v_paid_apns),
                                  'web', jsonb_array_length(v_web) - jsonb_array_length(v_paid_web)),
    'owner', v_request.owner_id,
    'client_id', v_request.client_id, 'client_name', v_request.client_name, 'reason', v_request.ask_reason,
    'requester', case when v_request.requester_id is null then null
                      else private.user_card(v_request.requester_id) end,
    'expires_ms', (extract(epoch from v_request.expires_at) * 1000)::bigint);
end;
$$;

-- open_request and open_durable_request take the reason (a new last argument).
drop function relay.open_request(uuid, uuid, uuid, text, text, text, bytea, timestamptz, int);
drop function relay.open_durable_request(uuid, uuid, uuid, text, text, uuid, text, bytea, timestamptz, timestamptz, boolean, bytea, int);

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
comment on function relay.open_request(uuid, uuid, uuid, text, text, text, bytea, timestamptz, int, text) is
  'Opens a locate request for OWNER''s phones (NOTIFY whereabot_locate) unless MAX_WAITING are already waiting.';

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

  -- One opener per credential at a time, so that its cap holds under concurrency (taken
  -- before open_request's owner lock, always in this order).
  perform pg_advisory_xact_lock(hashtextextended(
    'whereabot_durable:' || v_user::text || ':' || coalesce(p_client_id, '') || ':' || coalesce(p_key::text, ''), 0));
  select count(*) into v_open from relay.pending_requests r
  where r.resumable and coalesce(r.requester_id, r.owner_id) = v_user and r.client_id = p_client_id
    and r.agent_key_id is not distinct from p_key and r.settled_at is null and r.expires_at > now();
  if v_open >= private.max_durable_requests_per_agent() then
    return jsonb_build_object('status', 'too_many', 'connections', null, 'ping', null);
  end if;
  -- Every get_phone_location call opens one: the count stops at the cap (the partial index
  -- of resumable rows), so it never costs more than that however many there are.
  if (select count(*) from (select from relay.pending_requests where resumable
                            limit private.max_resumable_requests()) kept) >= private.max_resumable_requests() then
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
  'Opens a resumable (and, with p_durable, instance-independent) locate request bound to its credential; at most 20 open per credential.';

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
begin
  perform private.check_instance_id(p_instance);
  if p_requests is null or jsonb_typeof(p_requests) <> 'array' or jsonb_array_length(p_requests) not between 1 and 32 then
    raise exception 'open_requests needs an array of 1 to 32 requests' using errcode = '22023';
  end if;
  v_count := jsonb_array_length(p_requests);
  v_results := array_fill(null::jsonb, array[v_count]);
  for v_element in
    select r.ord, r.value
    from jsonb_array_elements(p_requests) with ordinality r(value, ord)
    order by hashtextextended('whereabot_open_request:' || (r.value ->> 'owner'), 0), r.ord
  loop
    begin
      if jsonb_typeof(v_element.value) <> 'object' then
        raise exception 'a request is an object' using errcode = '22023';
      end if;
      if v_count > 1 and v_element.value ->> 'requester' is not null
         and v_element.value ->> 'requester' <> v_element.value ->> 'owner' then
        raise exception 'a request on someone else''s behalf is opened alone' using errcode = '0A000';
      end if;
      v_results[v_element.ord] := relay.open_request(
        (v_element.value ->> 'id')::uuid, (v_element.value ->> 'owner')::uuid,
        (v_element.value ->> 'requester')::uuid, v_element.value ->> 'client_id',
        v_element.value ->> 'client_name', p_instance, decode(v_element.value ->> 'reply_key', 'base64'),
        to_timestamp((v_element.value ->> 'expires_at')::double precision),
        coalesce((v_element.value ->> 'max_waiting')::int, 5), v_element.value ->> 'reason');
    exception when others then
      v_results[v_element.ord] := jsonb_build_object('status', 'error', 'code', sqlstate);
    end;
  end loop;
  return to_jsonb(v_results);
end;
$$;

revoke execute on function
  relay.open_request(uuid, uuid, uuid, text, text, text, bytea, timestamptz, int, text),
  relay.open_durable_request(uuid, uuid, uuid, text, text, uuid, text, bytea, timestamptz, timestamptz, boolean, bytea, int, text)
  from public, anon, authenticated, service_role;
grant execute on function
  relay.open_request(uuid, uuid, uuid, text, text, text, bytea, timestamptz, int, text),
  relay.open_durable_request(uuid, uuid, uuid, text, text, uuid, text, bytea, timestamptz, timestamptz, boolean, bytea, int, text)
  to whereabot_relay;
