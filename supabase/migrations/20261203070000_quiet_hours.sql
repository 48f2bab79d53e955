-- Quiet hours (SPEC §14, issue 42 part 1): the windows and the "may wake me" marks, set
-- only from the person's own session; relay.open_request answers `quiet` (nothing opened,
-- pinged or pushed) for an agent that may not wake the owner during a window.

-- =============================================================================
-- Quiet hours, and the agents that may wake the person during them (SPEC §14)
-- =============================================================================
-- A person sets windows (ISO weekdays of the start, a start and an end local time, an IANA
-- time zone; a window whose end is earlier than its start crosses midnight) from their
-- own session: the phone socket (relay.set_quiet_hours) or the API with RLS. No agent
-- token reads or writes either table: a window says when a person sleeps, and the mark
-- says which agent may wake them, both only the person's business. relay.open_request
-- asks private.quiet_until before anything is pinged or pushed.

create table public.quiet_hours (
  id uuid primary key default gen_random_uuid(),
  user_id uuid not null references auth.users (id) on delete cascade,
  days smallint[] not null,
  start_time time not null,
  end_time time not null,
  time_zone text not null,
  created_at timestamptz not null default now(),
  constraint quiet_hours_days_are_iso_weekdays
    check (cardinality(days) between 1 and 7 and days <@ array[1, 2, 3, 4, 5, 6, 7]::smallint[]
           and array_position(days, null) is null),
  constraint quiet_hours_end_is_not_the_start check (end_time <> start_time),
  constraint quiet_hours_times_are_minutes
    check (date_trunc('minute', start_time) = start_time and date_trunc('minute', end_time) = end_time),
  constraint quiet_hours_time_zone_is_named check (char_length(time_zone) between 1 and 64)
);
comment on table public.quiet_hours is
  'Windows in which agents without the person''s "may wake me" mark get 503 and no phone is pinged or pushed.';
comment on column public.quiet_hours.days is
  'ISO weekdays (1 = Monday) on which the window starts, in time_zone.';

create index quiet_hours_user_id_idx on public.quiet_hours (user_id);
comment on index public.quiet_hours_user_id_idx is
  'private.quiet_until (every request opened) and the person''s list: the windows of one user.';

alter table public.quiet_hours enable row level security;

revoke all on public.quiet_hours from anon, authenticated;
grant select, insert, update, delete on public.quiet_hours to authenticated;

create policy "Users can read their quiet hours from their own session"
  on public.quiet_hours for select to authenticated
  using (user_id = (select auth.uid()) and (select auth.jwt()) ->> 'client_id' is null);

create policy "Users can set quiet hours from their own session"
  on public.quiet_hours for insert to authenticated
  with check (user_id = (select auth.uid()) and (select auth.jwt()) ->> 'client_id' is null);

create policy "Users can change their quiet hours from their own session"
  on public.quiet_hours for update to authenticated
  using (user_id = (select auth.uid()) and (select auth.jwt()) ->> 'client_id' is null)
  with check (user_id = (select auth.uid()) and (select auth.jwt()) ->> 'client_id' is null);

create policy "Users can remove their quiet hours from their own session"
  on public.quiet_hours for delete to authenticated
  using (user_id = (select auth.uid()) and (select auth.jwt()) ->> 'client_id' is null);

create trigger quiet_hours_lock_user
  before insert on public.quiet_hours
  for each row execute function private.lock_user_inserts();
create trigger quiet_hours_per_user_limit
  before insert on public.quiet_hours
  for each row execute function private.enforce_per_user_limit('user_id', '8');

-- requester_id is null for the person's own agents, else the person whose agent it is.
create table public.may_wake_agents (
  id uuid primary key default gen_random_uuid(),
  user_id uuid not null references auth.users (id) on delete cascade,
  client_id text not null,
  client_name text not null default '' check (char_length(client_name) <= 200),
  requester_id uuid references auth.users (id) on delete cascade,
  created_at timestamptz not null default now(),
  constraint may_wake_agents_client_id_names_one_agent
    check (client_id not in ('unknown', 'agent-key') and char_length(client_id) between 1 and 255),
  constraint may_wake_agents_requester_is_someone_else
    check (requester_id is distinct from user_id),
  constraint may_wake_agents_once
    unique nulls not distinct (user_id, client_id, requester_id)
);
comment on table public.may_wake_agents is
  'Agents the person lets through their quiet hours ("may wake me"); set only by the person.';

create index may_wake_agents_requester_id_idx on public.may_wake_agents (requester_id);
comment on index public.may_wake_agents_once is
  'private.quiet_until (user, client, requester) and the person''s list by user.';
comment on index public.may_wake_agents_requester_id_idx is
  'Deleting a requester''s account (cascade on requester_id).';

alter table public.may_wake_agents enable row level security;

revoke all on public.may_wake_agents from anon, authenticated;
grant select, insert, update, delete on public.may_wake_agents to authenticated;

create policy "Users can read who may wake them from their own session"
  on public.may_wake_agents for select to authenticated
  using (user_id = (select auth.uid()) and (select auth.jwt()) ->> 'client_id' is null);

create policy "Users can let agents wake them from their own session"
  on public.may_wake_agents for insert to authenticated
  with check (user_id = (select auth.uid()) and (select auth.jwt()) ->> 'client_id' is null);

create policy "Users can change who may wake them from their own session"
  on public.may_wake_agents for update to authenticated
  using (user_id = (select auth.uid()) and (select auth.jwt()) ->> 'client_id' is null)
  with check (user_id = (select auth.uid()) and (select auth.jwt()) ->> 'client_id' is null);

create policy "Users can stop agents waking them from their own session"
  on public.may_wake_agents for delete to authenticated
  using (user_id = (select auth.uid()) and (select auth.jwt()) ->> 'client_id' is null);

create trigger may_wake_agents_lock_user
  before insert on public.may_wake_agents
  for each row execute function private.lock_user_inserts();
create trigger may_wake_agents_per_user_limit
  before insert on public.may_wake_agents
  for each row execute function private.enforce_per_user_limit('user_id', '200');

-- -----------------------------------------------------------------------------
-- private.quiet_until: is the owner in quiet hours for this agent, and until when
-- -----------------------------------------------------------------------------
-- Null when no window of OWNER holds at P_NOW or the agent (CLIENT, REQUESTER) may wake
-- them; else the end of the window that holds (the latest, when several do) as
-- {until (timestamptz), local (HH:MM in the window's zone)}. A window crossing midnight
-- holds from its start on one of its days to its end the next day. One index lookup per
-- table; no scan of other users' rows.
create or replace function private.quiet_until(p_owner uuid, p_client_id text, p_requester uuid, p_now timestamptz)
returns jsonb
language plpgsql
stable
security definer
set search_path = ''
as $$
declare
  v_until timestamptz;
  v_zone text;
  v_end time;
begin
  select w.ends, w.time_zone, w.end_time into v_until, v_zone, v_end
  from (
    select q.time_zone, q.end_time,
           case
             when q.start_time < q.end_time
                  and extract(isodow from l.day)::smallint = any (q.days)
                  and l.clock >= q.start_time and l.clock < q.end_time
               then (l.day + q.end_time) at time zone q.time_zone
             when q.start_time > q.end_time
                  and extract(isodow from l.day)::smallint = any (q.days) and l.clock >= q.start_time
               then (l.day + 1 + q.end_time) at time zone q.time_zone
             when q.start_time > q.end_time
                  and extract(isodow from l.day - 1)::smallint = any (q.days) and l.clock < q.end_time
               then (l.day + q.end_time) at time zone q.time_zone
           end as ends
    from public.quiet_hours q
    cross join lateral (select (p_now at time zone q.time_zone)::date as day,
                               (p_now at time zone q.time_zone)::time as clock) l
    where q.user_id = p_owner
  ) w
  where w.ends is not null
  order by w.ends desc
  limit 1;
  if v_until is null or exists (
       select from public.may_wake_agents m
       where m.user_id = p_owner and m.client_id = p_client_id
         and m.requester_id is not distinct from nullif(p_requester, p_owner)) then
    return null;
  end if;
  return jsonb_build_object('until', v_until, 'local', to_char(v_end, 'HH24:MI'), 'time_zone', v_zone);
end;
$$;
comment on function private.quiet_until(uuid, text, uuid, timestamptz) is
  'Null, or {until, local (HH:MM), time_zone} of the quiet-hours window of OWNER holding at NOW for an agent that may not wake them.';
revoke execute on function private.quiet_until(uuid, text, uuid, timestamptz) from public, anon, authenticated;

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
       or not exists (select from pg_catalog.pg_timezone_names where name = v_zone) then
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
grant execute on function relay.quiet_hours(uuid), relay.set_quiet_hours(uuid, jsonb), relay.may_wake_agents(uuid),
  relay.set_may_wake(uuid, text, uuid, boolean)
  to whereabot_relay;

-- relay.open_request: the quiet-hours check before the cap and the insert.
create or replace function relay.open_request(
  p_id uuid, p_owner uuid, p_requester uuid, p_client_id text, p_client_name text,
  p_instance text, p_reply_key bytea, p_expires_at timestamptz, p_max_waiting int default 5,
  p_reason text default null)
returns jsonb
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_request relay.pending_requests;
  v_waiting int;
  v_holders text[];
  v_connections int;
  v_ping jsonb;
  v_quiet jsonb;
  v_reason text := nullif(private.clean_display_text(p_reason, 4000), '');
begin
  perform private.check_instance_id(p_instance);
  if p_id is null or p_owner is null then
    raise exception 'open_request needs a request id and an owner' using errcode = '22004';
  end if;
  if p_client_id is null or char_length(p_client_id) not between 1 and 255 then
    raise exception 'client_id must be 1 to 255 characters' using errcode = '22023';
  end if;
  if char_length(p_client_name) > 200 then
    raise exception 'client_name must be at most 200 characters' using errcode = '22023';
  end if;
  if p_reply_key is null or octet_length(p_reply_key) <> 32 then
    raise exception 'reply_key must be a 32-byte X25519 public key' using errcode = '22023';
  end if;
  if p_expires_at is null or p_expires_at <= now() or p_expires_at > now() + interval '10 minutes' then
    raise exception 'expires_at must be in the next 10 minutes' using errcode = '22023';
  end if;
  if char_length(v_reason) > 120 then
    raise exception 'reason must be at most 120 characters' using errcode = '22023';
  end if;
  if p_max_waiting is null or p_max_waiting not between 1 and 100 then
    raise exception 'max_waiting must be between 1 and 100' using errcode = '22023';
  end if;
  if not exists (select from auth.users where id = p_owner) then
    raise exception 'no such owner' using errcode = 'P0002';
  end if;
  if p_requester is not null and p_requester <> p_owner and not exists (
       select from public.location_shares
       where owner_id = p_owner and viewer_id = p_requester and revoked_at is null) then
    raise exception 'the owner does not share their location with the requester' using errcode = '42501';
  end if;

  -- One opener per owner at a time, so that the cap holds under concurrency; device_hello
  -- takes the same lock, so no hello of the owner's phones falls between this request's
  -- look at the owner's sockets and its commit.
  perform pg_advisory_xact_lock(hashtextextended('whereabot_open_request:' || p_owner::text, 0));

  if exists (select from relay.pending_requests where id = p_id) then
    return jsonb_build_object('status', 'exists', 'connections', null, 'ping', null);
  end if;
  -- Quiet hours (SPEC §14): nothing is stored, pinged or pushed for an agent that may not
  -- wake the owner; the agent learns until when (and the owner's name to say so).
  -- The common case (no windows at all) is one probe of an index, without the call.
  if exists (select from public.quiet_hours where user_id = p_owner) then
    v_quiet := private.quiet_until(p_owner, p_client_id, p_requester, now());
  end if;
  if v_quiet is not null then
    return jsonb_build_object('status', 'quiet', 'connections', null, 'ping', null,
      'quiet', v_quiet || jsonb_build_object('name', private.user_card(p_owner) ->> 'name',
        'until_ms', (extract(epoch from (v_quiet ->> 'until')::timestamptz) * 1000)::bigint));
  end if;
  -- The owner's own agents and the people sharing with them count separately, so a viewer
  -- can never keep the owner's own agents out; each requester also has a cap of their own
  -- across every owner who shares with them.
  -- Durable requests (tasks, async requests) are counted by open_durable_request against
  -- their own cap, so that an agent's tasks never fill the cap of calls that wait.
  select count(*) into v_waiting from relay.pending_requests
  where owner_id = p_owner and settled_at is null and expires_at > now() and not durable
    and requester_id is not distinct from nullif(p_requester, p_owner);
  if v_waiting < p_max_waiting and p_requester is not null and p_requester <> p_owner then
    perform pg_advisory_xact_lock(hashtextextended('whereabot_open_request_by:' || p_requester::text, 0));
    select count(*) into v_waiting from relay.pending_requests
    where requester_id = p_requester and settled_at is null and expires_at > now() and not durable;
  end if;
  select coalesce(array_agg(distinct instance_id), '{}'), count(*) into v_holders, v_connections
  from relay.connections where user_id = p_owner;
  if v_waiting >= p_max_waiting then
    return jsonb_build_object('status', 'too_many', 'connections', v_connections, 'ping', null);
  end if;

  insert into relay.pending_requests
    (id, owner_id, requester_id, client_id, client_name, waiter_instance, reply_key, expires_at, ask_reason)
  values (p_id, p_owner, nullif(p_requester, p_owner), p_client_id, p_client_name,
          p_instance, p_reply_key, p_expires_at, v_reason)
  returning * into v_request;

  if v_connections > 0 then
    v_ping := private.locate_ping(v_request);
    perform private.notify_instances(array_remove(v_holders, p_instance), v_ping || '{"kind":"locate"}');
  end if;
  return jsonb_build_object('status', 'opened', 'connections', v_connections,
    'ping', case when p_instance = any (v_holders) then v_ping end);
end;
$$;
comment on function relay.open_request(uuid, uuid, uuid, text, text, text, bytea, timestamptz, int, text) is
  'Opens a locate request for OWNER''s phones (NOTIFY whereabot_locate) unless MAX_WAITING are already waiting.';
