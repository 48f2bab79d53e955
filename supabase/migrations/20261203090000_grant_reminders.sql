-- Reminders of standing grants (SPEC §14, issue 42 part 4): every location under an
-- always-allow marks its last use, shown in the app; a for-good always-allow standing the
-- relay's GRANT_REMINDER_DAYS since it was made or kept claims one reminder at its next use
-- (relay.settle and relay.settle_many take the interval), answered Keep
-- (relay.keep_always_allowed) or Remove.

alter table public.always_allowed_agents add column last_used_at timestamptz;
alter table public.always_allowed_agents add column reminded_at timestamptz;
comment on column public.always_allowed_agents.last_used_at is
  'When the agent last got a location under this row (relay.settle): the app shows it. Never where.';
comment on column public.always_allowed_agents.reminded_at is
  'When the person was last reminded of this for-good row, or kept it (SPEC §14 reminders); null: never.';

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

drop function relay.settle(uuid, uuid, uuid, text, text, text, text);
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
  if p_outcome = 'location' then
    perform private.note_always_allowed_use(v_owner, v_client_id, v_requester, p_remind_after_s);
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

revoke execute on function relay.settle(uuid, uuid, uuid, text, text, text, text, int)
  from public, anon, authenticated, service_role;
grant execute on function relay.settle(uuid, uuid, uuid, text, text, text, text, int) to whereabot_relay;

drop function relay.settle_many(text, jsonb);
create or replace function relay.settle_many(p_instance text, p_answers jsonb, p_remind_after_s int default null)
returns jsonb
language plpgsql
security definer
set search_path = ''
set lock_timeout = '50ms'
as $$
declare
  v_results jsonb[];
  v_element record;
begin
  perform private.check_instance_id(p_instance);
  if p_answers is null or jsonb_typeof(p_answers) <> 'array' or jsonb_array_length(p_answers) not between 1 and 32 then
    raise exception 'settle_many needs an array of 1 to 32 answers' using errcode = '22023';
  end if;
  v_results := array_fill(null::jsonb, array[jsonb_array_length(p_answers)]);
  for v_element in
    select a.ord, a.value
    from jsonb_array_elements(p_answers) with ordinality a(value, ord)
    order by case when a.value ->> 'id' ~* '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'
                  then (a.value ->> 'id')::uuid end, a.ord
  loop
    begin
      if jsonb_typeof(v_element.value) <> 'object' then
        raise exception 'an answer is an object' using errcode = '22023';
      end if;
      v_results[v_element.ord] := jsonb_build_object('status', relay.settle(
        (v_element.value ->> 'id')::uuid, (v_element.value ->> 'user')::uuid,
        (v_element.value ->> 'device')::uuid, v_element.value ->> 'outcome', v_element.value ->> 'reason',
        v_element.value ->> 'sealed', p_instance, p_remind_after_s));
    exception when others then
      v_results[v_element.ord] := jsonb_build_object('status', 'error', 'code', sqlstate);
    end;
  end loop;
  return to_jsonb(v_results);
end;
$$;
comment on function relay.settle_many(text, jsonb, int) is
  'relay.settle for 1 to 32 answers in one call (REMIND_AFTER_S as relay.settle''s): a result per element, in order; a refused element is {"status": "error", "code": SQLSTATE} alone.';

revoke execute on function relay.settle_many(text, jsonb, int) from public, anon, authenticated, service_role;
grant execute on function relay.settle_many(text, jsonb, int) to whereabot_relay;

create or replace function relay.always_allowed_agents(p_user uuid)
returns jsonb
language plpgsql
stable
security definer
set search_path = ''
as $$
begin
  if p_user is null then
    raise exception 'always_allowed_agents needs a user' using errcode = '22004';
  end if;
  return coalesce((
    select jsonb_agg(jsonb_build_object('client_id', a.client_id, 'client_name', a.client_name,
                                        'requester_id', a.requester_id, 'precision', a.precision,
                                        'expires_ms', (extract(epoch from a.expires_at) * 1000)::bigint,
                                        'last_used_ms', (extract(epoch from a.last_used_at) * 1000)::bigint) order by a.created_at)
    from public.always_allowed_agents a
    where a.user_id = p_user and (a.expires_at is null or a.expires_at > now())), '[]');
end;
$$;
comment on function relay.always_allowed_agents(uuid) is
  'USER''s always-allowed agents, none expired, as [{client_id, client_name, requester_id, precision, expires_ms, last_used_ms}].';

create or replace function relay.set_always_allowed(
  p_user uuid, p_client_id text, p_client_name text, p_requester uuid, p_allowed boolean,
  p_precision text default 'precise', p_expires_in_s int default null)
returns jsonb
language plpgsql
security definer
set search_path = ''
as $$
begin
  if p_user is null or p_client_id is null or p_allowed is null then
    raise exception 'set_always_allowed needs a user, a client id and a choice' using errcode = '22004';
  end if;
  if p_precision is null or p_precision not in ('precise', 'approximate') then
    raise exception 'precision is precise or approximate' using errcode = '22023';
  end if;
  if p_expires_in_s is not null and p_expires_in_s not between 1 and 86400 then
    raise exception 'expires_in_s must be from 1 to 86400 seconds' using errcode = '22023';
  end if;
  -- The user's expired choices go with any change of theirs (they count as absent already).
  delete from public.always_allowed_agents where user_id = p_user and expires_at <= now();
  if p_allowed then
    if p_requester is not null and p_requester <> p_user and not exists (
         select from public.location_shares where owner_id = p_user and viewer_id = p_requester and revoked_at is null) then
      raise exception 'the requester has no active share from this user' using errcode = '42501';
    end if;
    insert into public.always_allowed_agents (user_id, client_id, client_name, requester_id, precision, expires_at)
    values (p_user, p_client_id, coalesce(private.clean_display_text(p_client_name, 200), ''), nullif(p_requester, p_user),
            p_precision, now() + make_interval(secs => p_expires_in_s))
    on conflict on constraint always_allowed_agents_once do update
      set client_name = excluded.client_name, precision = excluded.precision, expires_at = excluded.expires_at,
          reminded_at = now();
  else
    delete from public.always_allowed_agents
    where user_id = p_user and client_id = p_client_id and requester_id is not distinct from nullif(p_requester, p_user);
  end if;
  return relay.always_allowed_agents(p_user);
end;
$$;
comment on function relay.set_always_allowed(uuid, text, text, uuid, boolean, text, int) is
  'Adds (with its precision, until EXPIRES_IN_S from now when set) or removes USER''s always-allow of agent CLIENT_ID (for REQUESTER''s requests when set); returns the new list.';
