-- =============================================================================
-- Sharing and presence, after a security review of the SQL
-- =============================================================================
-- 1. Revoking (or deleting) a share now ends what it allowed at once: the viewer's requests
--    still waiting for the owner are settled as abandoned (their phones get whereabot_cancel)
--    and the always-allow rows the owner granted for that viewer are dropped.
-- 2. share_location_with no longer tells a signed-in caller whether an email has an
--    account: it answers the same for every address. A share to an email without an
--    account waits (viewer_id null) and reaches the viewer when they sign up with it. The
--    owner reads the email they typed, never whether it matched an account (viewer_id is
--    not readable through the API; policies and the relay's functions still use it).
-- 3. An agent's token no longer reads its user's devices: last_seen_at told an agent whether
--    a phone was online without asking the person.

-- 1 ---------------------------------------------------------------------------------
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
      perform private.notify('whereabot_cancel', jsonb_build_object('id', v_request.id, 'owner', v_request.owner_id));
    end loop;
  end if;
  return case when tg_op = 'DELETE' then old else new end;
end;
$$;
comment on function private.end_share() is
  'AFTER UPDATE/DELETE trigger: an ended share cancels the viewer''s waiting requests and drops the owner''s always-allows for that viewer.';
revoke execute on function private.end_share() from public, anon, authenticated;

drop trigger if exists location_shares_end on public.location_shares;
create trigger location_shares_end
  after update of revoked_at or delete on public.location_shares
  for each row execute function private.end_share();

-- 2 ---------------------------------------------------------------------------------
alter table public.location_shares alter column viewer_id drop not null;
alter table public.location_shares add column if not exists viewer_email text
  check (viewer_email = lower(viewer_email) and char_length(viewer_email) <= 320);
comment on column public.location_shares.viewer_email is
  'The email the owner shared with (lowercase); the share reaches that account, now or when it signs up.';
alter table public.location_shares drop constraint if exists location_shares_names_a_viewer;
alter table public.location_shares add constraint location_shares_names_a_viewer
  check (viewer_id is not null or viewer_email is not null);
update public.location_shares s set viewer_email = lower(u.email)
from auth.users u where u.id = s.viewer_id and s.viewer_email is null;
create unique index if not exists location_shares_one_pending_idx
  on public.location_shares (owner_id, viewer_email) where revoked_at is null and viewer_id is null;

-- The API reads every column but viewer_id (whether an email matched an account), and
-- inserts shares by viewer id only (share_location_with handles emails).
revoke select, insert on public.location_shares from authenticated;
grant select (id, owner_id, viewer_email, created_at, revoked_at) on public.location_shares to authenticated;
grant insert (owner_id, viewer_id) on public.location_shares to authenticated;

create or replace function private.share_location_with(p_email text)
returns uuid
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_owner uuid := auth.uid();
  v_email text := lower(btrim(p_email));
  v_viewer uuid;
  v_share uuid;
begin
  if v_owner is null or (auth.jwt() ->> 'client_id') is not null then
    raise exception 'sharing your location needs your own session' using errcode = '42501';
  end if;
  if p_email is null or v_email !~ '^[^@[:space:]]+@[^@[:space:]]+$' or char_length(v_email) > 320 then
    raise exception 'share_location_with needs an email address' using errcode = '22023';
  end if;
  if v_email = (select lower(email) from auth.users where id = v_owner) then
    raise exception 'you cannot share your location with yourself' using errcode = '22023';
  end if;
  select id into v_viewer from auth.users where lower(email) = v_email and deleted_at is null;
  -- The same answer whether or not the address has an account: the active share's id.
  select id into v_share from public.location_shares
  where owner_id = v_owner and revoked_at is null
    and (viewer_id = v_viewer or (viewer_id is null and viewer_email = v_email));
  if v_share is null then
    insert into public.location_shares (owner_id, viewer_id, viewer_email)
    values (v_owner, v_viewer, v_email) returning id into v_share;
  end if;
  return v_share;
end;
$$;
comment on function private.share_location_with(text) is
  'Shares the calling user''s location with EMAIL (now, or when that address signs up); returns the active share''s id.';

-- A new account, or an account whose email changed, receives the shares waiting for it.
create or replace function private.claim_waiting_shares()
returns trigger
language plpgsql
security definer
set search_path = ''
as $$
begin
  if new.email is null then
    return new;
  end if;
  update public.location_shares s set viewer_id = new.id
  where s.viewer_id is null and s.revoked_at is null and s.viewer_email = lower(new.email) and s.owner_id <> new.id
    and not exists (select from public.location_shares a
                    where a.owner_id = s.owner_id and a.viewer_id = new.id and a.revoked_at is null);
  return new;
end;
$$;
comment on function private.claim_waiting_shares() is
  'AFTER INSERT/UPDATE OF email on auth.users: shares made to that email before the account existed now reach it.';
revoke execute on function private.claim_waiting_shares() from public, anon, authenticated;

drop trigger if exists whereabot_claim_waiting_shares on auth.users;
create trigger whereabot_claim_waiting_shares
  after insert or update of email on auth.users
  for each row execute function private.claim_waiting_shares();

-- 3 ---------------------------------------------------------------------------------
drop policy if exists "Users can read their own devices" on public.devices;
drop policy if exists "Users can read their own devices from their own session" on public.devices;
create policy "Users can read their own devices from their own session"
  on public.devices for select to authenticated
  using (user_id = (select auth.uid()) and (select auth.jwt()) ->> 'client_id' is null);
