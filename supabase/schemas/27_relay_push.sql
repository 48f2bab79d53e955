-- =============================================================================
-- Relay push: claims, budgets, targets, dropping dead targets
-- =============================================================================
-- The instance waiting for a request (its waiter) is its only push sender. Before each
-- stage (wake, then checking after a silent wake) it claims the stage (relay.claim_push):
-- the claim locks the request row, records the stage and returns a snapshot of the
-- targets, so a second claim — a timer race, a second scheduling, a resend — finds it
-- taken.
--
-- A claim also spends budgets, whatever agents do (ask, hang up, ask again; issue 22):
-- * per target (an APNs token or a push endpoint): at most p_per_target pushes in any
--   rolling hour (30 by default);
-- * per account (the owner whose phones are pushed): at most p_per_account pushes in any
--   rolling hour (100 by default), counted per target pushed.
-- The relay passes both (PUSH_PER_TARGET_PER_HOUR, PUSH_PER_ACCOUNT_PER_HOUR). A claim
-- returns only the targets it could pay for and says how many it held back
-- ({"limited": {"apns": n, "web": m}}); the stage is claimed either way, so a held-back
-- push is never sent later for the same request.

-- -----------------------------------------------------------------------------
-- relay.is_always_allowed(owner, client_id, requester) → boolean
-- -----------------------------------------------------------------------------
-- Decides only which push goes out (silent or alert); the phone checks its own list
-- again before it answers without asking. An expired choice is no choice.
create or replace function relay.is_always_allowed(p_owner uuid, p_client_id text, p_requester uuid)
returns boolean
language plpgsql
stable
security definer
set search_path = ''
as $$
begin
  if p_owner is null or p_client_id is null then
    raise exception 'is_always_allowed needs an owner and a client id' using errcode = '22004';
  end if;
  return exists (
    select from public.always_allowed_agents a
    where a.user_id = p_owner and a.client_id = p_client_id
      and a.requester_id is not distinct from nullif(p_requester, p_owner)
      and (a.expires_at is null or a.expires_at > now()));
end;
$$;
comment on function relay.is_always_allowed(uuid, text, uuid) is
  'Whether OWNER always allows agent CLIENT_ID (for REQUESTER''s requests when shared).';

-- -----------------------------------------------------------------------------
-- Push targets of an owner (devices that were removed get no push)
-- -----------------------------------------------------------------------------
create or replace function relay.apns_tokens(p_owner uuid)
returns table (token text, environment text, language text)
language plpgsql
stable
security definer
set search_path = ''
as $$
begin
  if p_owner is null then
    raise exception 'apns_tokens needs an owner' using errcode = '22004';
  end if;
  return query
    select t.token, t.environment, t.language
    from public.push_tokens t
    left join public.devices d on d.id = t.device_id
    where t.user_id = p_owner and d.revoked_at is null
    order by t.created_at;
end;
$$;
comment on function relay.apns_tokens(uuid) is 'APNs tokens of OWNER''s devices that were not removed, with the language each registered in.';

create or replace function relay.web_push_subscriptions(p_owner uuid)
returns table (endpoint text, p256dh text, auth text, language text)
language plpgsql
stable
security definer
set search_path = ''
as $$
begin
  if p_owner is null then
    raise exception 'web_push_subscriptions needs an owner' using errcode = '22004';
  end if;
  return query
    select s.endpoint, s.p256dh, s.auth, s.language
    from public.web_push_subscriptions s
    left join public.devices d on d.id = s.device_id
    where s.user_id = p_owner and d.revoked_at is null
    order by s.created_at;
end;
$$;
comment on function relay.web_push_subscriptions(uuid) is
  'Web Push subscriptions of OWNER''s devices that were not removed, with the language each registered in.';

-- -----------------------------------------------------------------------------
-- Dead targets
-- -----------------------------------------------------------------------------
-- APNs' 410 carries the time it learnt the token was dead; a token the app registered
-- again after that time is live and kept.
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

create or replace function relay.drop_web_push_subscription(p_endpoint text)
returns boolean
language plpgsql
security definer
set search_path = ''
as $$
begin
  if p_endpoint is null then
    raise exception 'drop_web_push_subscription needs an endpoint' using errcode = '22004';
  end if;
  delete from public.web_push_subscriptions where endpoint = p_endpoint;
  return found;
end;
$$;
comment on function relay.drop_web_push_subscription(text) is
  'Deletes a Web Push subscription whose push service answered 404 or 410; false when already gone.';

-- -----------------------------------------------------------------------------
-- relay.push_budgets: the pushes of the last hour, per target and per account
-- -----------------------------------------------------------------------------
-- Per target and per account, the times of the pushes of the last hour (at most the
-- budget's number of them): a rolling window, not a fixed one that would let twice the
-- budget through across a boundary. UNLOGGED like all relay state: a Postgres crash
-- forgets the last hour's sends. Rows whose last push is over an hour old are removed a few
-- at a time by later claims, so the table holds about one row per target and account
-- pushed in the last hour. No token or endpoint is stored: targets are keyed by SHA-256.
create unlogged table relay.push_budgets (
  scope text not null check (scope in ('target', 'account')),
  key text not null check (char_length(key) <= 64),
  sent_at timestamptz[] not null default '{}' check (cardinality(sent_at) <= 10000),
  last_at timestamptz not null default now(),
  primary key (scope, key)
);
comment on table relay.push_budgets is
  'Pushes of the last hour per target (sha256 of a token or endpoint) and per account: what relay.claim_push may still send.';
create index push_budgets_last_at_idx on relay.push_budgets (last_at);
comment on index relay.push_budgets_last_at_idx is 'relay.claim_push: the rows of targets and accounts not pushed for an hour, oldest first.';
alter table relay.push_budgets enable row level security;
revoke all on relay.push_budgets from public, anon, authenticated, service_role;

-- recent_pushes takes the row's lock (claims of one account wait for each other: a claim
-- locks its account's row before any target's), drops the sends older than an hour and
-- returns how many are left; record_pushes adds n sends now.
create or replace function private.recent_pushes(p_scope text, p_key text)
returns int
language plpgsql
set search_path = ''
as $$
declare
  v_recent timestamptz[];
begin
  insert into relay.push_budgets (scope, key) values (p_scope, p_key) on conflict do nothing;
  select array(select t from unnest(b.sent_at) t where t > now() - interval '1 hour' order by t)
  into v_recent
  from relay.push_budgets b where b.scope = p_scope and b.key = p_key
  for update;
  update relay.push_budgets set sent_at = v_recent where scope = p_scope and key = p_key
    and cardinality(sent_at) <> cardinality(v_recent);
  return cardinality(v_recent);
end;
$$;
comment on function private.recent_pushes(text, text) is
  'Pushes of the last hour to a target (sha256 key) or an account; locks its budget row.';
revoke execute on function private.recent_pushes(text, text) from public, anon, authenticated;

create or replace function private.record_pushes(p_scope text, p_key text, p_count int)
returns void
language sql
set search_path = ''
as $$
  update relay.push_budgets
  set sent_at = sent_at || array_fill(now(), array[p_count]), last_at = now()
  where scope = p_scope and key = p_key and p_count > 0
$$;
comment on function private.record_pushes(text, text, int) is
  'Records COUNT pushes now against a target''s or an account''s budget.';
revoke execute on function private.record_pushes(text, text, int) from public, anon, authenticated;

-- A target's key: SHA-256 of its kind and token or endpoint (no token is stored twice).
create or replace function private.push_target_key(p_kind text, p_target text)
returns text
language sql
immutable
set search_path = ''
as $$ select encode(sha256(convert_to(p_kind || ':' || p_target, 'UTF8')), 'hex') $$;
comment on function private.push_target_key(text, text) is 'The budget key of an APNs token (apns) or a push endpoint (web).';
revoke execute on function private.push_target_key(text, text) from public, anon, authenticated;

-- The budget key of a target or an account for a request of REQUESTER (null: the owner's
-- own agents, whose keys are the target's or the account's as they are): a viewer's pushes
-- are counted apart from the owner's, so a viewer asking again and again never silences
-- the owner's own agents.
create or replace function private.push_budget_key(p_key text, p_requester uuid)
returns text
language sql
immutable
set search_path = ''
as $$
  select case when p_requester is null then p_key
              else encode(sha256(convert_to(p_key || ':' || p_requester::text, 'UTF8')), 'hex') end
$$;
comment on function private.push_budget_key(text, uuid) is
  'The push budget key of a target or an account for a request of a requester (null: the owner''s own): a viewer''s budgets are their own.';
revoke execute on function private.push_budget_key(text, uuid) from public, anon, authenticated;

-- The push budgets a caller passes (the relay's PUSH_PER_TARGET_PER_HOUR and
-- PUSH_PER_ACCOUNT_PER_HOUR), range-checked before any claim.
create or replace function private.check_push_budgets(p_per_target int, p_per_account int)
returns void
language plpgsql
set search_path = ''
as $$
begin
  if p_per_target is null or p_per_target not between 1 and 1000
     or p_per_account is null or p_per_account not between 1 and 10000 then
    raise exception 'push budgets must be 1 to 1000 per target and 1 to 10000 per account' using errcode = '22023';
  end if;
end;
$$;
comment on function private.check_push_budgets(int, int) is
  'Refuses push budgets outside 1-1000 per target and 1-10000 per account (22023).';
revoke execute on function private.check_push_budgets(int, int) from public, anon, authenticated;

-- -----------------------------------------------------------------------------
-- private.pay_for_pushes(apns, web, owner, requester, per_target, per_account)
-- -----------------------------------------------------------------------------
-- Pays for each target out of the account's budget (its row locked first) and the
-- target's own; a target over its own budget costs the account nothing. A push for a
-- request made through a share (REQUESTER set) pays out of budgets of the requester's own
-- for the owner's account and targets (private.push_budget_key), so a viewer can never
-- spend the owner's. Returns {apns, web, limited: {apns, web}}: the targets paid for and
-- how many of each service the budgets held back. Every push stage (relay.claim_push) and
-- every reminder (relay.claim_reminder_push) pays here.
create or replace function private.pay_for_pushes(p_apns jsonb, p_web jsonb, p_owner uuid, p_requester uuid,
  p_per_target int, p_per_account int)
returns jsonb
language plpgsql
set search_path = ''
as $$
declare
  v_paid_apns jsonb := '[]';
  v_paid_web jsonb := '[]';
  v_target jsonb;
  v_key text;
  v_account text;
  v_account_left int;
begin
  v_account := private.push_budget_key(p_owner::text, p_requester);
  v_account_left := p_per_account - private.recent_pushes('account', v_account);
  for v_target in select value from jsonb_array_elements(p_apns) loop
    exit when v_account_left <= 0;
    v_key := private.push_budget_key(private.push_target_key('apns', v_target ->> 'token'), p_requester);
    if private.recent_pushes('target', v_key) < p_per_target then
      perform private.record_pushes('target', v_key, 1);
      v_paid_apns := v_paid_apns || v_target;
      v_account_left := v_account_left - 1;
    end if;
  end loop;
  for v_target in select value from jsonb_array_elements(p_web) loop
    exit when v_account_left <= 0;
    v_key := private.push_budget_key(private.push_target_key('web', v_target ->> 'endpoint'), p_requester);
    if private.recent_pushes('target', v_key) < p_per_target then
      perform private.record_pushes('target', v_key, 1);
      v_paid_web := v_paid_web || v_target;
      v_account_left := v_account_left - 1;
    end if;
  end loop;
  perform private.record_pushes('account', v_account,
                                jsonb_array_length(v_paid_apns) + jsonb_array_length(v_paid_web));

  -- A few rows of targets and accounts not pushed for an hour go (bounded work per claim).
  delete from relay.push_budgets
  where (scope, key) in (select b.scope, b.key from relay.push_budgets b
                         where b.last_at < now() - interval '1 hour' order by b.last_at limit 32);

  return jsonb_build_object(
    'apns', v_paid_apns, 'web', v_paid_web,
    'limited', jsonb_build_object('apns', jsonb_array_length(p_apns) - jsonb_array_length(v_paid_apns),
                                  'web', jsonb_array_length(p_web) - jsonb_array_length(v_paid_web)));
end;
$$;
comment on function private.pay_for_pushes(jsonb, jsonb, uuid, uuid, int, int) is
  'Pays for push targets out of the hourly per-target and per-account budgets (a requester''s own for a shared request): the targets paid for and how many were held back.';
revoke execute on function private.pay_for_pushes(jsonb, jsonb, uuid, uuid, int, int) from public, anon, authenticated;

-- -----------------------------------------------------------------------------
-- relay.claim_push(id, instance, stage, per_target, per_account)
-- -----------------------------------------------------------------------------
-- status: claimed (send to the targets listed), already (claimed before), settled,
-- expired, gone (no row), not_applicable (checking without a silent wake; or the owner is
-- in quiet hours the agent may not wake them in, with quiet = {until, local, time_zone},
-- nothing claimed). Only the waiter
-- may claim (42501). Targets: apns [{token, environment}], web [{endpoint, p256dh, auth}];
-- devices that were removed get nothing. The answer names the owner (the relay queues
-- pushes fairly per account).
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
  v_quiet jsonb;
begin
  perform private.check_instance_id(p_instance);
  if p_id is null or p_stage is null then
    raise exception 'claim_push needs a request id and a stage' using errcode = '22004';
  end if;
  if p_stage not in ('wake', 'checking', 'realert') then
    raise exception 'stage must be wake, checking or realert' using errcode = '22023';
  end if;
  perform private.check_push_budgets(p_per_target, p_per_account);

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
  elsif p_stage = 'checking' then
    if v_request.wake_kind is distinct from 'silent' then
      return jsonb_build_object('status', 'not_applicable');
    end if;
    if v_request.checking_claimed_at is not null then
      return jsonb_build_object('status', 'already');
    end if;
  else
    -- One re-alert (SPEC §14) after an alert that went unanswered, while at least 20 s of
    -- the request remain; never after a silent wake alone (the person was not asked).
    if v_request.wake_kind is null or (v_request.wake_kind = 'silent' and v_request.checking_claimed_at is null)
       or v_request.expires_at - now() < interval '20 seconds' then
      return jsonb_build_object('status', 'not_applicable');
    end if;
    if v_request.realert_claimed_at is not null then
      return jsonb_build_object('status', 'already');
    end if;
  end if;
  -- Quiet hours hold for a request opened before them (docs/agents.md, "Quiet hours"):
  -- every stage asks private.quiet_until again, as relay.open_request does, and nothing is
  -- pushed while the agent may not wake the owner. The stage stays unclaimed and the
  -- request open: the phone gets its ping after the window.
  v_quiet := private.quiet_until(v_request.owner_id, v_request.client_id, v_request.requester_id, now());
  if v_quiet is not null then
    return jsonb_build_object('status', 'not_applicable', 'quiet', v_quiet);
  end if;

  select coalesce(jsonb_agg(jsonb_build_object('token', t.token, 'environment', t.environment, 'language', t.language)), '[]')
    into v_apns from relay.apns_tokens(v_request.owner_id) t;
  select coalesce(jsonb_agg(jsonb_build_object('endpoint', s.endpoint, 'p256dh', s.p256dh, 'auth', s.auth, 'language', s.language)), '[]')
    into v_web from relay.web_push_subscriptions(v_request.owner_id) s;

  if p_stage = 'checking' then
    v_kind := 'checking';
    update relay.pending_requests set checking_claimed_at = now() where id = p_id;
  elsif p_stage = 'realert' then
    v_kind := 'alert';
    update relay.pending_requests set realert_claimed_at = now() where id = p_id;
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

  -- The targets the budgets pay for (private.pay_for_pushes), and what the payloads need.
  return private.pay_for_pushes(v_apns, v_web, v_request.owner_id, v_request.requester_id, p_per_target, p_per_account)
    || jsonb_build_object(
      'status', 'claimed', 'kind', v_kind, 'owner', v_request.owner_id,
      'client_id', v_request.client_id, 'client_name', v_request.client_name, 'reason', v_request.ask_reason,
      'requester', case when v_request.requester_id is null then null
                        else private.user_card(v_request.requester_id) end,
      'expires_ms', (extract(epoch from v_request.expires_at) * 1000)::bigint);
end;
$$;
comment on function relay.claim_push(uuid, text, text, int, int) is
  'Claims one push stage of a request for its waiting instance, with the targets its per-target and per-account hourly budgets pay for (a shared request''s out of the requester''s own); nothing while quiet hours hold for its agent.';

-- The relay calls claim_push, drop_apns_token and drop_web_push_subscription; claim_push
-- reads is_always_allowed, apns_tokens and web_push_subscriptions, which the relay's role
-- may execute as well.
revoke execute on function relay.is_always_allowed(uuid, text, uuid), relay.apns_tokens(uuid),
  relay.web_push_subscriptions(uuid), relay.drop_apns_token(text, timestamptz),
  relay.drop_web_push_subscription(text), relay.claim_push(uuid, text, text, int, int)
  from public, anon, authenticated, service_role;
grant execute on function relay.is_always_allowed(uuid, text, uuid), relay.apns_tokens(uuid),
  relay.web_push_subscriptions(uuid), relay.drop_apns_token(text, timestamptz),
  relay.drop_web_push_subscription(text), relay.claim_push(uuid, text, text, int, int)
  to whereabot_relay;
