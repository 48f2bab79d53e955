-- =============================================================================
-- A removed permission is removed everywhere: revoked credentials' requests end (issue 38, finding 9)
-- =============================================================================
-- An OAuth grant revoked while its request waited kept prompting the person, and its long
-- poll still returned the fix after new requests got 401. The relay now checks the
-- credential again before it delivers a result; here, the revoked credential's waiting
-- requests are abandoned at once and their phones get cancel.

-- -----------------------------------------------------------------------------
-- A revoked credential's waiting requests are cancelled (their phones get cancel)
-- -----------------------------------------------------------------------------
-- An OAuth grant revoked (its client's last session of the user deleted) or an agent key
-- revoked or deleted: the requests it opened stop prompting the person at once, and a
-- poll of them finds them abandoned (the relay also checks the credential again before it
-- delivers any result). An agent key's synchronous requests carry no key id; they end
-- with their call, within 120 s, and their answer is never delivered.
create or replace function private.cancel_revoked_credential_requests()
returns trigger
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_request record;
begin
  if tg_table_name = 'sessions' then
    if old.oauth_client_id is null or exists (
         select from auth.sessions s where s.user_id = old.user_id and s.oauth_client_id = old.oauth_client_id) then
      return null;
    end if;
    for v_request in
      update relay.pending_requests set settled_at = now(), outcome = 'abandoned'
      where settled_at is null and client_id = old.oauth_client_id::text
        and ((owner_id = old.user_id and requester_id is null) or requester_id = old.user_id)
      returning id, owner_id
    loop
      perform private.notify_cancel(v_request.id, v_request.owner_id);
    end loop;
  else
    for v_request in
      update relay.pending_requests set settled_at = now(), outcome = 'abandoned'
      where settled_at is null and agent_key_id = old.id
      returning id, owner_id
    loop
      perform private.notify_cancel(v_request.id, v_request.owner_id);
    end loop;
  end if;
  return null;
end;
$$;
comment on function private.cancel_revoked_credential_requests() is
  'AFTER trigger on auth.sessions (delete) and public.agent_keys (revoke, delete): a revoked OAuth grant''s or agent key''s waiting requests are abandoned and their phones told to cancel.';
revoke execute on function private.cancel_revoked_credential_requests() from public, anon, authenticated;

-- No WHEN clause on auth.sessions: a trigger condition naming a column of Supabase Auth's
-- table would block Auth's own migrations from altering that column.
create trigger sessions_cancel_revoked_client_requests
  after delete on auth.sessions
  for each row execute function private.cancel_revoked_credential_requests();
create trigger agent_keys_cancel_requests_when_revoked
  after update of revoked_at on public.agent_keys
  for each row when (old.revoked_at is null and new.revoked_at is not null)
  execute function private.cancel_revoked_credential_requests();
create trigger agent_keys_cancel_requests_when_deleted
  after delete on public.agent_keys
  for each row when (old.revoked_at is null)
  execute function private.cancel_revoked_credential_requests();
