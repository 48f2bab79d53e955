-- =============================================================================
-- Private helpers shared by later migrations
-- =============================================================================
-- Schema `private` is never exposed by Supabase's API. It holds security-definer
-- functions and helpers that user-facing code must not call directly.

create schema if not exists private;
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
-- private.user_card: how a user is shown to others
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
    'name', left(coalesce(nullif(btrim(u.raw_user_meta_data ->> 'full_name'), ''),
                          nullif(btrim(u.raw_user_meta_data ->> 'name'), ''),
                          split_part(u.email, '@', 1)), 200),
    'email', u.email)
  from auth.users u
  where u.id = p_user
$$;
comment on function private.user_card(uuid) is
  'The {user_id, name (at most 200 characters), email} shown for a user in pings and sharing lists.';
revoke execute on function private.user_card(uuid) from public, anon, authenticated;
