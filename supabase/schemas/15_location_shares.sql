-- =============================================================================
-- Location shares: an owner lets a viewer's agents ask for the owner's location
-- =============================================================================
-- Every request still needs the owner's consent on their phone (or their always-allow
-- for that agent and viewer). The owner creates and revokes; the viewer sees shares made
-- to them and may leave one (revoked_at). Revocation is final; share again to renew. An
-- owner creates at most private.max_location_shares_per_hour() shares an hour, revoked and
-- deleted ones included, and a revoked share is deleted after private.revoked_kept_for().
-- Ending a share ends what it allowed at once: the viewer's waiting requests are abandoned
-- (their phones get a cancel) and the always-allows the owner granted for that viewer go.
--
-- share_location_with answers the same for every address, so it never tells a caller
-- whether an email has an account. A share to an address no account has confirmed waits
-- (viewer_id null) and reaches the account that confirms it (SPEC §8); this holds while
-- Supabase Auth's "Confirm email" stays on (docs/deploy.md). The owner reads the email they
-- typed, never whether it matched an account: viewer_id is not readable through the API
-- (policies and the relay's functions still use it).

create table public.location_shares (
  id uuid primary key default gen_random_uuid(),
  owner_id uuid not null references auth.users (id) on delete cascade,
  viewer_id uuid references auth.users (id) on delete cascade,
  created_at timestamptz not null default now(),
  revoked_at timestamptz,
  viewer_email text check (viewer_email = lower(viewer_email) and char_length(viewer_email) <= 320),
  constraint location_shares_with_someone_else check (owner_id <> viewer_id),
  constraint location_shares_names_a_viewer check (viewer_id is not null or viewer_email is not null)
);
comment on table public.location_shares is
  'Owner lets viewer''s agents request the owner''s location (each request still asks the owner).';
comment on column public.location_shares.viewer_email is
  'The email the owner shared with (lowercase); the share reaches that account, now or when it signs up.';

create index location_shares_owner_id_idx on public.location_shares (owner_id);
create index location_shares_viewer_id_idx on public.location_shares (viewer_id);
create index location_shares_revoked_at_idx on public.location_shares (revoked_at) where revoked_at is not null;
create unique index location_shares_one_active_idx
  on public.location_shares (owner_id, viewer_id) where revoked_at is null;
create unique index location_shares_one_pending_idx
  on public.location_shares (owner_id, viewer_email) where revoked_at is null and viewer_id is null;
comment on index public.location_shares_owner_id_idx is 'The 100-shares limit trigger, an owner''s list, deleting an owner (cascade).';
comment on index public.location_shares_viewer_id_idx is 'relay.people_sharing_with and resolve_person by viewer, deleting a viewer (cascade).';
comment on index public.location_shares_one_active_idx is
  'relay.open_request''s share check and relay.people_sharing_with (owner, viewer); one active share per pair.';
comment on index public.location_shares_one_pending_idx is 'share_location_with: one waiting share per owner and address.';
comment on index public.location_shares_revoked_at_idx is 'relay.sweep_oauth: shares revoked longer ago than private.revoked_kept_for().';

alter table public.location_shares enable row level security;

-- The API reads every column but viewer_id (whether an email matched an account), and
-- inserts shares by viewer id only (share_location_with handles emails).
revoke all on public.location_shares from anon, authenticated;
grant delete on public.location_shares to authenticated;
grant select (id, owner_id, viewer_email, created_at, revoked_at) on public.location_shares to authenticated;
grant insert (owner_id, viewer_id) on public.location_shares to authenticated;
grant update (revoked_at) on public.location_shares to authenticated;

create policy "Owners and viewers can read their shares"
  on public.location_shares for select to authenticated
  using (owner_id = (select auth.uid()) or viewer_id = (select auth.uid()));

create policy "Users can share their own location from their own session"
  on public.location_shares for insert to authenticated
  with check (owner_id = (select auth.uid()) and (select auth.jwt()) ->> 'client_id' is null and revoked_at is null);

create policy "Owners can revoke, viewers leave shares from their own session"
  on public.location_shares for update to authenticated
  using ((owner_id = (select auth.uid()) or viewer_id = (select auth.uid())) and (select auth.jwt()) ->> 'client_id' is null)
  with check ((owner_id = (select auth.uid()) or viewer_id = (select auth.uid())) and (select auth.jwt()) ->> 'client_id' is null);

create policy "Owners can delete their shares from their own session"
  on public.location_shares for delete to authenticated
  using (owner_id = (select auth.uid()) and (select auth.jwt()) ->> 'client_id' is null);

create trigger location_shares_revocation_is_final
  before update on public.location_shares
  for each row execute function private.forbid_unrevoke();

create trigger location_shares_per_owner_limit
  before insert on public.location_shares
  for each row execute function private.enforce_per_user_limit('owner_id', '100');

-- Shares an owner creates in any hour, revoked and deleted ones included
-- (private.enforce_creation_rate in 10_agent_keys.sql).
create or replace function private.max_location_shares_per_hour()
returns int language sql immutable set search_path = '' as $$ select 20 $$;
comment on function private.max_location_shares_per_hour() is
  'Location shares one owner may create in any hour, revoked and deleted ones included.';
revoke execute on function private.max_location_shares_per_hour() from public, anon, authenticated;

create trigger location_shares_per_owner_rate
  before insert on public.location_shares
  for each row execute function private.enforce_creation_rate('location_share', 'owner_id');

-- -----------------------------------------------------------------------------
-- share_location_with(email) → the share's id (the existing one if already shared)
-- -----------------------------------------------------------------------------
-- Security definer because the owner cannot read auth.users to find the viewer. An address
-- whose account has not confirmed it gets a waiting share (claimed at confirmation).
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
  select id into v_viewer from auth.users
  where lower(email) = v_email and deleted_at is null and email_confirmed_at is not null;
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
  'Shares the calling user''s location with EMAIL (now if an account has confirmed it, else when one does); returns the active share''s id.';
revoke execute on function private.share_location_with(text) from public, anon;
grant execute on function private.share_location_with(text) to authenticated;

create or replace function public.share_location_with(email text)
returns uuid
language sql
security invoker
set search_path = ''
as $$ select private.share_location_with(email) $$;
comment on function public.share_location_with(text) is
  'Lets the user with EMAIL have their agents ask for your location (each request still asks you).';
revoke execute on function public.share_location_with(text) from public, anon;
grant execute on function public.share_location_with(text) to authenticated;

-- -----------------------------------------------------------------------------
-- revoke_location_share(id): the owner revokes, or the viewer leaves
-- -----------------------------------------------------------------------------
-- Security invoker: RLS and the column grant decide; a share the caller cannot see or
-- that is already revoked is reported, not silently ignored.
create or replace function public.revoke_location_share(id uuid)
returns void
language plpgsql
security invoker
set search_path = ''
as $$
begin
  if (select auth.uid()) is null or (auth.jwt() ->> 'client_id') is not null then
    raise exception 'revoking a share needs your own session' using errcode = '42501';
  end if;
  if revoke_location_share.id is null then
    raise exception 'revoke_location_share needs a share id' using errcode = '22004';
  end if;
  update public.location_shares s set revoked_at = now()
  where s.id = revoke_location_share.id and s.revoked_at is null;
  if not found then
    raise exception 'no active share with that id is yours' using errcode = 'P0002';
  end if;
end;
$$;
comment on function public.revoke_location_share(uuid) is
  'Ends share ID: the owner revokes it or the viewer leaves it.';
revoke execute on function public.revoke_location_share(uuid) from public, anon;
grant execute on function public.revoke_location_share(uuid) to authenticated;

-- -----------------------------------------------------------------------------
-- An ended share cancels the viewer's waiting requests, forgets their results and drops
-- their always-allows
-- -----------------------------------------------------------------------------
-- The cancels go to the instances holding the owner's sockets (private.notify_cancel). A
-- request made through the share is bound to it: its sealed result is deleted and its row
-- is past keep_until at once, so the viewer's next poll finds nothing (waiting or sealed).
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

create trigger location_shares_end
  after update of revoked_at or delete on public.location_shares
  for each row execute function private.end_share();

-- -----------------------------------------------------------------------------
-- A share waiting for an email reaches the account once it has confirmed the address
-- -----------------------------------------------------------------------------
-- On INSERT of a row already confirmed, on UPDATE when email_confirmed_at is first set, and
-- on UPDATE of the email of a confirmed row (Supabase Auth writes the new address only once
-- its change is confirmed).
create or replace function private.claim_waiting_shares()
returns trigger
language plpgsql
security definer
set search_path = ''
as $$
begin
  if new.email is null or new.email_confirmed_at is null or new.deleted_at is not null then
    return new;
  end if;
  -- Already confirmed for this very address: its shares were claimed when it was confirmed.
  if tg_op = 'UPDATE' and old.email_confirmed_at is not null
     and lower(old.email) is not distinct from lower(new.email) then
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
  'AFTER INSERT/UPDATE on auth.users (no column list: Auth''s own migrations must stay free to alter its columns): shares waiting for that email reach the account once it has confirmed the address; returns at once for any other update.';
revoke execute on function private.claim_waiting_shares() from public, anon, authenticated;

-- CREATE OR REPLACE: dropping a trigger needs to own auth.users (supabase_auth_admin);
-- replacing one needs only the TRIGGER privilege the migration role holds. No column list
-- and no WHEN clause: either would make Auth's columns dependencies of ours, and a later
-- Supabase Auth migration altering them would fail (the function checks instead).
create or replace trigger whereabot_claim_waiting_shares
  after insert or update on auth.users
  for each row execute function private.claim_waiting_shares();
