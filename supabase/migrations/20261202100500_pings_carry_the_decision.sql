-- =============================================================================
-- A ping carries the relay's decision: no phone answers an agent the owner no longer lists
-- =============================================================================
-- The browser phone answered an always-allowed agent by the list it was sent at hello; a
-- removal (or a precise → approximate change) made on another device never reached it, so
-- it kept answering that agent silently with the precise fix (issue 38, finding 2). Every
-- ping now carries always_allow: {precision} when the owner always allows the agent (for
-- the requester) at the moment the ping is built, else null; the phone answers unprompted
-- only when the ping says so, and only as precisely as it says.

create or replace function private.locate_message(p_request relay.pending_requests)
returns jsonb
language plpgsql
stable
security definer
set search_path = ''
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
