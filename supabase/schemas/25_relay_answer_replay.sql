-- =============================================================================
-- Answer replay: a waiter that missed a sealed answer asks for it again
-- =============================================================================
-- A sealed fix crosses Postgres only inside the answer notification; no table holds it
-- (but relay.sealed_results for a resumable request). If the waiter's LISTEN connection
-- was down when the answer was settled, the notification is gone. At resync the waiter
-- calls relay.request_replay: for each of its requests settled with a location it sends
-- whereabot_replay {id}; the instance that sealed the answer keeps it in memory for a few
-- minutes and hands it to relay.replay_answer, which sends the answer again to the waiter's
-- channel.

-- -----------------------------------------------------------------------------
-- relay.request_replay(ids, instance) → how many replays were asked for
-- -----------------------------------------------------------------------------
create or replace function relay.request_replay(p_ids uuid[], p_instance text)
returns int
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_id uuid;
  v_count int := 0;
begin
  perform private.check_instance_id(p_instance);
  if p_ids is null or cardinality(p_ids) > 1000 then
    raise exception 'request_replay needs 0 to 1000 request ids' using errcode = '22023';
  end if;
  for v_id in
    select r.id from relay.pending_requests r
    where r.id = any (p_ids) and r.waiter_instance = p_instance and r.outcome = 'location'
  loop
    perform private.notify('whereabot_replay', jsonb_build_object('id', v_id));
    v_count := v_count + 1;
  end loop;
  return v_count;
end;
$$;
comment on function relay.request_replay(uuid[], text) is
  'The waiter INSTANCE asks the sealers of its location-settled requests IDS to send the sealed answers again (NOTIFY whereabot_replay).';

-- -----------------------------------------------------------------------------
-- relay.replay_answer(id, sealed) → whether the answer was sent again
-- -----------------------------------------------------------------------------
-- Only for a request settled with a location: the sealed text is re-sent to its waiter
-- exactly as settle sent it (it is ciphertext for the waiter's reply key).
create or replace function relay.replay_answer(p_id uuid, p_sealed text)
returns boolean
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_request relay.pending_requests;
begin
  if p_id is null or p_sealed is null then
    raise exception 'replay_answer needs a request id and the sealed answer' using errcode = '22004';
  end if;
  if p_sealed !~ '^[A-Za-z0-9+/_-]+={0,2}$' or char_length(p_sealed) > 6000 then
    raise exception 'sealed must be base64 of at most 6000 characters' using errcode = '22023';
  end if;
  select * into v_request from relay.pending_requests where id = p_id and outcome = 'location';
  if not found then
    return false;
  end if;
  perform private.notify(private.instance_channel(v_request.waiter_instance), jsonb_build_object(
    'kind', 'answer', 'id', p_id, 'waiter', v_request.waiter_instance, 'owner', v_request.owner_id,
    'outcome', 'location', 'reason', null, 'sealed', p_sealed, 'cancel', false));
  return true;
end;
$$;
comment on function relay.replay_answer(uuid, text) is
  'Re-sends the sealed answer of request ID (settled with a location) to its waiter.';

revoke execute on function relay.request_replay(uuid[], text), relay.replay_answer(uuid, text)
  from public, anon, authenticated, service_role;
grant execute on function relay.request_replay(uuid[], text), relay.replay_answer(uuid, text)
  to whereabot_relay;
