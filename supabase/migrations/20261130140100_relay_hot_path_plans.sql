-- =============================================================================
-- Helpers on a locate's path keep their plans
-- =============================================================================
-- A LANGUAGE sql function with `set search_path` cannot be inlined, and when a PL/pgSQL
-- function calls it, it is parsed and planned again at every call (a SQL function's plan
-- lives only as long as the calling statement). With track_functions on, that cost
-- private.owner_instances 68 µs and private.instance_channel 32 µs per call — more than
-- the work itself. As PL/pgSQL functions their statements are planned once per session.
-- Same definitions, same results (the pgTAP and notification tests pin them).

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

create or replace function private.instance_channel(p_instance text)
returns text
language plpgsql
immutable
set search_path = ''
as $$
begin
  return 'whereabot_i_' || left(encode(pg_catalog.sha256(pg_catalog.convert_to(p_instance, 'UTF8')), 'hex'), 32);
end;
$$;

create or replace function private.owner_instances(p_owner uuid)
returns text[]
language plpgsql
stable
security definer
set search_path = ''
as $$
declare
  v_instances text[];
begin
  select coalesce(array_agg(distinct c.instance_id), '{}') into v_instances
  from relay.connections c where c.user_id = p_owner;
  return v_instances;
end;
$$;

create or replace function private.notify_cancel(p_id uuid, p_owner uuid)
returns void
language plpgsql
security definer
set search_path = ''
as $$
begin
  perform private.notify_instances(private.owner_instances(p_owner),
    jsonb_build_object('kind', 'cancel', 'id', p_id, 'owner', p_owner));
end;
$$;

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

create or replace function private.locate_message(p_request relay.pending_requests)
returns jsonb
language plpgsql
stable
security definer
set search_path = ''
as $$
begin
  return jsonb_build_object(
    'id', p_request.id,
    'client_id', p_request.client_id,
    'agent_name', nullif(private.clean_display_text(p_request.client_name, 200), ''),
    'expires_ms', (extract(epoch from p_request.expires_at) * 1000)::bigint,
    'requester', case when p_request.requester_id is null then null
                      else private.user_card(p_request.requester_id) end);
end;
$$;

create or replace function private.locate_ping(p_request relay.pending_requests)
returns jsonb
language plpgsql
stable
security definer
set search_path = ''
as $$
begin
  return jsonb_build_object('type', 'locate', 'owner', p_request.owner_id,
                            'reply_key', encode(p_request.reply_key, 'base64'))
         || private.locate_message(p_request);
end;
$$;
