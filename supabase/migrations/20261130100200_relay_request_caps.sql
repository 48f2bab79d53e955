-- =============================================================================
-- Waiting-request caps per requester as well as per owner
-- =============================================================================
-- The cap of waiting requests (max_waiting, 5 by default) used to count every request for
-- an owner's phones, so someone the owner shares with could keep the owner's own agents at
-- 429 and keep prompts coming. Now the owner's own agents have the cap to themselves, each
-- requester's requests for one owner have it too, and a requester's waiting requests across
-- all owners are capped as well.

-- -----------------------------------------------------------------------------
-- relay.open_request(...) → {status, connections}
-- -----------------------------------------------------------------------------
-- As before (opened, too_many, exists); too_many now as described above.
create or replace function relay.open_request(
  p_id uuid, p_owner uuid, p_requester uuid, p_client_id text, p_client_name text,
  p_instance text, p_reply_key bytea, p_expires_at timestamptz, p_max_waiting int default 5)
returns jsonb
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_request relay.pending_requests;
  v_waiting int;
  v_connections int;
begin
  perform private.check_instance_id(p_instance);
  if p_id is null or p_owner is null then
    raise exception 'open_request needs a request id and an owner' using errcode = '22004';
  end if;
  if p_client_id is null or char_length(p_client_id) not between 1 and 255 then
    raise exception 'client_id must be 1 to 255 characters' using errcode = '22023';
  end if;
  if char_length(p_client_name) > 200 then
    raise exception 'client_name must be at most 200 characters' using errcode = '22023';
  end if;
  if p_reply_key is null or octet_length(p_reply_key) <> 32 then
    raise exception 'reply_key must be a 32-byte X25519 public key' using errcode = '22023';
  end if;
  if p_expires_at is null or p_expires_at <= now() or p_expires_at > now() + interval '10 minutes' then
    raise exception 'expires_at must be in the next 10 minutes' using errcode = '22023';
  end if;
  if p_max_waiting is null or p_max_waiting not between 1 and 100 then
    raise exception 'max_waiting must be between 1 and 100' using errcode = '22023';
  end if;
  if not exists (select from auth.users where id = p_owner) then
    raise exception 'no such owner' using errcode = 'P0002';
  end if;
  if p_requester is not null and p_requester <> p_owner and not exists (
       select from public.location_shares
       where owner_id = p_owner and viewer_id = p_requester and revoked_at is null) then
    raise exception 'the owner does not share their location with the requester' using errcode = '42501';
  end if;

  -- One opener per owner at a time, so that the cap holds under concurrency.
  perform pg_advisory_xact_lock(hashtextextended('whereabot_open_request:' || p_owner::text, 0));

  if exists (select from relay.pending_requests where id = p_id) then
    return jsonb_build_object('status', 'exists', 'connections', null);
  end if;
  -- The owner's own agents and the people sharing with them count separately, so a viewer
  -- can never keep the owner's own agents out; each requester also has a cap of their own
  -- across every owner who shares with them.
  select count(*) into v_waiting from relay.pending_requests
  where owner_id = p_owner and settled_at is null and expires_at > now()
    and requester_id is not distinct from nullif(p_requester, p_owner);
  if v_waiting < p_max_waiting and p_requester is not null and p_requester <> p_owner then
    perform pg_advisory_xact_lock(hashtextextended('whereabot_open_request_by:' || p_requester::text, 0));
    select count(*) into v_waiting from relay.pending_requests
    where requester_id = p_requester and settled_at is null and expires_at > now();
  end if;
  select count(*) into v_connections from relay.connections where user_id = p_owner;
  if v_waiting >= p_max_waiting then
    return jsonb_build_object('status', 'too_many', 'connections', v_connections);
  end if;

  insert into relay.instances (id) values (p_instance) on conflict (id) do nothing;
  insert into relay.pending_requests
    (id, owner_id, requester_id, client_id, client_name, waiter_instance, reply_key, expires_at)
  values (p_id, p_owner, nullif(p_requester, p_owner), p_client_id, p_client_name,
          p_instance, p_reply_key, p_expires_at)
  returning * into v_request;

  perform private.notify('whereabot_locate',
    jsonb_build_object('owner', p_owner) || private.locate_message(v_request));
  return jsonb_build_object('status', 'opened', 'connections', v_connections);
end;
$$;
comment on function relay.open_request(uuid, uuid, uuid, text, text, text, bytea, timestamptz, int) is
  'Opens a locate request for OWNER''s phones (NOTIFY whereabot_locate) unless MAX_WAITING are already waiting.';

revoke execute on function relay.open_request(uuid, uuid, uuid, text, text, text, bytea, timestamptz, int)
  from public, anon, authenticated, service_role;
grant execute on function relay.open_request(uuid, uuid, uuid, text, text, text, bytea, timestamptz, int)
  to whereabot_relay;
