-- =============================================================================
-- relay.reply_key: the key a holder seals a phone's answer to
-- =============================================================================
-- The instance holding the answering phone is usually not the waiting one. Before it
-- settles, it reads the waiter's per-request X25519 public key and seals the fix to it, so
-- the fix crosses Postgres only as ciphertext.

create or replace function relay.reply_key(p_id uuid, p_user uuid)
returns bytea
language plpgsql
stable
security definer
set search_path = ''
as $$
begin
  if p_id is null or p_user is null then
    raise exception 'reply_key needs a request id and a user id' using errcode = '22004';
  end if;
  return (select r.reply_key from relay.pending_requests r
          where r.id = p_id and r.owner_id = p_user and r.settled_at is null);
end;
$$;
comment on function relay.reply_key(uuid, uuid) is
  'The waiter''s public key of request ID if it still waits for USER''s phones, else null.';

revoke execute on function relay.reply_key(uuid, uuid) from public, anon, authenticated, service_role;
grant execute on function relay.reply_key(uuid, uuid) to whereabot_relay;
