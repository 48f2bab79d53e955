-- =============================================================================
-- Relay state: instances, live device sockets and pending requests
-- =============================================================================
-- Schema `relay` is private (never exposed by the API). Its tables are UNLOGGED: they are
-- rebuilt by the relay instances after a crash, and no WAL ever holds them. No column can
-- hold a coordinate; a location crosses Postgres only sealed (a NOTIFY payload, or
-- relay.sealed_results for a request that outlives its call). The relay logs in as
-- `whereabot_relay`, which may execute relay.* functions and nothing else: it reads and
-- writes no table directly. The other relay tables live with their features
-- (relay.push_budgets in 27_relay_push.sql, relay.sealed_results in
-- 30_relay_durable_requests.sql).

create schema relay;
revoke all on schema relay from public, anon, authenticated, service_role;
comment on schema relay is
  'Relay instances, device sockets and pending requests; only relay.* functions touch them.';

-- Roles belong to the cluster, so the role may exist already.
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
create unlogged table relay.instances (
  id text primary key check (id ~ '^[A-Za-z0-9._:-]{1,64}$'),
  started_at timestamptz not null default now(),
  heartbeat_at timestamptz not null default now(),
  seen_refreshed_at timestamptz not null default now(),
  revocations_checked_at timestamptz
);
comment on table relay.instances is
  'Running relay instances; one whose heartbeat stops is reaped with its sockets and waiters.';
comment on column relay.instances.seen_refreshed_at is
  'When relay.heartbeat last refreshed the last_seen_at of this instance''s devices (every 5 minutes).';
comment on column relay.instances.revocations_checked_at is
  'When relay.revoked_connections last checked this instance''s sockets (null: never, all of them are checked).';
alter table relay.instances enable row level security;
revoke all on relay.instances from public, anon, authenticated, service_role, whereabot_relay;

-- -----------------------------------------------------------------------------
-- relay.connections: one row per live device WebSocket
-- -----------------------------------------------------------------------------
-- Each socket row records its session (relay.revoked_connections closes sockets whose
-- session ended) and when the socket was opened (of two sockets of a device, the newer wins).
create unlogged table relay.connections (
  id uuid primary key,
  instance_id text not null references relay.instances (id) on delete cascade,
  user_id uuid not null,
  device_id uuid not null,
  platform text not null,
  connected_at timestamptz not null default now(),
  session_id uuid,
  opened_at timestamptz not null default now()
);
comment on table relay.connections is
  'Live device sockets: which instance holds which device of which user.';
create index connections_device_id_idx on relay.connections (device_id);
create index connections_instance_id_idx on relay.connections (instance_id);
create index connections_session_id_idx on relay.connections (session_id);
-- By owner and instance in one probe (the backstop poll), by owner alone as its prefix.
create index connections_user_id_instance_id_idx on relay.connections (user_id, instance_id);
comment on index relay.connections_device_id_idx is 'relay.device_hellos (replaced sockets) and device revocation, by device.';
comment on index relay.connections_instance_id_idx is 'relay.reap and relay.register_instance: an instance''s sockets.';
comment on index relay.connections_session_id_idx is 'relay.revoked_connections: sockets of a revoked session.';
comment on index relay.connections_user_id_instance_id_idx is
  'relay.open_request (live sockets of the owner), the 20-sockets cap in device_hellos, and relay.pending_locates_on (is the owner on this instance).';
alter table relay.connections enable row level security;
revoke all on relay.connections from public, anon, authenticated, service_role, whereabot_relay;

-- -----------------------------------------------------------------------------
-- relay.pending_requests: one row per locate request, until settled and reaped
-- -----------------------------------------------------------------------------
-- Push claims (wake_kind, wake_claimed_at, checking_claimed_at): the waiter claims each
-- push stage of its request here, once (relay.claim_push). A row re-created after a
-- Postgres crash has no claims; the waiter remembers its own (PUSH.md §2).
--
-- Durable requests (SPEC §11: resumable ... watcher_instance): a request opened as an MCP
-- task, by `Prefer: respond-async`, or by a get_phone_location call that reached its wait
-- bound stays open until its own deadline, whoever holds the call, and its result is kept,
-- sealed, until keep_until (30_relay_durable_requests.sql):
-- * `resumable` rows keep their result: a location is stored in relay.sealed_results as the
--   ciphertext the phone's instance sealed to the request's reply key. The agent's
--   request_id carries a secret Postgres never sees; the row's id and the reply key are
--   derived from it, so only an instance presented with the request_id can open the fix.
-- * `durable` rows belong to no instance: the reaper and a restarting instance leave them
--   open (a synchronous waiter's request is abandoned with its instance). A
--   get_phone_location call opens its request resumable and makes it durable only when it
--   hands the request_id to the agent (relay.make_durable), so an instance that dies before
--   that leaves no request pinging a phone for an agent that cannot ask for the answer.
-- * Each row is bound to the (user, client_id) of the credential that opened it, and to the
--   agent key when it was one: every other credential is told "unknown".
-- * `keep_until` ends a resumable row: the task's ttl from creation, and never more than 10
--   minutes after settlement. Nothing of it is readable past that; the reaper deletes it.
-- * `wrapped_secret` is the request_id's secret sealed (AES-256-GCM) under a key only the
--   relay instances hold (REQUEST_ID_KEY), so tasks/list can name the caller's tasks (the
--   `listed` ones) and a repeated ask can join its call's request on any instance; it is
--   null when no such key is configured, and useless without it.
create unlogged table relay.pending_requests (
  id uuid primary key,
  owner_id uuid not null,
  requester_id uuid,
  client_id text not null,
  client_name text,
  waiter_instance text not null,
  reply_key bytea not null,
  created_at timestamptz not null default now(),
  expires_at timestamptz not null,
  delivered_at timestamptz,
  settled_at timestamptz,
  outcome text,
  reason text,
  answered_by uuid,
  wake_kind text,
  wake_claimed_at timestamptz,
  checking_claimed_at timestamptz,
  resumable boolean not null default false,
  durable boolean not null default false,
  agent_key_id uuid,
  keep_until timestamptz,
  wrapped_secret bytea,
  watcher_instance text,
  ask_reason text,
  realert_claimed_at timestamptz,
  listed boolean not null default false
);
comment on table relay.pending_requests is
  'Locate requests in flight: who asks whose phones, which instance waits, its X25519 reply key, and how it ended. Never a coordinate.';
comment on column relay.pending_requests.reply_key is
  'The waiting instance''s per-request X25519 public key; answers are sealed to it.';
comment on column relay.pending_requests.wake_kind is
  'Which wake push was claimed: alert (asks), silent (always allowed, APNs only) or checking (always allowed, no APNs token).';
comment on column relay.pending_requests.wake_claimed_at is 'When the wake push stage was claimed.';
comment on column relay.pending_requests.checking_claimed_at is
  'When the checking alert was claimed (only after a silent wake).';
comment on column relay.pending_requests.realert_claimed_at is
  'When the one re-alert of an unanswered request was claimed (SPEC §14).';
comment on column relay.pending_requests.resumable is
  'The result is kept (a fix sealed in relay.sealed_results) for whoever presents the request_id.';
comment on column relay.pending_requests.durable is
  'The request belongs to no instance: it stays open until its deadline when its waiter dies.';
comment on column relay.pending_requests.ask_reason is
  'The agent''s reason for asking, shown to the person (cleaned, at most 120 characters); cleared when the request settles.';
comment on column relay.pending_requests.agent_key_id is
  'The agent key that opened a resumable request: only that key may see it.';
comment on column relay.pending_requests.keep_until is
  'When a resumable request and its result are forgotten (task ttl; at most 10 minutes after settlement).';
comment on column relay.pending_requests.wrapped_secret is
  'The request_id''s secret under the relay instances'' REQUEST_ID_KEY (AES-256-GCM), for tasks/list and for a repeated ask that joins on another instance; never the plain secret.';
comment on column relay.pending_requests.listed is
  'Opened as a task or an async request (durable from the start), so tasks/list may name it; a call''s request is not.';
comment on column relay.pending_requests.watcher_instance is
  'The instance whose poll waits for a durable request''s answer (it is told as well as the waiter).';
-- No index on waiter_instance: it has as many distinct values as relay instances (a
-- handful), and register_instance and reap read the few rows of one instance with a
-- sequential scan of this small UNLOGGED table anyway.
create index pending_requests_waiting_owner_idx
  on relay.pending_requests (owner_id) where settled_at is null;
create index pending_requests_resumable_by_agent_idx
  on relay.pending_requests ((coalesce(requester_id, owner_id)), client_id, created_at) where resumable;
comment on index relay.pending_requests_waiting_owner_idx is
  'relay.open_request''s caps and relay.device_hellos'' pending pings: the requests still waiting for an owner.';
comment on index relay.pending_requests_resumable_by_agent_idx is
  'open_durable_request counts a credential''s open durable requests; durable_requests lists them (tasks/list).';
alter table relay.pending_requests enable row level security;

-- -----------------------------------------------------------------------------
-- A pending request's rules: one trigger, not CHECK constraints
-- -----------------------------------------------------------------------------
-- PostgreSQL reads and plans every CHECK constraint's expression again for each statement
-- that writes the table; with seventeen, a locate's insert and update cost 100 µs more each
-- (issue 43). The same rules, in a trigger function compiled once per session, raise
-- 23514 under the names the constraints had; settling forgets the agent's reason and cuts
-- a call's resumable row to 30 seconds before they are checked.
create or replace function private.pending_request_rules()
returns trigger
language plpgsql
set search_path = ''
as $$
begin
  -- What settling forgets, before the rules are checked: the agent's reason, and a call's
  -- resumable row is kept 30 seconds, not 10 minutes (a call answered in the call).
  if tg_op = 'UPDATE' and new.settled_at is not null then
    new.ask_reason := null;
    if old.settled_at is null and new.resumable and not new.durable then
      new.keep_until := least(new.keep_until, now() + interval '30 seconds');
    end if;
  end if;
  -- Each rule is the negation of the CHECK it replaces, so a null passes as it did.
  if not (char_length(new.client_id) between 1 and 255) then
    raise exception using errcode = 'check_violation', constraint = 'pending_requests_client_id_check',
      message = 'a request''s client_id is 1 to 255 characters';
  elsif not (char_length(new.client_name) <= 200) then
    raise exception using errcode = 'check_violation', constraint = 'pending_requests_client_name_check',
      message = 'a request''s client_name is at most 200 characters';
  elsif not (octet_length(new.reply_key) = 32) then
    raise exception using errcode = 'check_violation', constraint = 'pending_requests_reply_key_check',
      message = 'a request''s reply_key is 32 bytes';
  elsif not (new.outcome in ('location', 'denied', 'unavailable', 'expired', 'abandoned')) then
    raise exception using errcode = 'check_violation', constraint = 'pending_requests_outcome_check',
      message = 'a request''s outcome is location, denied, unavailable, expired or abandoned';
  elsif not (new.reason in ('user', 'no_answer', 'permission', 'no_fix', 'error')) then
    raise exception using errcode = 'check_violation', constraint = 'pending_requests_reason_check',
      message = 'a request''s reason is user, no_answer, permission, no_fix or error';
  elsif not (new.wake_kind in ('alert', 'silent', 'checking')) then
    raise exception using errcode = 'check_violation', constraint = 'pending_requests_wake_kind_check',
      message = 'a request''s wake_kind is alert, silent or checking';
  elsif not (new.watcher_instance ~ '^[A-Za-z0-9._:-]{1,64}$') then
    raise exception using errcode = 'check_violation', constraint = 'pending_requests_watcher_instance_check',
      message = 'a request''s watcher_instance is 1 to 64 letters, digits or ._:-';
  elsif not (char_length(new.ask_reason) between 1 and 120) then
    raise exception using errcode = 'check_violation', constraint = 'pending_requests_ask_reason_check',
      message = 'a request''s ask_reason is 1 to 120 characters';
  elsif not ((new.settled_at is null) = (new.outcome is null)) then
    raise exception using errcode = 'check_violation', constraint = 'pending_requests_settled_has_outcome',
      message = 'a request is settled exactly when it has an outcome';
  elsif not (new.requester_id is distinct from new.owner_id) then
    raise exception using errcode = 'check_violation', constraint = 'pending_requests_requester_is_someone_else',
      message = 'a request''s requester is someone else than its owner';
  elsif not ((new.wake_kind is null) = (new.wake_claimed_at is null)) then
    raise exception using errcode = 'check_violation', constraint = 'pending_requests_wake_kind_with_time',
      message = 'a request''s wake push has a kind exactly when it has a time';
  elsif not (new.checking_claimed_at is null or new.wake_kind = 'silent') then
    raise exception using errcode = 'check_violation', constraint = 'pending_requests_checking_after_silent_wake',
      message = 'a checking alert follows only a silent wake';
  elsif not (new.realert_claimed_at is null or new.wake_kind is not null) then
    raise exception using errcode = 'check_violation', constraint = 'pending_requests_realert_after_wake',
      message = 'a re-alert follows only a wake push';
  elsif not (new.resumable = (new.keep_until is not null)) then
    raise exception using errcode = 'check_violation', constraint = 'pending_requests_resumable_has_ttl',
      message = 'a request is resumable exactly when it has keep_until';
  elsif not (new.resumable or not new.durable) then
    raise exception using errcode = 'check_violation', constraint = 'pending_requests_durable_is_resumable',
      message = 'a durable request is resumable';
  elsif not (new.wrapped_secret is null or (new.resumable and octet_length(new.wrapped_secret) between 40 and 80)) then
    raise exception using errcode = 'check_violation', constraint = 'pending_requests_wrapped_secret_size',
      message = 'a wrapped secret is 40 to 80 bytes, of a resumable request';
  elsif not (new.settled_at is null or new.ask_reason is null) then
    raise exception using errcode = 'check_violation', constraint = 'pending_requests_reason_until_settled',
      message = 'a settled request keeps no reason';
  end if;
  return new;
end;
$$;
comment on function private.pending_request_rules() is
  'The rules of a relay.pending_requests row (what its CHECK constraints said), and what settling forgets (the reason; a call''s resumable row after 30 seconds).';
revoke execute on function private.pending_request_rules() from public, anon, authenticated;

create trigger pending_requests_keep_their_rules
  before insert or update on relay.pending_requests
  for each row execute function private.pending_request_rules();
revoke all on relay.pending_requests from public, anon, authenticated, service_role, whereabot_relay;
