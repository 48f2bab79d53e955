-- =============================================================================
-- Person matching that a lookalike display name cannot fool
-- =============================================================================
-- Display names come from user-editable metadata (raw_user_meta_data): anyone can call
-- themselves "alice@example.com". So `person` input with an `@` matches account emails
-- only (exact, case-insensitive), other input matches display names, and names are
-- stripped of control and format characters and cut to 80 characters wherever they reach
-- an agent or a phone. Every answer to a shared request names the owner's account email.

-- -----------------------------------------------------------------------------
-- private.clean_display_text(text, max) → the text safe to show to someone else
-- -----------------------------------------------------------------------------
-- Removes C0/C1 controls and the invisible format characters that can disguise a name
-- (bidi overrides and isolates, zero-width characters, soft hyphen, BOM), trims, cuts.
create or replace function private.clean_display_text(p_text text, p_max int)
returns text
language sql
immutable
set search_path = ''
as $$
  select left(btrim(regexp_replace(coalesce(p_text, ''),
    '[\u0001-\u001F\u007F-\u009F\u00AD\u061C\u115F\u1160\u180E\u200B-\u200F\u2028-\u202E\u2060-\u206F\u3164\uFEFF\uFFA0\uFFF9-\uFFFB]',
    '', 'g')), p_max)
$$;
comment on function private.clean_display_text(text, int) is
  'TEXT without control or invisible format characters, trimmed, cut to MAX characters.';
revoke execute on function private.clean_display_text(text, int) from public, anon, authenticated;

-- -----------------------------------------------------------------------------
-- private.user_card: how a user is shown to others (name cleaned, at most 80)
-- -----------------------------------------------------------------------------
create or replace function private.user_card(p_user uuid)
returns jsonb
language sql
stable
security definer
set search_path = ''
as $$
  select jsonb_build_object(
    'user_id', u.id,
    'name', coalesce(nullif(private.clean_display_text(u.raw_user_meta_data ->> 'full_name', 80), ''),
                     nullif(private.clean_display_text(u.raw_user_meta_data ->> 'name', 80), ''),
                     private.clean_display_text(split_part(u.email, '@', 1), 80)),
    'email', u.email)
  from auth.users u
  where u.id = p_user
$$;
comment on function private.user_card(uuid) is
  'The {user_id, name (cleaned, at most 80 characters), email (the account''s)} shown for a user in pings and sharing lists.';
revoke execute on function private.user_card(uuid) from public, anon, authenticated;

-- -----------------------------------------------------------------------------
-- relay.resolve_person(viewer, person) → owners who share with VIEWER and match PERSON
-- -----------------------------------------------------------------------------
-- PERSON with an `@` matches account emails only; anything else matches display names.
-- Both case-insensitive and exact. No row: 404 for the agent; several rows: 409.
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

revoke execute on function relay.resolve_person(uuid, text) from public, anon, authenticated, service_role;
grant execute on function relay.resolve_person(uuid, text) to whereabot_relay;
