-- =============================================================================
-- Stale OAuth clients: listed and retired by the operator (issue 39)
-- =============================================================================
-- Some MCP clients register a new OAuth client (RFC 7591) on every fresh connection, so a
-- project collects clients nobody uses. These two functions are for the database admin
-- (the SQL editor's `postgres` role), never the API or the relay: they list dynamically
-- registered clients that have had no grant and no session for `p_days` days, and retire
-- them as Supabase Auth's admin API does (deleted_at set; an agent holding one must
-- register again: "Unrecognized client_id"). Clients registered by hand are never touched.
create or replace function private.stale_oauth_clients(p_days integer default 30)
returns table (id uuid, client_name text, registered_at timestamptz, last_used_at timestamptz)
language plpgsql
stable
set search_path = ''
as $$
begin
  if p_days is null or p_days not between 1 and 3650 then
    raise exception 'p_days must be from 1 to 3650, not %', p_days using errcode = '22023';
  end if;
  return query
  select c.id, c.client_name, c.created_at,
         greatest((select max(coalesce(g.revoked_at, now())) from auth.oauth_consents g where g.client_id = c.id),
                  (select max(coalesce(s.updated_at, s.created_at)) from auth.sessions s where s.oauth_client_id = c.id))
  from auth.oauth_clients c
  where c.registration_type = 'dynamic' and c.deleted_at is null
    and c.created_at < now() - make_interval(days => p_days)
    and not exists (select from auth.oauth_consents g where g.client_id = c.id
                    and (g.revoked_at is null or g.revoked_at > now() - make_interval(days => p_days)))
    and not exists (select from auth.sessions s where s.oauth_client_id = c.id
                    and coalesce(s.updated_at, s.created_at, now()) > now() - make_interval(days => p_days))
  order by c.created_at;
end;
$$;
comment on function private.stale_oauth_clients(integer) is
  'For the database admin: dynamically registered OAuth clients with no live grant and no session in p_days days (1 to 3650), oldest first.';
revoke execute on function private.stale_oauth_clients(integer) from public, anon, authenticated, service_role;

create or replace function private.retire_stale_oauth_clients(p_days integer default 30)
returns integer
language plpgsql
set search_path = ''
as $$
declare
  v_count integer;
begin
  update auth.oauth_clients c set deleted_at = now(), updated_at = now()
  where c.id in (select s.id from private.stale_oauth_clients(p_days) s);
  get diagnostics v_count = row_count;
  return v_count;
end;
$$;
comment on function private.retire_stale_oauth_clients(integer) is
  'For the database admin: retires (deleted_at, as Supabase Auth''s admin API does) the clients private.stale_oauth_clients(p_days) lists; returns how many.';
revoke execute on function private.retire_stale_oauth_clients(integer) from public, anon, authenticated, service_role;
