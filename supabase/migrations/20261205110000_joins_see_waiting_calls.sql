-- A repeated ask joins the request its agent already opened (docs/agents.md, "Timeouts"):
-- relay.durable_state shows a resumable request to its own credential before its call has
-- made it durable, so that a second call of the same agent for the same person waits for it
-- instead of opening another prompt. Anyone else still gets unknown.

create or replace function relay.durable_state(p_id uuid, p_user uuid, p_client_id text, p_key uuid,
                                               p_instance text, p_watch boolean default false)
returns jsonb
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_request relay.pending_requests;
begin
  perform private.check_instance_id(p_instance);
  if p_id is null or p_user is null or p_client_id is null then
    raise exception 'durable_state needs a request id, a user and a client id' using errcode = '22004';
  end if;
  select * into v_request from relay.pending_requests where id = p_id;
  if not found or not private.binds(v_request, p_user, p_client_id, p_key) then
    return jsonb_build_object('status', 'unknown');
  end if;
  if v_request.settled_at is null and v_request.expires_at < now() - interval '2 seconds' then
    update relay.pending_requests
    set settled_at = now(), outcome = 'expired', keep_until = least(keep_until, now() + interval '10 minutes')
    where id = p_id and settled_at is null
    returning * into v_request;
    if found then
      perform private.notify_cancel(p_id, v_request.owner_id);
    else
      select * into v_request from relay.pending_requests where id = p_id;
    end if;
  elsif v_request.settled_at is null and p_watch and v_request.watcher_instance is distinct from p_instance then
    update relay.pending_requests set watcher_instance = p_instance where id = p_id and settled_at is null;
  end if;
  return private.request_view(v_request);
end;
$$;
comment on function relay.durable_state(uuid, uuid, text, uuid, text, boolean) is
  'A poll of a resumable request (or a join of it) by the credential that opened it (anyone else: unknown); expires it past its deadline; with watch, its answer comes to the polling instance.';
