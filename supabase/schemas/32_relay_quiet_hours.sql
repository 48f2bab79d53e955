-- =============================================================================
-- Quiet hours for the phone socket: the windows and the "may wake me" list (SPEC §14)
-- =============================================================================
-- The tables and private.quiet_until are in 17_quiet_hours.sql; relay.open_request asks
-- private.quiet_until before it pings or pushes anything.

-- The time-zone names a window may use, copied from pg_timezone_names (which reads and
-- parses every zone file on each query, ~30 ms): relay.set_quiet_hours looks a name up here
-- by its primary key instead. relay.refresh_time_zone_names copies it again at most daily
-- (the relay's reap asks), so a tzdata update reaches it within a day.
create table private.time_zone_names (
  name text primary key,
  refreshed_at timestamptz not null default now()
);
comment on table private.time_zone_names is
  'The IANA time-zone names Postgres knows (a copy of pg_timezone_names), for quiet hours'' zone check; refreshed daily.';
alter table private.time_zone_names enable row level security;

create or replace function relay.refresh_time_zone_names()
returns int
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_count int;
begin
  if (select t.refreshed_at from private.time_zone_names t limit 1) > now() - interval '1 day' then
    return 0;
  end if;
  -- One instance refreshes; the others find it fresh once it has.
  if not pg_try_advisory_xact_lock(hashtextextended('whereabot_time_zone_names:refresh', 0)) then
    return 0;
  end if;
  insert into private.time_zone_names (name)
  select z.name from pg_catalog.pg_timezone_names z
  on conflict (name) do update set refreshed_at = now();
  get diagnostics v_count = row_count;
  delete from private.time_zone_names where refreshed_at < now();
  return v_count;
end;
$$;
comment on function relay.refresh_time_zone_names() is
  'Copies pg_timezone_names into private.time_zone_names unless that was done within a day; returns the names copied (0: fresh already).';

create or replace function relay.quiet_hours(p_user uuid)
returns jsonb
language plpgsql
stable
security definer
set search_path = ''
as $$
begin
  if p_user is null then
    raise exception 'quiet_hours needs a user' using errcode = '22004';
  end if;
  return coalesce((
    select jsonb_agg(jsonb_build_object('days', to_jsonb(q.days), 'start', to_char(q.start_time, 'HH24:MI'),
                                        'end', to_char(q.end_time, 'HH24:MI'), 'time_zone', q.time_zone)
                     order by q.created_at, q.id)
    from public.quiet_hours q where q.user_id = p_user), '[]');
end;
$$;
comment on function relay.quiet_hours(uuid) is
  'USER''s quiet-hours windows as [{days, start, end, time_zone}] (HH:MM).';

-- Replaces USER's windows with P_WINDOWS (a JSON array of at most 8 {days, start, end,
-- time_zone}; [] clears them). A bad window is refused (22023) with a sentence naming it
-- and which part is wrong; nothing is stored then.
create or replace function relay.set_quiet_hours(p_user uuid, p_windows jsonb)
returns jsonb
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_window jsonb;
  v_index int := 0;
  v_days smallint[];
  v_start time;
  v_end time;
  v_zone text;
begin
  if p_user is null or p_windows is null then
    raise exception 'set_quiet_hours needs a user and windows' using errcode = '22004';
  end if;
  if jsonb_typeof(p_windows) <> 'array' or jsonb_array_length(p_windows) > 8 then
    raise exception 'quiet hours are a list of at most 8 windows' using errcode = '22023';
  end if;
  perform pg_advisory_xact_lock(hashtextextended('whereabot_quiet_hours:' || p_user::text, 0));
  delete from public.quiet_hours where user_id = p_user;
  for v_window in select value from jsonb_array_elements(p_windows) loop
    v_index := v_index + 1;
    if jsonb_typeof(v_window) <> 'object' then
      raise exception 'window %: not an object', v_index using errcode = '22023';
    end if;
    if jsonb_typeof(v_window -> 'days') <> 'array' or jsonb_array_length(v_window -> 'days') not between 1 and 7
       or exists (select from jsonb_array_elements(v_window -> 'days') d
                  where jsonb_typeof(d) <> 'number' or d::text not in ('1', '2', '3', '4', '5', '6', '7')) then
      raise exception 'window %: days must be 1 to 7 ISO weekdays (1 = Monday)', v_index using errcode = '22023';
    end if;
    select array_agg(distinct d::text::smallint order by d::text::smallint) into v_days
    from jsonb_array_elements(v_window -> 'days') d;
    if coalesce(v_window ->> 'start', '') !~ '^([01][0-9]|2[0-3]):[0-5][0-9]$'
       or coalesce(v_window ->> 'end', '') !~ '^([01][0-9]|2[0-3]):[0-5][0-9]$' then
      raise exception 'window %: start and end must be times as HH:MM', v_index using errcode = '22023';
    end if;
    v_start := (v_window ->> 'start')::time;
    v_end := (v_window ->> 'end')::time;
    if v_start = v_end then
      raise exception 'window %: the end must differ from the start', v_index using errcode = '22023';
    end if;
    v_zone := v_window ->> 'time_zone';
    if v_zone is null or char_length(v_zone) not between 1 and 64
       or not exists (select from private.time_zone_names where name = v_zone) then
      raise exception 'window %: unknown time zone (use an IANA name such as Europe/Berlin)', v_index
        using errcode = '22023';
    end if;
    insert into public.quiet_hours (user_id, days, start_time, end_time, time_zone)
    values (p_user, v_days, v_start, v_end, v_zone);
  end loop;
  return relay.quiet_hours(p_user);
end;
$$;
comment on function relay.set_quiet_hours(uuid, jsonb) is
  'Replaces USER''s quiet-hours windows (at most 8; [] clears); a bad window is refused naming it; returns the windows.';

create or replace function relay.may_wake_agents(p_user uuid)
returns jsonb
language plpgsql
stable
security definer
set search_path = ''
as $$
begin
  if p_user is null then
    raise exception 'may_wake_agents needs a user' using errcode = '22004';
  end if;
  return coalesce((
    select jsonb_agg(jsonb_build_object('client_id', m.client_id, 'client_name', m.client_name,
                                        'requester_id', m.requester_id) order by m.created_at, m.id)
    from public.may_wake_agents m where m.user_id = p_user), '[]');
end;
$$;
comment on function relay.may_wake_agents(uuid) is
  'The agents USER lets through their quiet hours, as [{client_id, client_name, requester_id}].';

-- P_VALUE true marks the agent (its name from the OAuth client, when there is one), false
-- clears the mark. A requester must share with USER.
create or replace function relay.set_may_wake(p_user uuid, p_client_id text, p_requester uuid, p_value boolean)
returns jsonb
language plpgsql
security definer
set search_path = ''
as $$
begin
  if p_user is null or p_client_id is null or p_value is null then
    raise exception 'set_may_wake needs a user, a client id and a value' using errcode = '22004';
  end if;
  if p_requester is not null and p_requester <> p_user and not exists (
       select from public.location_shares where owner_id = p_user and viewer_id = p_requester and revoked_at is null) then
    raise exception 'the requester does not see your location' using errcode = '42501';
  end if;
  if p_value then
    insert into public.may_wake_agents (user_id, client_id, client_name, requester_id)
    values (p_user, p_client_id, coalesce(relay.client_name(p_client_id), ''), nullif(p_requester, p_user))
    on conflict on constraint may_wake_agents_once do nothing;
  else
    delete from public.may_wake_agents
    where user_id = p_user and client_id = p_client_id and requester_id is not distinct from nullif(p_requester, p_user);
  end if;
  return relay.may_wake_agents(p_user);
end;
$$;
comment on function relay.set_may_wake(uuid, text, uuid, boolean) is
  'USER marks (true) or unmarks (false) an agent as one that may wake them in quiet hours; returns the list.';

revoke execute on function relay.quiet_hours(uuid), relay.set_quiet_hours(uuid, jsonb), relay.may_wake_agents(uuid),
  relay.set_may_wake(uuid, text, uuid, boolean)
  from public, anon, authenticated, service_role;
revoke execute on function relay.refresh_time_zone_names() from public, anon, authenticated, service_role;
grant execute on function relay.quiet_hours(uuid), relay.set_quiet_hours(uuid, jsonb), relay.may_wake_agents(uuid),
  relay.set_may_wake(uuid, text, uuid, boolean)
  to whereabot_relay;
grant execute on function relay.refresh_time_zone_names() to whereabot_relay;
