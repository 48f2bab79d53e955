-- =============================================================================
-- Relay sharing: resolve `person`, list people sharing with a user
-- =============================================================================

-- -----------------------------------------------------------------------------
-- relay.resolve_person(viewer, person) → owners who share with VIEWER and match PERSON
-- -----------------------------------------------------------------------------
-- PERSON matches an owner's email, or their name, case-insensitively. No row: 404 for
-- the agent; several rows: 409 listing each "Name (email)".
create or replace function relay.resolve_person(p_viewer uuid, p_person text)
returns table (owner_id uuid, name text, email text)
language plpgsql
stable
security definer
set search_path = ''
as $$
begin
  if p_viewer is null then
    raise exception 'resolve_person needs a viewer' using errcode = '22004';
  end if;
  if p_person is null or char_length(btrim(p_person)) not between 1 and 320 then
    raise exception 'person must be 1 to 320 characters' using errcode = '22023';
  end if;
  return query
    select c.owner_id, c.name, c.email
    from relay.people_sharing_with(p_viewer) c
    where lower(c.email) = lower(btrim(p_person)) or lower(c.name) = lower(btrim(p_person));
end;
$$;
comment on function relay.resolve_person(uuid, text) is
  'Owners with an active share to VIEWER whose email or name is PERSON (case-insensitive).';

-- -----------------------------------------------------------------------------
-- relay.people_sharing_with(viewer) → owner_id, name, email of each active share
-- -----------------------------------------------------------------------------
create or replace function relay.people_sharing_with(p_viewer uuid)
returns table (owner_id uuid, name text, email text)
language plpgsql
stable
security definer
set search_path = ''
as $$
begin
  if p_viewer is null then
    raise exception 'people_sharing_with needs a viewer' using errcode = '22004';
  end if;
  return query
    select s.owner_id, card ->> 'name', card ->> 'email'
    from public.location_shares s
    cross join lateral private.user_card(s.owner_id) card
    where s.viewer_id = p_viewer and s.revoked_at is null
    order by lower(card ->> 'name'), card ->> 'email';
end;
$$;
comment on function relay.people_sharing_with(uuid) is
  'The people (name, email) who share their location with VIEWER, by name.';

revoke execute on all functions in schema relay from public, anon, authenticated, service_role;
grant execute on function relay.resolve_person(uuid, text), relay.people_sharing_with(uuid)
  to whereabot_relay;
