-- =============================================================================
-- Consent for a while, and approximately (issue 29, SPEC §13)
-- =============================================================================
-- "Allow for 1 hour" always-allows an agent until then: always_allowed_agents.expires_at
-- (null: always). "Share approximate" can be an always-allow too: .precision says how the
-- phone answers the agent. An expired row counts as absent in every function: the push
-- decision (relay.is_always_allowed), the list the relay sends the phone
-- (relay.always_allowed_agents), and a new choice (relay.set_always_allowed, which also
-- deletes the user's expired rows). The table's policies are unchanged: only the user's own
-- session writes it, so an agent can never add or extend its own row.

alter table public.always_allowed_agents
  add column precision text not null default 'precise' check (precision in ('precise', 'approximate')),
  add column expires_at timestamptz;
comment on column public.always_allowed_agents.precision is
  'precise, or approximate: the phone answers this agent with the centre of a 0.025° grid cell, never a precise fix.';
comment on column public.always_allowed_agents.expires_at is
  'Until when the agent is allowed ("Allow for 1 hour"); null for always. An expired row counts as absent everywhere.';

create or replace function relay.is_always_allowed(p_owner uuid, p_client_id text, p_requester uuid)
returns boolean
language plpgsql
stable
security definer
set search_path = ''
as $$
begin
  if p_owner is null or p_client_id is null then
    raise exception 'is_always_allowed needs an owner and a client id' using errcode = '22004';
  end if;
  return exists (
    select from public.always_allowed_agents a
    where a.user_id = p_owner and a.client_id = p_client_id
      and a.requester_id is not distinct from nullif(p_requester, p_owner)
      and (a.expires_at is null or a.expires_at > now()));
end;
$$;

create or replace function relay.always_allowed_agents(p_user uuid)
returns jsonb
language plpgsql
stable
security definer
set search_path = ''
as $$
begin
  if p_user is null then
    raise exception 'always_allowed_agents needs a user' using errcode = '22004';
  end if;
  return coalesce((
    select jsonb_agg(jsonb_build_object('client_id', a.client_id, 'client_name', a.client_name,
                                        'requester_id', a.requester_id, 'precision', a.precision,
                                        'expires_ms', (extract(epoch from a.expires_at) * 1000)::bigint) order by a.created_at)
    from public.always_allowed_agents a
    where a.user_id = p_user and (a.expires_at is null or a.expires_at > now())), '[]');
end;
$$;
comment on function relay.always_allowed_agents(uuid) is
  'USER''s always-allowed agents, none expired, as [{client_id, client_name, requester_id, precision, expires_ms}].';
drop function relay.set_always_allowed(uuid, text, text, uuid, boolean);
create or replace function relay.set_always_allowed(
  p_user uuid, p_client_id text, p_client_name text, p_requester uuid, p_allowed boolean,
  p_precision text default 'precise', p_expires_in_s int default null)
returns jsonb
language plpgsql
security definer
set search_path = ''
as $$
begin
  if p_user is null or p_client_id is null or p_allowed is null then
    raise exception 'set_always_allowed needs a user, a client id and a choice' using errcode = '22004';
  end if;
  if p_precision is null or p_precision not in ('precise', 'approximate') then
    raise exception 'precision is precise or approximate' using errcode = '22023';
  end if;
  if p_expires_in_s is not null and p_expires_in_s not between 1 and 86400 then
    raise exception 'expires_in_s must be from 1 to 86400 seconds' using errcode = '22023';
  end if;
  -- The user's expired choices go with any change of theirs (they count as absent already).
  delete from public.always_allowed_agents where user_id = p_user and expires_at <= now();
  if p_allowed then
    if p_requester is not null and p_requester <> p_user and not exists (
         select from public.location_shares where owner_id = p_user and viewer_id = p_requester and revoked_at is null) then
      raise exception 'the requester has no active share from this user' using errcode = '42501';
    end if;
    insert into public.always_allowed_agents (user_id, client_id, client_name, requester_id, precision, expires_at)
    values (p_user, p_client_id, coalesce(private.clean_display_text(p_client_name, 200), ''), nullif(p_requester, p_user),
            p_precision, now() + make_interval(secs => p_expires_in_s))
    on conflict on constraint always_allowed_agents_once do update
      set client_name = excluded.client_name, precision = excluded.precision, expires_at = excluded.expires_at;
  else
    delete from public.always_allowed_agents
    where user_id = p_user and client_id = p_client_id and requester_id is not distinct from nullif(p_requester, p_user);
  end if;
  return relay.always_allowed_agents(p_user);
end;
$$;
comment on function relay.set_always_allowed(uuid, text, text, uuid, boolean, text, int) is
  'Adds (with its precision, until EXPIRES_IN_S from now when set) or removes USER''s always-allow of agent CLIENT_ID (for REQUESTER''s requests when set); returns the new list.';
revoke execute on function relay.set_always_allowed(uuid, text, text, uuid, boolean, text, int)
  from public, anon, authenticated, service_role;
grant execute on function relay.set_always_allowed(uuid, text, text, uuid, boolean, text, int) to whereabot_relay;
