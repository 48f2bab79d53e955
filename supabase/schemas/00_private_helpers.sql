-- =============================================================================
-- Private helpers shared by every feature
-- =============================================================================
-- Schema `private` is never exposed by Supabase's API. It holds security-definer
-- functions and helpers that user-facing code must not call directly. This file has the
-- ones every feature uses: NOTIFY with its size checked, per-user caps, final revocation,
-- push targets that keep their owner, and text safe to show to someone else.

create schema private;
revoke all on schema private from public, anon;
-- Signed-in users may reach the few functions granted to them by name (those behind the
-- public API and the RLS policies); every other function here is closed to them.
grant usage on schema private to authenticated;
comment on schema private is
  'Helpers and security-definer functions behind the public API; never exposed by PostgREST.';

-- Every function here revokes EXECUTE from public explicitly: per-schema default
-- privileges cannot take away PostgreSQL's global default grant to PUBLIC.

-- -----------------------------------------------------------------------------
-- private.notify: NOTIFY with the payload size checked
-- -----------------------------------------------------------------------------
-- PostgreSQL refuses payloads of 8000 bytes or more at commit time, which would surface
-- far from the cause; checking here fails the statement that built the payload instead.
-- The message names the channel and size only, never the payload.
create or replace function private.notify(p_channel text, p_payload jsonb)
returns void
language plpgsql
set search_path = ''
as $$
declare
  v_text text := p_payload::text;
begin
  if p_channel is null or p_payload is null then
    raise exception 'notify needs a channel and a payload' using errcode = '22004';
  end if;
  if octet_length(v_text) >= 8000 then
    raise exception 'notification for % is % bytes; the limit is 7999', p_channel, octet_length(v_text)
      using errcode = '54000';
  end if;
  perform pg_catalog.pg_notify(p_channel, v_text);
end;
$$;
comment on function private.notify(text, jsonb) is
  'pg_notify with a JSON payload, refused (54000) at 8000 bytes or more.';
revoke execute on function private.notify(text, jsonb) from public, anon, authenticated;

-- -----------------------------------------------------------------------------
-- private.enforce_per_user_limit: a cap on rows per user
-- -----------------------------------------------------------------------------
-- A BEFORE INSERT trigger: enforce_per_user_limit('user_id', '20') refuses a row once the
-- user already has 20 (counting only rows whose `revoked_at` is null, if the table has it).
-- Security definer so that the count sees every row, not only those RLS shows.
create or replace function private.enforce_per_user_limit()
returns trigger
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_column text := tg_argv[0];
  v_limit int := tg_argv[1]::int;
  v_user uuid;
  v_count int;
  v_has_revoked boolean;
begin
  execute format('select ($1).%I', v_column) into v_user using new;
  select exists (
    select from pg_catalog.pg_attribute
    where attrelid = tg_relid and attname = 'revoked_at' and not attisdropped
  ) into v_has_revoked;
  execute format('select count(*) from %I.%I where %I = $1 %s',
                 tg_table_schema, tg_table_name, v_column,
                 case when v_has_revoked then 'and revoked_at is null' else '' end)
    into v_count using v_user;
  if v_count >= v_limit then
    raise exception '% allows at most % rows per user', tg_table_name, v_limit
      using errcode = '54000';
  end if;
  return new;
end;
$$;
comment on function private.enforce_per_user_limit() is
  'BEFORE INSERT trigger: refuses rows past a per-user cap (54000). Args: user column, cap.';
revoke execute on function private.enforce_per_user_limit() from public, anon, authenticated;

-- -----------------------------------------------------------------------------
-- private.lock_user_inserts: one account's inserts one at a time
-- -----------------------------------------------------------------------------
-- A BEFORE INSERT trigger named so that it fires before the table's per-user limit trigger
-- (triggers fire in name order: lock_user < per_user_limit), so the count the limit makes
-- sees every committed row of the account.
create or replace function private.lock_user_inserts()
returns trigger
language plpgsql
set search_path = ''
as $$
begin
  perform pg_catalog.pg_advisory_xact_lock(tg_relid::int, pg_catalog.hashtext(new.user_id::text));
  return new;
end;
$$;
comment on function private.lock_user_inserts() is
  'BEFORE INSERT trigger: serializes one account''s inserts into the table (transaction advisory lock), so a per-user cap holds under concurrency.';
revoke execute on function private.lock_user_inserts() from public, anon, authenticated;

-- -----------------------------------------------------------------------------
-- private.forbid_unrevoke: revocation is final
-- -----------------------------------------------------------------------------
create or replace function private.forbid_unrevoke()
returns trigger
language plpgsql
set search_path = ''
as $$
begin
  if old.revoked_at is not null and new.revoked_at is distinct from old.revoked_at then
    raise exception '% row % is revoked; revocation cannot be undone', tg_table_name, old.id
      using errcode = '42501';
  end if;
  return new;
end;
$$;
comment on function private.forbid_unrevoke() is
  'BEFORE UPDATE trigger: once revoked_at is set it cannot be cleared or changed.';
revoke execute on function private.forbid_unrevoke() from public, anon, authenticated;

-- -----------------------------------------------------------------------------
-- private.forbid_owner_change: a row stays with the account that first saved it
-- -----------------------------------------------------------------------------
create or replace function private.forbid_owner_change()
returns trigger
language plpgsql
set search_path = ''
as $$
begin
  if new.user_id is distinct from old.user_id then
    raise exception '% rows belong to the account that first saved them', tg_table_name
      using errcode = '42501';
  end if;
  return new;
end;
$$;
comment on function private.forbid_owner_change() is
  'BEFORE UPDATE OF user_id trigger: a push target stays with the account that first saved it (42501).';
revoke execute on function private.forbid_owner_change() from public, anon, authenticated;

-- -----------------------------------------------------------------------------
-- private.clean_display_text(text, max) → the text safe to show to someone else
-- -----------------------------------------------------------------------------
-- Removes C0/C1 controls and the invisible format characters that can disguise a name
-- (bidi overrides and isolates, zero-width characters, soft hyphen, BOM), trims, cuts.
-- PL/pgSQL rather than SQL: a SQL function with `set search_path` is planned again at every
-- call from PL/pgSQL, a PL/pgSQL one once per session.
create or replace function private.clean_display_text(p_text text, p_max int)
returns text
language plpgsql
immutable
set search_path = ''
as $$
begin
  return left(btrim(regexp_replace(coalesce(p_text, ''),
    '[\u0001-\u001F\u007F-\u009F\u00AD\u061C\u115F\u1160\u180E\u200B-\u200F\u2028-\u202E\u2060-\u206F\u3164\uFEFF\uFFA0\uFFF9-\uFFFB]',
    '', 'g')), p_max);
end;
$$;
comment on function private.clean_display_text(text, int) is
  'TEXT without control or invisible format characters, trimmed, cut to MAX characters.';
revoke execute on function private.clean_display_text(text, int) from public, anon, authenticated;

-- -----------------------------------------------------------------------------
-- private.user_card: how a user is shown to others
-- -----------------------------------------------------------------------------
-- Display names come from user-editable metadata, so they are cleaned and cut to 80
-- characters; the email is always the account's own.
create or replace function private.user_card(p_user uuid)
returns jsonb
language plpgsql
stable
security definer
set search_path = ''
as $$
begin
  return (select jsonb_build_object(
    'user_id', u.id,
    'name', coalesce(nullif(private.clean_display_text(u.raw_user_meta_data ->> 'full_name', 80), ''),
                     nullif(private.clean_display_text(u.raw_user_meta_data ->> 'name', 80), ''),
                     private.clean_display_text(split_part(u.email, '@', 1), 80)),
    'email', u.email)
  from auth.users u
  where u.id = p_user);
end;
$$;
comment on function private.user_card(uuid) is
  'The {user_id, name (cleaned, at most 80 characters), email (the account''s)} shown for a user in pings and sharing lists.';
revoke execute on function private.user_card(uuid) from public, anon, authenticated;
