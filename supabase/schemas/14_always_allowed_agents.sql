-- =============================================================================
-- Always-allowed agents: agents a user lets locate them without asking
-- =============================================================================
-- Written by the app when the user taps Always allow, deleted on Remove. Only the user's
-- own session may write: an agent's token carries `client_id`, so an agent can read its
-- user's list but never add itself. Generic ids (`unknown`, `agent-key`) name no single
-- agent and are refused. requester_id is null for the user's own agents, else the person
-- whose agent this is (location sharing: always-allow is per owner, agent and requester).
-- precision says how the phone answers the agent; expires_at ends a choice made "for 1
-- hour": every function reads an expired row as absent (it stays until it is replaced or
-- removed, or the user's next change deletes it). last_used_at, reminded_at and
-- reminder_pushed_at serve the reminders of SPEC §14 (34_relay_grant_reminders.sql).

create table public.always_allowed_agents (
  id uuid primary key default gen_random_uuid(),
  user_id uuid not null references auth.users (id) on delete cascade,
  client_id text not null,
  client_name text not null default '' check (char_length(client_name) <= 200),
  requester_id uuid references auth.users (id) on delete cascade,
  created_at timestamptz not null default now(),
  precision text not null default 'precise' check (precision in ('precise', 'approximate')),
  expires_at timestamptz,
  last_used_at timestamptz,
  reminded_at timestamptz,
  reminder_pushed_at timestamptz,
  constraint always_allowed_agents_client_id_names_one_agent
    check (client_id not in ('unknown', 'agent-key') and char_length(client_id) between 1 and 255),
  constraint always_allowed_agents_requester_is_someone_else
    check (requester_id is distinct from user_id),
  constraint always_allowed_agents_once
    unique nulls not distinct (user_id, client_id, requester_id)
);
comment on table public.always_allowed_agents is
  'Agents (OAuth client ids) that may locate the user without a prompt; per requester for shared locations.';
comment on column public.always_allowed_agents.precision is
  'precise, or approximate: the phone answers this agent with the centre of a 0.025° grid cell, never a precise fix.';
comment on column public.always_allowed_agents.expires_at is
  'Until when the agent is allowed ("Allow for 1 hour"); null for always. An expired row counts as absent everywhere.';
comment on column public.always_allowed_agents.last_used_at is
  'When the agent last got a location under this row (relay.settle): the app shows it. Never where.';
comment on column public.always_allowed_agents.reminded_at is
  'When the person was last reminded of this for-good row, or kept it (SPEC §14 reminders); null: never.';
comment on column public.always_allowed_agents.reminder_pushed_at is
  'When the reminder of reminded_at went out as a push (relay.claim_reminder_push): once per reminder.';

-- always_allowed_agents_once (user_id, client_id, requester_id) serves every lookup by user_id.
create index always_allowed_agents_requester_id_idx on public.always_allowed_agents (requester_id);
comment on index public.always_allowed_agents_once is
  'relay.is_always_allowed and relay.claim_push (user, client, requester), the browser phone''s list by user, one row per choice.';
comment on index public.always_allowed_agents_requester_id_idx is
  'Deleting a requester''s account (cascade on requester_id), and ending a share (private.end_share).';

alter table public.always_allowed_agents enable row level security;

revoke all on public.always_allowed_agents from anon, authenticated;
grant select, insert, update, delete on public.always_allowed_agents to authenticated;

create policy "Users and their agents can read the always-allowed agents"
  on public.always_allowed_agents for select to authenticated
  using (user_id = (select auth.uid()));

create policy "Users can always-allow agents from their own session"
  on public.always_allowed_agents for insert to authenticated
  with check (user_id = (select auth.uid()) and (select auth.jwt()) ->> 'client_id' is null);

create policy "Users can change always-allowed agents from their own session"
  on public.always_allowed_agents for update to authenticated
  using (user_id = (select auth.uid()) and (select auth.jwt()) ->> 'client_id' is null)
  with check (user_id = (select auth.uid()) and (select auth.jwt()) ->> 'client_id' is null);

create policy "Users can remove always-allowed agents from their own session"
  on public.always_allowed_agents for delete to authenticated
  using (user_id = (select auth.uid()) and (select auth.jwt()) ->> 'client_id' is null);

-- One account's inserts wait for each other, so the cap holds under concurrency.
create trigger always_allowed_agents_lock_user
  before insert on public.always_allowed_agents
  for each row execute function private.lock_user_inserts();
create trigger always_allowed_agents_per_user_limit
  before insert on public.always_allowed_agents
  for each row execute function private.enforce_per_user_limit('user_id', '200');
