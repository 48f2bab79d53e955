-- =============================================================================
-- Triggers on Supabase Auth's tables name no column (issue 39)
-- =============================================================================
-- A trigger with a column list (UPDATE OF email, email_confirmed_at) or a WHEN clause
-- naming a column makes that column a dependency: a later Supabase Auth migration that
-- alters it fails with "cannot alter type of a column used in a trigger definition", and
-- Auth stops upgrading on that project. The trigger fires on every update of auth.users;
-- private.claim_waiting_shares already returns at once unless the address was just
-- confirmed or a confirmed address changed, so what it does is the same.
comment on function private.claim_waiting_shares() is
  'AFTER INSERT/UPDATE on auth.users (no column list: Auth''s own migrations must stay free to alter its columns): shares waiting for that email reach the account once it has confirmed the address; returns at once for any other update.';

-- CREATE OR REPLACE: dropping a trigger needs to own auth.users (supabase_auth_admin);
-- replacing one needs only the TRIGGER privilege the migration role holds.
create or replace trigger whereabot_claim_waiting_shares
  after insert or update on auth.users
  for each row execute function private.claim_waiting_shares();
