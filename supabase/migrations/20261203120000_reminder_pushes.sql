-- Reminders reach phones that hold no socket (issue 42 part 4, SPEC §14): the settling
-- instance, named as the reminder's pusher, claims its push once
-- (relay.claim_reminder_push, always_allowed_agents.reminder_pushed_at) and sends it to the
-- owner's APNs tokens and Web Push subscriptions within the push budgets, which every push
-- now checks and pays through one function each (private.check_push_budgets,
-- private.pay_for_pushes).

alter table public.always_allowed_agents add column reminder_pushed_at timestamptz;
comment on column public.always_allowed_agents.reminder_pushed_at is
  'When the reminder of reminded_at went out as a push (relay.claim_reminder_push): once per reminder.';

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
  'Claims one push stage of a request for its waiting instance, with the targets its per-target and per-account hourly budgets pay for (a shared request''s out of the requester''s own).';

drop function private.note_always_allowed_use(uuid, text, uuid, int);

create or replace function private.note_always_allowed_use(
  p_owner uuid, p_client_id text, p_requester uuid, p_remind_after_s int, p_pusher text)
returns boolean
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_remind boolean;
  v_name text;
begin
  -- FOR UPDATE reads the row as the last transaction to lock it left it (READ COMMITTED),
  -- and an earlier element of this transaction's batch as it left it: one reminder.
  with due as (
    select a.id, a.expires_at is null and p_remind_after_s is not null
                 and coalesce(a.reminded_at, a.created_at) <= now() - make_interval(secs => p_remind_after_s) as remind
    from public.always_allowed_agents a
    where a.user_id = p_owner and a.client_id = p_client_id and a.requester_id is not distinct from p_requester
      and (a.expires_at is null or a.expires_at > now())
    for update
  )
  update public.always_allowed_agents a
  set last_used_at = now(), reminded_at = case when due.remind then now() else a.reminded_at end
  from due
  where a.id = due.id
  returning due.remind, a.client_name into v_remind, v_name;
  if v_remind then
    perform private.notify_instances(
      array(select distinct i from unnest(private.owner_instances(p_owner) || array_remove(array[p_pusher], null)) i),
      jsonb_build_object(
        'kind', 'reminder', 'owner', p_owner, 'client_id', p_client_id,
        'agent_name', nullif(private.clean_display_text(v_name, 200), ''), 'requester_id', p_requester,
        'pusher', p_pusher));
  end if;
  return coalesce(v_remind, false);
end;
$$;
comment on function private.note_always_allowed_use(uuid, text, uuid, int, text) is
  'A location went to CLIENT_ID under OWNER''s always-allow: marks its last use and, for a for-good row standing REMIND_AFTER_S since made or kept, claims and sends its one reminder (true) to the owner''s instances and to PUSHER, which pushes it.';
revoke execute on function private.note_always_allowed_use(uuid, text, uuid, int, text) from public, anon, authenticated;

create or replace function relay.settle(
  p_id uuid, p_user uuid, p_device uuid, p_outcome text, p_reason text, p_sealed text,
  p_instance text default null, p_remind_after_s int default null)
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
  v_resumable boolean;
  v_watcher text;
  v_client_id text;
  v_requester uuid;
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

  if p_device is not null and not exists (
       select from public.devices where id = p_device and user_id = p_user and revoked_at is null) then
    return 'forbidden';
  end if;

  -- The first answer wins: one statement finds the waiting row of this user and settles
  -- it (a fix crosses Postgres only sealed; it need not cross at all when the answering
  -- phone's instance is the waiter's, which hands it over in process).
  update relay.pending_requests
  set settled_at = now(), outcome = p_outcome, reason = p_reason, answered_by = p_device,
      delivered_at = coalesce(delivered_at, now()),
      keep_until = case when resumable then least(keep_until, now() + interval '10 minutes') end
  where id = p_id and owner_id = p_user and settled_at is null
    and (p_sealed is not null or p_outcome <> 'location' or (waiter_instance = p_instance and not resumable))
  returning waiter_instance, owner_id, resumable, watcher_instance, client_id, requester_id
    into v_waiter, v_owner, v_resumable, v_watcher, v_client_id, v_requester;
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

  if v_resumable and p_sealed is not null then
    -- The agent may come back for it from any instance: the answer is kept (sealed) until
    -- the request's TTL, cut above to at most 10 minutes from now.
    insert into relay.sealed_results (request_id, sealed) values (p_id, p_sealed);
  end if;
  -- Most locations go to agents nobody always allows: one index probe, and the function
  -- (a row lock and an UPDATE, 115 µs a call under the bench's load) only for the others.
  if p_outcome = 'location' and exists (
       select from public.always_allowed_agents where user_id = v_owner and client_id = v_client_id) then
    perform private.note_always_allowed_use(v_owner, v_client_id, v_requester, p_remind_after_s, p_instance);
  end if;

  select coalesce(array_agg(distinct c.instance_id), '{}') into v_holders
  from relay.connections c where c.user_id = v_owner;
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

create or replace function relay.claim_reminder_push(p_owner uuid, p_client_id text, p_requester uuid,
  p_per_target int default 30, p_per_account int default 100)
returns jsonb
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_row public.always_allowed_agents;
  v_apns jsonb;
  v_web jsonb;
begin
  if p_owner is null or p_client_id is null then
    raise exception 'claim_reminder_push needs an owner and a client id' using errcode = '22004';
  end if;
  perform private.check_push_budgets(p_per_target, p_per_account);
  select * into v_row from public.always_allowed_agents a
  where a.user_id = p_owner and a.client_id = p_client_id and a.requester_id is not distinct from p_requester
    and a.expires_at is null
  for update;
  if not found then
    return jsonb_build_object('status', 'gone');
  end if;
  if v_row.reminded_at is null or v_row.reminded_at < now() - interval '1 minute' then
    return jsonb_build_object('status', 'not_applicable');
  end if;
  if v_row.reminder_pushed_at >= v_row.reminded_at then
    return jsonb_build_object('status', 'already');
  end if;
  update public.always_allowed_agents set reminder_pushed_at = now() where id = v_row.id;

  select coalesce(jsonb_agg(jsonb_build_object('token', t.token, 'environment', t.environment)), '[]')
    into v_apns from relay.apns_tokens(p_owner) t;
  select coalesce(jsonb_agg(jsonb_build_object('endpoint', s.endpoint, 'p256dh', s.p256dh, 'auth', s.auth)), '[]')
    into v_web from relay.web_push_subscriptions(p_owner) s;
  return private.pay_for_pushes(v_apns, v_web, p_owner, p_requester, p_per_target, p_per_account)
    || jsonb_build_object('status', 'claimed', 'owner', p_owner);
end;
$$;
comment on function relay.claim_reminder_push(uuid, text, uuid, int, int) is
  'The pusher of a reminder (SPEC §14) claims its push once, with the owner''s targets its per-target and per-account hourly budgets pay for.';

revoke execute on function relay.claim_reminder_push(uuid, text, uuid, int, int) from public, anon, authenticated, service_role;
grant execute on function relay.claim_reminder_push(uuid, text, uuid, int, int) to whereabot_relay;
