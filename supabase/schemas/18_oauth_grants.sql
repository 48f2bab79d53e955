-- =============================================================================
-- OAuth grants: the agents a person connected through the relay's sign-in
-- =============================================================================
-- The relay is the OAuth 2.1 authorization server for agents (docs/agents.md, "Signing
-- in"). A grant is one person's approval of one client: one row per (person, client),
-- made when the person taps Approve on the consent page, kept while any token of it may
-- be used. The person reads and deletes their own (Connected agents); no agent token and
-- not the relay's role reads the table directly (the relay goes through relay.oauth_*).
-- Deleting a grant ends every token of it (their families cascade; the session check
-- refuses them within 5 s) and its waiting requests (26_relay_credentials.sql).
create table public.oauth_grants (
  id uuid primary key default gen_random_uuid(),
  user_id uuid not null references auth.users (id) on delete cascade,
  client_id text not null check (char_length(client_id) between 1 and 255),
  client_name text not null default '' check (char_length(client_name) <= 200),
  client_host text not null default '' check (char_length(client_host) <= 255),
  scope text not null default 'location' check (scope ~ '^[a-z_]+( [a-z_]+)*$' and char_length(scope) <= 100),
  created_at timestamptz not null default now(),
  last_used_at timestamptz,
  constraint oauth_grants_once unique (user_id, client_id)
);
comment on table public.oauth_grants is
  'The agents (OAuth clients) each person connected: one row per (person, client), deleted to disconnect.';
alter table public.oauth_grants enable row level security;

create policy "People see the agents they connected"
  on public.oauth_grants for select
  to authenticated
  using (user_id = (select auth.uid()) and (select auth.jwt()) ->> 'client_id' is null);
create policy "People disconnect the agents they connected"
  on public.oauth_grants for delete
  to authenticated
  using (user_id = (select auth.uid()) and (select auth.jwt()) ->> 'client_id' is null);

comment on index public.oauth_grants_once is
  'relay.oauth_decide: one grant per person and client (its upsert); relay.oauth_grants, stop_all_sharing and deleting a user (cascade), by user.';

revoke all on public.oauth_grants from anon, authenticated;
grant select, delete on public.oauth_grants to authenticated;
