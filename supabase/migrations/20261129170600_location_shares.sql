-- =============================================================================
-- Location shares: an owner lets a viewer's agents ask for the owner's location
-- =============================================================================
-- Every request still needs the owner's consent on their phone (or their always-allow
-- for that agent and viewer). The owner creates and revokes; the viewer sees shares made
-- to them and may leave one (revoked_at). Revocation is final; share again to renew.

create table if not exists public.location_shares (
  id uuid primary key default gen_random_uuid(),
  owner_id uuid not null references auth.users (id) on delete cascade,
  viewer_id uuid not null references auth.users (id) on delete cascade,
  created_at timestamptz not null default now(),
  revoked_at timestamptz,
  constraint location_shares_with_someone_else check (owner_id <> viewer_id)
);
comment on table public.location_shares is
  'Owner lets viewer''s agents request the owner''s location (each request still asks the owner).';

create index if not exists location_shares_owner_id_idx on public.location_shares (owner_id);
create index if not exists location_shares_viewer_id_idx on public.location_shares (viewer_id);
create unique index if not exists location_shares_one_active_idx
  on public.location_shares (owner_id, viewer_id) where revoked_at is null;

alter table public.location_shares enable row level security;

revoke all on public.location_shares from anon, authenticated;
grant select, insert, delete on public.location_shares to authenticated;
grant update (revoked_at) on public.location_shares to authenticated;

drop policy if exists "Owners and viewers can read their shares" on public.location_shares;
create policy "Owners and viewers can read their shares"
  on public.location_shares for select to authenticated
  using (owner_id = (select auth.uid()) or viewer_id = (select auth.uid()));

drop policy if exists "Users can share their own location from their own session" on public.location_shares;
create policy "Users can share their own location from their own session"
  on public.location_shares for insert to authenticated
  with check (owner_id = (select auth.uid())
              and (select auth.jwt() ->> 'client_id') is null
              and revoked_at is null);

drop policy if exists "Owners can revoke and viewers can leave shares from their own session" on public.location_shares;
create policy "Owners can revoke and viewers can leave shares from their own session"
  on public.location_shares for update to authenticated
  using ((owner_id = (select auth.uid()) or viewer_id = (select auth.uid()))
         and (select auth.jwt() ->> 'client_id') is null)
  with check ((owner_id = (select auth.uid()) or viewer_id = (select auth.uid()))
              and (select auth.jwt() ->> 'client_id') is null);

drop policy if exists "Owners can delete their shares from their own session" on public.location_shares;
create policy "Owners can delete their shares from their own session"
  on public.location_shares for delete to authenticated
  using (owner_id = (select auth.uid()) and (select auth.jwt() ->> 'client_id') is null);

drop trigger if exists location_shares_revocation_is_final on public.location_shares;
create trigger location_shares_revocation_is_final
  before update on public.location_shares
  for each row execute function private.forbid_unrevoke();

drop trigger if exists location_shares_per_owner_limit on public.location_shares;
create trigger location_shares_per_owner_limit
  before insert on public.location_shares
  for each row execute function private.enforce_per_user_limit('owner_id', '100');

-- -----------------------------------------------------------------------------
-- share_location_with(email) → the share's id (the existing one if already shared)
-- -----------------------------------------------------------------------------
-- Security definer because the owner cannot read auth.users to find the viewer.
create or replace function private.share_location_with(p_email text)
returns uuid
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_owner uuid := auth.uid();
  v_viewer uuid;
  v_share uuid;
begin
  if v_owner is null or (auth.jwt() ->> 'client_id') is not null then
    raise exception 'sharing your location needs your own session' using errcode = '42501';
  end if;
  if p_email is null or btrim(p_email) !~ '^[^@[:space:]]+@[^@[:space:]]+$' then
    raise exception 'share_location_with needs an email address' using errcode = '22023';
  end if;
  select id into v_viewer from auth.users
  where lower(email) = lower(btrim(p_email)) and deleted_at is null;
  if v_viewer is null then
    raise exception 'no Whereabot user has that email address' using errcode = 'P0002';
  end if;
  if v_viewer = v_owner then
    raise exception 'you cannot share your location with yourself' using errcode = '22023';
  end if;
  select id into v_share from public.location_shares
  where owner_id = v_owner and viewer_id = v_viewer and revoked_at is null;
  if v_share is null then
    insert into public.location_shares (owner_id, viewer_id)
    values (v_owner, v_viewer) returning id into v_share;
  end if;
  return v_share;
end;
$$;
comment on function private.share_location_with(text) is
  'Shares the calling user''s location with the user who has EMAIL; returns the active share''s id.';
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
