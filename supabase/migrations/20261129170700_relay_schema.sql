-- =============================================================================
-- Relay state: instances, live device sockets and pending requests
-- =============================================================================
-- Schema `relay` is private (never exposed by the API). Its tables are UNLOGGED: they are
-- rebuilt by the relay instances after a crash, and no WAL ever holds them. No column can
-- hold a coordinate; a location crosses Postgres only inside a sealed NOTIFY payload.
-- The relay logs in as `whereabot_relay`, which may execute relay.* functions and
-- nothing else: it reads and writes no table directly.

create schema if not exists relay;
revoke all on schema relay from public, anon, authenticated, service_role;
comment on schema relay is
  'Relay instances, device sockets and pending requests; only relay.* functions touch them.';

do $$
begin
  if not exists (select from pg_roles where rolname = 'whereabot_relay') then
    -- Login and password are set per environment (locally by make, see docs).
    create role whereabot_relay nologin noinherit;
  end if;
end
$$;
comment on role whereabot_relay is
  'The relay''s database role: EXECUTE on relay.* functions, no table privileges.';
grant usage on schema relay to whereabot_relay;

-- -----------------------------------------------------------------------------
-- relay.instances: one row per running relay process
-- -----------------------------------------------------------------------------
create unlogged table if not exists relay.instances (
  id text primary key check (id ~ '^[A-Za-z0-9._:-]{1,64}$'),
  started_at timestamptz not null default now(),
  heartbeat_at timestamptz not null default now()
);
comment on table relay.instances is
  'Running relay instances; one whose heartbeat stops is reaped with its sockets and waiters.';
alter table relay.instances enable row level security;

-- -----------------------------------------------------------------------------
-- relay.connections: one row per live device WebSocket
-- -----------------------------------------------------------------------------
create unlogged table if not exists relay.connections (
  id uuid primary key,
  instance_id text not null references relay.instances (id) on delete cascade,
  user_id uuid not null,
  device_id uuid not null,
  platform text not null,
  connected_at timestamptz not null default now()
);
comment on table relay.connections is
  'Live device sockets: which instance holds which device of which user.';
create index if not exists connections_user_id_idx on relay.connections (user_id);
create index if not exists connections_device_id_idx on relay.connections (device_id);
create index if not exists connections_instance_id_idx on relay.connections (instance_id);
alter table relay.connections enable row level security;

-- -----------------------------------------------------------------------------
-- relay.pending_requests: one row per locate request, until settled and reaped
-- -----------------------------------------------------------------------------
create unlogged table if not exists relay.pending_requests (
  id uuid primary key,
  owner_id uuid not null,
  requester_id uuid,
  client_id text not null check (char_length(client_id) between 1 and 255),
  client_name text check (char_length(client_name) <= 200),
  waiter_instance text not null,
  reply_key bytea not null check (octet_length(reply_key) = 32),
  created_at timestamptz not null default now(),
  expires_at timestamptz not null,
  delivered_at timestamptz,
  settled_at timestamptz,
  outcome text check (outcome in ('location', 'denied', 'unavailable', 'expired', 'abandoned')),
  reason text check (reason in ('user', 'no_answer', 'permission', 'no_fix', 'error')),
  answered_by uuid,
  constraint pending_requests_settled_has_outcome check ((settled_at is null) = (outcome is null)),
  constraint pending_requests_requester_is_someone_else check (requester_id is distinct from owner_id)
);
comment on table relay.pending_requests is
  'Locate requests in flight: who asks whose phones, which instance waits, its X25519 reply key, and how it ended. Never a coordinate.';
comment on column relay.pending_requests.reply_key is
  'The waiting instance''s per-request X25519 public key; answers are sealed to it.';
create index if not exists pending_requests_waiting_owner_idx
  on relay.pending_requests (owner_id) where settled_at is null;
create index if not exists pending_requests_waiter_idx on relay.pending_requests (waiter_instance);
alter table relay.pending_requests enable row level security;

revoke all on relay.instances, relay.connections, relay.pending_requests
  from public, anon, authenticated, service_role, whereabot_relay;
