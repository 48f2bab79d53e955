-- =============================================================================
-- Quiet hours, and the agents that may wake the person during them (SPEC §14)
-- =============================================================================
-- A person sets windows (ISO weekdays of the start, a start and an end local time, an IANA
-- time zone; a window whose end is earlier than its start crosses midnight) from their
-- own session: the phone socket (relay.set_quiet_hours) or the API with RLS. No agent
-- token reads or writes either table: a window says when a person sleeps, and the mark
-- says which agent may wake them, both only the person's business. relay.open_request
-- asks private.quiet_until before anything is pinged or pushed, and it is asked again
-- before every later ping or push of a request already open (the pings waiting on hello,
-- the backstop poll, every push stage): a window that begins while a request waits holds
-- for it too (docs/agents.md, "Quiet hours").

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
  'private.quiet_until (every request opened, and every later ping and push of one) and the person''s list: the windows of one user.';

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
