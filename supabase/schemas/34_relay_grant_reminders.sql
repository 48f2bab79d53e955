-- =============================================================================
-- Reminders of standing grants (SPEC §14)
-- =============================================================================
-- An always-allow for good does not fade silently. Each answer with a location to an agent
-- the owner always allows marks the row's last use (the app's Always allowed list shows
-- it; never where). The first such answer once a for-good row has stood the relay's
-- GRANT_REMINDER_DAYS since it was made, chosen again or kept also claims its reminder
-- (reminded_at) and tells the instances holding the owner's sockets ('reminder' on their
-- channels), whose phones show "NAME can still check your location without asking" with
-- Keep (relay.keep_always_allowed) and Remove (relay.set_always_allowed with false). The
-- claim is a row lock and one UPDATE: answers settling at once, in one batch or in two
-- transactions, remind once. The same notification goes to the settling instance, named in
-- it as the pusher: that one instance claims the reminder's push once
-- (relay.claim_reminder_push, reminder_pushed_at) and sends it to every APNs token and Web
-- Push subscription of the owner the push budgets pay for, so phones that hold no socket
-- (asleep, or answering automatically from a notification) are reminded too.

-- -----------------------------------------------------------------------------
-- private.note_always_allowed_use(owner, client_id, requester, remind_after_s, pusher) → reminded
-- -----------------------------------------------------------------------------
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

-- -----------------------------------------------------------------------------
-- relay.claim_reminder_push(owner, client_id, requester, per_target, per_account)
-- -----------------------------------------------------------------------------
-- The pusher named in a reminder claims its push: once per reminder (reminder_pushed_at),
-- within a minute of it, with the targets the budgets pay for (private.pay_for_pushes).
-- status: claimed {apns, web, limited, owner}, already (pushed before), not_applicable (no
-- reminder in the last minute), gone (no such for-good row: removed meanwhile).
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

revoke execute on function relay.claim_reminder_push(uuid, text, uuid, int, int) from public, anon, authenticated, service_role;
grant execute on function relay.claim_reminder_push(uuid, text, uuid, int, int) to whereabot_relay;

-- -----------------------------------------------------------------------------
-- relay.keep_always_allowed(user, client_id, requester) → the list: Keep on a reminder
-- -----------------------------------------------------------------------------
create or replace function relay.keep_always_allowed(p_user uuid, p_client_id text, p_requester uuid)
returns jsonb
language plpgsql
security definer
set search_path = ''
as $$
begin
  if p_user is null or p_client_id is null then
    raise exception 'keep_always_allowed needs a user and a client id' using errcode = '22004';
  end if;
  update public.always_allowed_agents
  set reminded_at = now()
  where user_id = p_user and client_id = p_client_id and requester_id is not distinct from nullif(p_requester, p_user)
    and expires_at is null;
  if not found then
    raise exception 'no such always-allowed agent' using errcode = 'P0002';
  end if;
  return relay.always_allowed_agents(p_user);
end;
$$;
comment on function relay.keep_always_allowed(uuid, text, uuid) is
  'Keep on a reminder: USER keeps always allowing CLIENT_ID (for REQUESTER''s requests when set); the next reminder comes GRANT_REMINDER_DAYS from now. Returns the list.';

revoke execute on function relay.keep_always_allowed(uuid, text, uuid) from public, anon, authenticated, service_role;
grant execute on function relay.keep_always_allowed(uuid, text, uuid) to whereabot_relay;
