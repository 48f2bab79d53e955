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
-- transactions, remind once.

-- -----------------------------------------------------------------------------
-- private.note_always_allowed_use(owner, client_id, requester, remind_after_s) → reminded
-- -----------------------------------------------------------------------------
create or replace function private.note_always_allowed_use(
  p_owner uuid, p_client_id text, p_requester uuid, p_remind_after_s int)
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
    perform private.notify_instances(private.owner_instances(p_owner), jsonb_build_object(
      'kind', 'reminder', 'owner', p_owner, 'client_id', p_client_id,
      'agent_name', nullif(private.clean_display_text(v_name, 200), ''), 'requester_id', p_requester));
  end if;
  return coalesce(v_remind, false);
end;
$$;
comment on function private.note_always_allowed_use(uuid, text, uuid, int) is
  'A location went to CLIENT_ID under OWNER''s always-allow: marks its last use and, for a for-good row standing REMIND_AFTER_S since made or kept, claims and sends its one reminder (true).';
revoke execute on function private.note_always_allowed_use(uuid, text, uuid, int) from public, anon, authenticated;

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
