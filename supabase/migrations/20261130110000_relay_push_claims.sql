-- =============================================================================
-- Relay push claims: each push stage of a request goes out once, across instances
-- =============================================================================
-- The instance waiting for a request (its waiter) is its only push sender. Before each
-- stage (wake, then checking after a silent wake) it claims the stage here; the claim
-- locks the request row, records the stage and returns a snapshot of the targets, so a
-- second claim — a timer race, a second scheduling, a resend — finds it taken. A row
-- re-created after a Postgres crash has no claims; the waiter remembers its own (PUSH.md §2).

alter table relay.pending_requests
  add column if not exists wake_kind text check (wake_kind in ('alert', 'silent', 'checking')),
  add column if not exists wake_claimed_at timestamptz,
  add column if not exists checking_claimed_at timestamptz;
comment on column relay.pending_requests.wake_kind is
  'Which wake push was claimed: alert (asks), silent (always allowed, APNs only) or checking (always allowed, no APNs token).';
comment on column relay.pending_requests.wake_claimed_at is 'When the wake push stage was claimed.';
comment on column relay.pending_requests.checking_claimed_at is
  'When the checking alert was claimed (only after a silent wake).';

alter table relay.pending_requests drop constraint if exists pending_requests_wake_kind_with_time;
alter table relay.pending_requests add constraint pending_requests_wake_kind_with_time
  check ((wake_kind is null) = (wake_claimed_at is null));
alter table relay.pending_requests drop constraint if exists pending_requests_checking_after_silent_wake;
alter table relay.pending_requests add constraint pending_requests_checking_after_silent_wake
  check (checking_claimed_at is null or wake_kind = 'silent');

-- -----------------------------------------------------------------------------
-- relay.claim_push(id, instance, stage) → {status, kind, apns, web, …payload fields}
-- -----------------------------------------------------------------------------
-- status: claimed (send to the targets listed), already (claimed before), settled,
-- expired, gone (no row), not_applicable (checking without a silent wake).
-- Only the waiter may claim (42501). Targets: apns [{token, environment}], web
-- [{endpoint, p256dh, auth}]; devices that were removed get nothing.
create or replace function relay.claim_push(p_id uuid, p_instance text, p_stage text)
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
begin
  perform private.check_instance_id(p_instance);
  if p_id is null or p_stage is null then
    raise exception 'claim_push needs a request id and a stage' using errcode = '22004';
  end if;
  if p_stage not in ('wake', 'checking') then
    raise exception 'stage must be wake or checking' using errcode = '22023';
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

  return jsonb_build_object(
    'status', 'claimed', 'kind', v_kind, 'apns', v_apns, 'web', v_web,
    'client_id', v_request.client_id, 'client_name', v_request.client_name,
    'requester', case when v_request.requester_id is null then null
                      else private.user_card(v_request.requester_id) end,
    'expires_ms', (extract(epoch from v_request.expires_at) * 1000)::bigint);
end;
$$;
comment on function relay.claim_push(uuid, text, text) is
  'Claims push stage STAGE (wake or checking) of request ID for its waiter INSTANCE, once; returns the targets to push to.';

-- -----------------------------------------------------------------------------
-- relay.drop_apns_token(token, unregistered_at): honour APNs' 410 timestamp
-- -----------------------------------------------------------------------------
-- APNs' 410 carries the time it learnt the token was dead; a token the app registered
-- again after that time is live and kept.
drop function if exists relay.drop_apns_token(text);
create or replace function relay.drop_apns_token(p_token text, p_unregistered_at timestamptz default null)
returns boolean
language plpgsql
security definer
set search_path = ''
as $$
begin
  if p_token is null then
    raise exception 'drop_apns_token needs a token' using errcode = '22004';
  end if;
  delete from public.push_tokens
  where token = p_token and (p_unregistered_at is null or created_at <= p_unregistered_at);
  return found;
end;
$$;
comment on function relay.drop_apns_token(text, timestamptz) is
  'Deletes an APNs token that APNs called dead (400 BadDeviceToken, 410); with UNREGISTERED_AT only if it was stored no later.';

revoke execute on function relay.claim_push(uuid, text, text), relay.drop_apns_token(text, timestamptz)
  from public, anon, authenticated, service_role;
grant execute on function relay.claim_push(uuid, text, text), relay.drop_apns_token(text, timestamptz)
  to whereabot_relay;
