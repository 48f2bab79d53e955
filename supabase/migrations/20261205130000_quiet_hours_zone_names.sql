-- Quiet hours' zone check costs an index probe instead of a read of the whole time-zone
-- database (README.md, "Security model"): an eight-window quiet_hours message cost
-- ~250 ms of database time, and a phone could send them back to back.

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

revoke execute on function relay.refresh_time_zone_names() from public, anon, authenticated, service_role;
grant execute on function relay.refresh_time_zone_names() to whereabot_relay;

select relay.refresh_time_zone_names();

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
