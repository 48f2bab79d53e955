-- =============================================================================
-- A share that ended ends: nothing of the owner's reaches the viewer (issue 38, finding 3)
-- =============================================================================
-- private.end_share cancelled the viewer's waiting requests but left the results of those
-- that had settled: a viewer's async request polled after the share ended returned the
-- owner's fix. Now the ended share deletes the sealed results of every request made
-- through it and puts their rows past keep_until, so a poll finds nothing.

create or replace function private.end_share()
returns trigger
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_share public.location_shares := old;
  v_request record;
begin
  if tg_op = 'UPDATE' and not (old.revoked_at is null and new.revoked_at is not null) then
    return new;
  end if;
  if tg_op = 'DELETE' and old.revoked_at is not null then
    return old;
  end if;
  if v_share.viewer_id is not null then
    delete from public.always_allowed_agents
    where user_id = v_share.owner_id and requester_id = v_share.viewer_id;
    for v_request in
      update relay.pending_requests set settled_at = now(), outcome = 'abandoned'
      where owner_id = v_share.owner_id and requester_id = v_share.viewer_id and settled_at is null
      returning id, owner_id
    loop
      perform private.notify_cancel(v_request.id, v_request.owner_id);
    end loop;
    delete from relay.sealed_results s
    using relay.pending_requests r
    where s.request_id = r.id and r.owner_id = v_share.owner_id and r.requester_id = v_share.viewer_id;
    update relay.pending_requests set keep_until = now()
    where owner_id = v_share.owner_id and requester_id = v_share.viewer_id and resumable and keep_until > now();
  end if;
  return case when tg_op = 'DELETE' then old else new end;
end;
$$;
comment on function private.end_share() is
  'AFTER UPDATE/DELETE trigger: an ended share cancels the viewer''s waiting requests, deletes their sealed results (their polls find nothing) and drops the owner''s always-allows for that viewer.';
revoke execute on function private.end_share() from public, anon, authenticated;
