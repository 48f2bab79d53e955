-- =============================================================================
-- Relay sharing: resolve `person`, list people sharing with a user
-- =============================================================================
-- Display names come from user-editable metadata (raw_user_meta_data): anyone can call
-- themselves "alice@example.com". So `person` input with an `@` matches account emails
-- only (exact, case-insensitive), other input matches display names, and names are
-- stripped of control and format characters and cut to 80 characters wherever they reach
-- an agent or a phone (private.user_card). Every answer to a shared request names the
-- owner's account email.

-- -----------------------------------------------------------------------------
-- relay.resolve_person(viewer, person) → owners who share with VIEWER and match PERSON
-- -----------------------------------------------------------------------------
-- No row: 404 for the agent; several rows: 409 listing each "Name (email)".
create or replace function relay.resolve_person(p_viewer uuid, p_person text)
returns table (owner_id uuid, name text, email text)
language plpgsql
stable
security definer
set search_path = ''
as $$
declare
  v_person text := btrim(p_person);
begin
  if p_viewer is null then
    raise exception 'resolve_person needs a viewer' using errcode = '22004';
  end if;
  if p_person is null or char_length(v_person) not between 1 and 320 then
    raise exception 'person must be 1 to 320 characters' using errcode = '22023';
  end if;
  if strpos(v_person, '@') > 0 then
    return query
      select c.owner_id, c.name, c.email
      from relay.people_sharing_with(p_viewer) c
      where lower(c.email) = lower(v_person);
  else
    return query
      select c.owner_id, c.name, c.email
      from relay.people_sharing_with(p_viewer) c
      where lower(c.name) = lower(v_person);
  end if;
end;
$$;
comment on function relay.resolve_person(uuid, text) is
  'Owners with an active share to VIEWER whose account email (PERSON contains @) or display name (otherwise) is PERSON, case-insensitive.';

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

revoke execute on function relay.resolve_person(uuid, text), relay.people_sharing_with(uuid)
  from public, anon, authenticated, service_role;
grant execute on function relay.resolve_person(uuid, text), relay.people_sharing_with(uuid)
  to whereabot_relay;
