-- Notifications in the person's language (README.md, "Push"): a Web Push subscription and
-- an APNs token carry the language their device registered in, the push claims hand it to
-- the relay with each target, and the relay writes each notification in it from the same
-- catalog the page uses (Sources/Relay/Resources/app/strings.json; English when it has no
-- texts in that language).

alter table public.push_tokens add column language text not null default 'en'
  constraint push_tokens_language_check check (language ~ '^[a-z]{2}$');
comment on column public.push_tokens.language is
  'The language (ISO 639-1) the app asked its notifications in; the relay writes English for one it has no texts in.';

alter table public.web_push_subscriptions add column language text not null default 'en'
  constraint web_push_subscriptions_language_check check (language ~ '^[a-z]{2}$');
comment on column public.web_push_subscriptions.language is
  'The language (ISO 639-1) the page subscribed in; the relay writes English for one it has no texts in.';

drop function relay.apns_tokens(uuid);
drop function relay.web_push_subscriptions(uuid);
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

revoke execute on function relay.apns_tokens(uuid), relay.web_push_subscriptions(uuid)
  from public, anon, authenticated, service_role;
grant execute on function relay.apns_tokens(uuid), relay.web_push_subscriptions(uuid) to whereabot_relay;

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

  select coalesce(jsonb_agg(jsonb_build_object('token', t.token, 'environment', t.environment, 'language', t.language)), '[]')
    into v_apns from relay.apns_tokens(p_owner) t;
  select coalesce(jsonb_agg(jsonb_build_object('endpoint', s.endpoint, 'p256dh', s.p256dh, 'auth', s.auth, 'language', s.language)), '[]')
    into v_web from relay.web_push_subscriptions(p_owner) s;
  return private.pay_for_pushes(v_apns, v_web, p_owner, p_requester, p_per_target, p_per_account)
    || jsonb_build_object('status', 'claimed', 'owner', p_owner);
end;
$$;
comment on function relay.claim_reminder_push(uuid, text, uuid, int, int) is
  'The pusher of a reminder (SPEC §14) claims its push once, with the owner''s targets its per-target and per-account hourly budgets pay for.';

drop function relay.save_web_push_subscription(uuid, uuid, text, text, text, text[]);
create or replace function relay.save_web_push_subscription(
  p_user uuid, p_device uuid, p_endpoint text, p_p256dh text, p_auth text, p_extra_origins text[] default '{}',
  p_language text default 'en')
returns text
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_saved boolean;
begin
  if p_user is null or p_device is null then
    raise exception 'save_web_push_subscription needs a user and a device' using errcode = '22004';
  end if;
  if cardinality(p_extra_origins) > 20 then
    raise exception 'at most 20 extra origins' using errcode = '22023';
  end if;
  if p_language is null or p_language !~ '^[a-z]{2}$' then
    raise exception 'language must be two lowercase letters (ISO 639-1)' using errcode = '22023';
  end if;
  if not exists (select from public.devices where id = p_device and user_id = p_user and revoked_at is null) then
    return 'refused:device';
  end if;
  if p_endpoint is null or not private.is_push_endpoint_allowed(p_endpoint, p_extra_origins) then
    return 'refused:endpoint_not_allowed';
  end if;
  if p_p256dh is null or p_p256dh !~ '^[A-Za-z0-9_-]{87}=?$' or p_auth is null or p_auth !~ '^[A-Za-z0-9_-]{22}(==)?$' then
    return 'refused:invalid';
  end if;
  -- The account's own endpoint again (the browser subscribed again): new keys, no new row.
  update public.web_push_subscriptions set p256dh = p_p256dh, auth = p_auth, device_id = p_device, language = p_language
  where endpoint = p_endpoint and user_id = p_user;
  if found then
    return 'saved';
  end if;
  begin
    -- A row that appeared meanwhile is updated only if it is this account's.
    insert into public.web_push_subscriptions as s (endpoint, p256dh, auth, user_id, device_id, language)
    values (p_endpoint, p_p256dh, p_auth, p_user, p_device, p_language)
    on conflict (endpoint) do update
      set p256dh = excluded.p256dh, auth = excluded.auth, device_id = excluded.device_id, language = excluded.language
      where s.user_id = excluded.user_id
    returning true into v_saved;
  exception when sqlstate '54000' then
    return 'refused:limit';
  end;
  return case when v_saved then 'saved' else 'refused:taken' end;
end;
$$;
comment on function relay.save_web_push_subscription(uuid, uuid, text, text, text, text[], text) is
  'Stores the Web Push subscription of USER''s DEVICE (its phone socket sent it) and the language its notifications are written in; the endpoint must be a known push service and not another account''s.';

revoke execute on function relay.save_web_push_subscription(uuid, uuid, text, text, text, text[], text)
  from public, anon, authenticated, service_role;
grant execute on function relay.save_web_push_subscription(uuid, uuid, text, text, text, text[], text) to whereabot_relay;
