-- =============================================================================
-- Agent keys are signed: a valid key is never refused for what others at its address sent
-- =============================================================================
-- (issue 38, finding 7) A stranger's 20 bad agent keys from a shared address spent the
-- address's failure budget, and another client's valid, uncached key from that address was
-- refused 429 without a lookup. New keys carry an HMAC the relay checks without the
-- database; a key whose signature holds is looked up whatever its address's budget.

-- -----------------------------------------------------------------------------
-- Agent keys carry a signature the relay checks without the database
-- -----------------------------------------------------------------------------
-- A key is 'wb_', 32 hex digits of randomness and 32 of HMAC-SHA256 over 'wb_' and those
-- digits under a secret only the database and the relay instances hold. A forged key fails
-- the check before any lookup, so a valid key is looked up even from an address whose
-- failure budget strangers have spent (issue 38, finding 7). Keys made before signing have
-- the same shape and go the old way: looked up unless their address is over its budget.
create table private.agent_key_signing (
  id int primary key default 1 check (id = 1),
  secret bytea not null check (octet_length(secret) = 32),
  created_at timestamptz not null default now()
);
comment on table private.agent_key_signing is
  'The secret agent keys are signed with (one row, made on first use); readable only through relay.agent_key_secret().';
alter table private.agent_key_signing enable row level security;
revoke all on private.agent_key_signing from public, anon, authenticated, service_role;

create or replace function private.agent_key_secret()
returns bytea
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_secret bytea;
begin
  insert into private.agent_key_signing (id, secret) values (1, extensions.gen_random_bytes(32))
  on conflict (id) do nothing;
  select s.secret into v_secret from private.agent_key_signing s where s.id = 1;
  return v_secret;
end;
$$;
comment on function private.agent_key_secret() is
  'The agent-key signing secret, made on first use.';
revoke execute on function private.agent_key_secret() from public, anon, authenticated;

create or replace function relay.agent_key_secret()
returns bytea
language sql
security definer
set search_path = ''
as $$ select private.agent_key_secret() $$;
comment on function relay.agent_key_secret() is
  'The agent-key signing secret, for the relay''s check of a key''s signature before any lookup.';
revoke execute on function relay.agent_key_secret() from public, anon, authenticated, service_role;
grant execute on function relay.agent_key_secret() to whereabot_relay;

create or replace function private.create_agent_key_for(p_user uuid, p_name text)
returns text
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_key text;
  v_random text;
begin
  if p_user is null then
    raise exception 'creating an agent key needs a user' using errcode = '22004';
  end if;
  if p_name is null or char_length(btrim(p_name)) not between 1 and 100 then
    raise exception 'an agent key needs a name of 1 to 100 characters' using errcode = '22023';
  end if;
  -- Signed: 32 hex digits of randomness, then 32 of their HMAC under the signing secret.
  v_random := 'wb_' || encode(extensions.gen_random_bytes(16), 'hex');
  v_key := v_random || left(encode(extensions.hmac(convert_to(v_random, 'UTF8'), private.agent_key_secret(), 'sha256'), 'hex'), 32);
  insert into public.agent_keys (user_id, name, key_hash, key_prefix)
  values (p_user, private.clean_display_text(btrim(p_name), 100), encode(sha256(convert_to(v_key, 'UTF8')), 'hex'),
          left(v_key, 11));
  return v_key;
end;
$$;
