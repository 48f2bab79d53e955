-- =============================================================================
-- relay.pending_locates_on(instance): the backstop poll's pings, by instance
-- =============================================================================
-- Every few seconds each instance looks for pings its phones should have but may have
-- missed (a lost notification). Asking by the instance's own sockets keeps that poll's cost
-- proportional to the requests waiting, instead of shipping every local user's id.

create or replace function relay.pending_locates_on(p_instance text)
returns table (owner_id uuid, message jsonb)
language plpgsql
stable
security definer
set search_path = ''
as $$
begin
  perform private.check_instance_id(p_instance);
  return query
    select r.owner_id, jsonb_build_object('type', 'locate') || private.locate_message(r)
    from relay.pending_requests r
    where r.settled_at is null and r.expires_at > now()
      and exists (select from relay.connections c
                  where c.user_id = r.owner_id and c.instance_id = p_instance)
    order by r.created_at;
end;
$$;
comment on function relay.pending_locates_on(text) is
  'Locate messages of every request still waiting for a user with a socket on INSTANCE, oldest first.';

revoke execute on function relay.pending_locates_on(text) from public, anon, authenticated, service_role;
grant execute on function relay.pending_locates_on(text) to whereabot_relay;
