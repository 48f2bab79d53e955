-- relay.settle marks the use of an always-allow (and may claim its reminder) only when the
-- owner always allows the agent at all: an index probe instead of a call of
-- private.note_always_allowed_use (a row lock and an UPDATE, 115 µs a call under
-- `make bench-relay`'s load) for every location (issue 42's reminders, their cost).

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
