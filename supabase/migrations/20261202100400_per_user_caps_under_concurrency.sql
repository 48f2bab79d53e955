-- =============================================================================
-- Every per-user cap holds under concurrency (issue 38, finding 11)
-- =============================================================================
-- The caps on agent keys (25), devices (50) and always-allowed agents (200) are BEFORE
-- INSERT triggers that count the account's rows; concurrent inserts each counted the same
-- committed rows, and 40 keys or 60 devices got in. Push tokens and subscriptions already
-- serialized one account's inserts (private.lock_user_inserts, whose trigger fires first by
-- name); these tables now do too.

create trigger agent_keys_lock_user
  before insert on public.agent_keys
  for each row execute function private.lock_user_inserts();

create trigger devices_lock_user
  before insert on public.devices
  for each row execute function private.lock_user_inserts();

create trigger always_allowed_agents_lock_user
  before insert on public.always_allowed_agents
  for each row execute function private.lock_user_inserts();
