-- One re-alert (SPEC §14, issue 42 part 5): an unanswered request whose alert went out gets
-- one more alert push after REALERT_SECONDS, claimed once (relay.claim_push, stage
-- realert) like every other push stage.

alter table relay.pending_requests add column realert_claimed_at timestamptz;
alter table relay.pending_requests add constraint pending_requests_realert_after_wake
  check (realert_claimed_at is null or wake_kind is not null);
comment on column relay.pending_requests.realert_claimed_at is
  'When the one re-alert of an unanswered request was claimed (SPEC §14).';

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
  v_account text;
  v_account_left int;
begin
  perform private.check_instance_id(p_instance);
  if p_id is null or p_stage is null then
    raise exception 'claim_push needs a request id and a stage' using errcode = '22004';
  end if;
  if p_stage not in ('wake', 'checking', 'realert') then
    raise exception 'stage must be wake, checking or realert' using errcode = '22023';
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

  select coalesce(jsonb_agg(jsonb_build_object('token', t.token, 'environment', t.environment)), '[]')
    into v_apns from relay.apns_tokens(v_request.owner_id) t;
  select coalesce(jsonb_agg(jsonb_build_object('endpoint', s.endpoint, 'p256dh', s.p256dh, 'auth', s.auth)), '[]')
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

  -- Pay for each target out of the account's budget (its row locked first) and the
  -- target's own; a target over its own budget costs the account nothing. A request made
  -- through a share pays out of budgets of the requester's own for the owner's account and
  -- targets (private.push_budget_key), so a viewer can never spend the owner's.
  v_account := private.push_budget_key(v_request.owner_id::text, v_request.requester_id);
  v_account_left := p_per_account - private.recent_pushes('account', v_account);
  for v_target in select value from jsonb_array_elements(v_apns) loop
    exit when v_account_left <= 0;
    v_key := private.push_budget_key(private.push_target_key('apns', v_target ->> 'token'), v_request.requester_id);
    if private.recent_pushes('target', v_key) < p_per_target then
      perform private.record_pushes('target', v_key, 1);
      v_paid_apns := v_paid_apns || v_target;
      v_account_left := v_account_left - 1;
    end if;
  end loop;
  for v_target in select value from jsonb_array_elements(v_web) loop
    exit when v_account_left <= 0;
    v_key := private.push_budget_key(private.push_target_key('web', v_target ->> 'endpoint'), v_request.requester_id);
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
comment on function relay.claim_push(uuid, text, text, int, int) is
  'Claims one push stage of a request for its waiting instance, with the targets its per-target and per-account hourly budgets pay for (a shared request''s out of the requester''s own).';
