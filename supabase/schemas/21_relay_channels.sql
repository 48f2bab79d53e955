-- =============================================================================
-- Relay channels: each instance hears only what concerns it
-- =============================================================================
-- Each instance has a channel of its own, private.instance_channel(instance), and hears
-- there only:
--   {"kind":"locate", ...ping, owner, reply_key} — a request for an owner with sockets here;
--   {"kind":"answer", id, waiter, owner, outcome, reason, sealed, cancel} — the answer for a
--     request waiting here (cancel: true when the owner also has sockets here: the cancel
--     rides along);
--   {"kind":"cancel", id, owner} — settled or expired; cancel the pings sent from here.
-- The instance that calls open_request or settle is never notified of its own work: it
-- pings its own phones and delivers its own answers in process, after the commit. The reply
-- key travels with the ping (the notification, device_hellos' pending list,
-- pending_locates_on), so the holder seals a fix without asking for it.
--
-- Broadcast (rare, and every instance may need them): whereabot_device, whereabot_key,
-- whereabot_replay.
--
-- The helpers on a locate's path are PL/pgSQL, not SQL: a SQL function with
-- `set search_path` cannot be inlined and is parsed and planned again at every call from
-- PL/pgSQL (68 µs for owner_instances, 32 µs for instance_channel, measured with
-- track_functions), while a PL/pgSQL function's statements are planned once per session.

-- -----------------------------------------------------------------------------
-- private.instance_channel(instance) → the instance's own channel name
-- -----------------------------------------------------------------------------
-- Instance ids are up to 64 characters and channel names at most 63 bytes, so the channel
-- is named after a hash of the id: 'whereabot_i_' and 32 hex digits of its SHA-256.
create or replace function private.instance_channel(p_instance text)
returns text
language plpgsql
immutable
set search_path = ''
as $$
begin
  return 'whereabot_i_' || left(encode(pg_catalog.sha256(pg_catalog.convert_to(p_instance, 'UTF8')), 'hex'), 32);
end;
$$;
comment on function private.instance_channel(text) is
  'The LISTEN channel of one relay instance: whereabot_i_ and 32 hex digits of the SHA-256 of its id.';
revoke execute on function private.instance_channel(text) from public, anon, authenticated;

-- -----------------------------------------------------------------------------
-- private.notify_instances(instances, payload) — one notification per instance channel
-- -----------------------------------------------------------------------------
create or replace function private.notify_instances(p_instances text[], p_payload jsonb)
returns void
language plpgsql
set search_path = ''
as $$
declare
  v_instance text;
begin
  foreach v_instance in array coalesce(p_instances, '{}') loop
    perform private.notify(private.instance_channel(v_instance), p_payload);
  end loop;
end;
$$;
comment on function private.notify_instances(text[], jsonb) is
  'Sends the same payload to each listed instance''s own channel.';
revoke execute on function private.notify_instances(text[], jsonb) from public, anon, authenticated;

-- -----------------------------------------------------------------------------
-- private.owner_instances(owner) → the instances holding the owner's sockets
-- -----------------------------------------------------------------------------
-- relay.connections swings from empty to tens of thousands of rows within seconds (a
-- restart, a storm) and is rarely analyzed in between, and PL/pgSQL caches a generic plan:
-- one chosen while the table was empty would scan it for every call. Lookups by an indexed
-- key switch sequential scans off.
create or replace function private.owner_instances(p_owner uuid)
returns text[]
language plpgsql
stable
security definer
set search_path = ''
set enable_seqscan = off
as $$
declare
  v_instances text[];
begin
  select coalesce(array_agg(distinct c.instance_id), '{}') into v_instances
  from relay.connections c where c.user_id = p_owner;
  return v_instances;
end;
$$;
comment on function private.owner_instances(uuid) is
  'The instances that hold at least one socket of the user (where their pings and cancels go).';
revoke execute on function private.owner_instances(uuid) from public, anon, authenticated;

-- -----------------------------------------------------------------------------
-- private.notify_cancel(request, owner) — tells the instances holding the owner's sockets
-- -----------------------------------------------------------------------------
create or replace function private.notify_cancel(p_id uuid, p_owner uuid)
returns void
language plpgsql
security definer
set search_path = ''
as $$
begin
  perform private.notify_instances(private.owner_instances(p_owner),
    jsonb_build_object('kind', 'cancel', 'id', p_id, 'owner', p_owner));
end;
$$;
comment on function private.notify_cancel(uuid, uuid) is
  'Tells every instance holding a socket of the owner that the request is over (cancel its pings).';
revoke execute on function private.notify_cancel(uuid, uuid) from public, anon, authenticated;

-- -----------------------------------------------------------------------------
-- private.locate_message(request): what a phone gets for a pending request
-- -----------------------------------------------------------------------------
-- {id, client_id, agent_name, expires_ms, reason, requester, always_allow}: agent_name is
-- the agent's cleaned name (at most 200 characters) or null; reason the agent's cleaned
-- reason or null; requester is null for the owner's own agents, else {user_id, name, email}
-- of the person whose agent asks; always_allow is the relay's decision when the message is
-- built — {precision} when the owner always allows this agent (for this requester) now,
-- else null — so that no phone answers unprompted an agent the owner no longer lists,
-- whatever list it holds (issue 38, finding 2).
create or replace function private.locate_message(p_request relay.pending_requests)
returns jsonb
language plpgsql
stable
security definer
set search_path = ''
set plan_cache_mode = force_generic_plan
as $$
begin
  return jsonb_build_object(
    'id', p_request.id,
    'client_id', p_request.client_id,
    'agent_name', nullif(private.clean_display_text(p_request.client_name, 200), ''),
    'expires_ms', (extract(epoch from p_request.expires_at) * 1000)::bigint,
    'reason', p_request.ask_reason,
    'requester', case when p_request.requester_id is null then null
                      else private.user_card(p_request.requester_id) end,
    'always_allow', (select jsonb_build_object('precision', a.precision)
                     from public.always_allowed_agents a
                     where a.user_id = p_request.owner_id and a.client_id = p_request.client_id
                       and (a.requester_id = p_request.requester_id
                            or (a.requester_id is null and p_request.requester_id is null))
                       and (a.expires_at is null or a.expires_at > now())));
end;
$$;
comment on function private.locate_message(relay.pending_requests) is
  'The fields of a locate ping for one pending request (agent_name: the agent''s cleaned name, or null; always_allow: the owner''s standing decision now, or null).';
revoke execute on function private.locate_message(relay.pending_requests) from public, anon, authenticated;

-- -----------------------------------------------------------------------------
-- private.locate_ping(request) → the ping as the holder needs it: the phone's message,
-- its reply key (base64, never sent to the phone) and its owner
-- -----------------------------------------------------------------------------
create or replace function private.locate_ping(p_request relay.pending_requests)
returns jsonb
language plpgsql
stable
security definer
set search_path = ''
as $$
begin
  return jsonb_build_object('type', 'locate', 'owner', p_request.owner_id,
                            'reply_key', encode(p_request.reply_key, 'base64'))
         || private.locate_message(p_request);
end;
$$;
comment on function private.locate_ping(relay.pending_requests) is
  'A waiting request as its holders need it: the phone''s locate message plus owner and reply_key.';
revoke execute on function private.locate_ping(relay.pending_requests) from public, anon, authenticated;
