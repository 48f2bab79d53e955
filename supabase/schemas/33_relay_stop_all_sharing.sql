-- =============================================================================
-- Stop all sharing (SPEC §14): one call ends every standing permission of an account
-- =============================================================================
-- For the phone socket's {"type":"stop_all_sharing"}. In one transaction: every request
-- waiting for the person is answered as declined (its agent gets 403 with the denied text,
-- its phones a cancel), then every always-allow (for good or for a while) is removed, every
-- share the person gave (and every invitation waiting for an account) is ended — which
-- cancels what was asked through it —, and every agent key is revoked (whereabot_key tells
-- every instance at once), and every agent connected through the relay's own sign-in is
-- disconnected (its grant deleted: its tokens fail within 5 s). OAuth grants kept by
-- Supabase Auth's own server the page revokes through Auth's grants API after this. The
-- counts say what ended.
create or replace function relay.stop_all_sharing(p_user uuid)
returns jsonb
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_request uuid;
  v_requests int := 0;
  v_always int;
  v_shares int;
  v_keys int;
  v_agents int;
begin
  if p_user is null then
    raise exception 'stop_all_sharing needs a user' using errcode = '22004';
  end if;
  -- Answered before the credentials end, which would only abandon them.
  for v_request in
    select id from relay.pending_requests where owner_id = p_user and settled_at is null and expires_at > now()
  loop
    if relay.settle(v_request, p_user, null, 'denied', 'user', null, null) = 'settled' then
      v_requests := v_requests + 1;
    end if;
  end loop;
  delete from public.always_allowed_agents where user_id = p_user;
  get diagnostics v_always = row_count;
  update public.location_shares set revoked_at = now() where owner_id = p_user and revoked_at is null;
  get diagnostics v_shares = row_count;
  update public.agent_keys set revoked_at = now() where user_id = p_user and revoked_at is null;
  get diagnostics v_keys = row_count;
  delete from public.oauth_grants where user_id = p_user;
  get diagnostics v_agents = row_count;
  return jsonb_build_object('always_allowed', v_always, 'shares', v_shares, 'agent_keys', v_keys,
                            'agents', v_agents, 'requests', v_requests);
end;
$$;
comment on function relay.stop_all_sharing(uuid) is
  'Ends every always-allow, share, invitation, agent key and connected agent of USER and answers their waiting requests as declined; returns the counts.';

revoke execute on function relay.stop_all_sharing(uuid) from public, anon, authenticated, service_role;
grant execute on function relay.stop_all_sharing(uuid) to whereabot_relay;
