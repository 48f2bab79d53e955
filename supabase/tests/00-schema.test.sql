-- The shape of the schema: RLS everywhere, UNLOGGED relay state without coordinates,
-- security-definer functions only where the API cannot reach them.
begin;
select plan(18);

select tables_are('public',
  array['agent_keys', 'devices', 'push_tokens', 'web_push_subscriptions',
        'always_allowed_agents', 'location_shares', 'quiet_hours', 'may_wake_agents', 'oauth_grants'],
  'public holds exactly the user-facing tables');

select is_empty($$
  select c.relname from pg_class c join pg_namespace n on n.oid = c.relnamespace
  where n.nspname in ('public', 'relay') and c.relkind = 'r' and not c.relrowsecurity
$$, 'every table in public and relay has row-level security enabled');

select is_empty($$
  select c.relname from pg_class c join pg_namespace n on n.oid = c.relnamespace
  where n.nspname = 'relay' and c.relkind = 'r' and c.relpersistence <> 'u'
$$, 'every relay table is UNLOGGED');

select tables_are('relay', array['instances', 'connections', 'pending_requests', 'push_budgets', 'sealed_results'],
  'relay holds instances, connections, pending_requests, push_budgets and sealed_results');

select columns_are('relay', 'pending_requests',
  array['id', 'owner_id', 'requester_id', 'client_id', 'client_name', 'waiter_instance',
        'reply_key', 'created_at', 'expires_at', 'delivered_at', 'settled_at', 'outcome',
        'reason', 'answered_by', 'wake_kind', 'wake_claimed_at', 'checking_claimed_at',
        'resumable', 'durable', 'agent_key_id', 'keep_until', 'wrapped_secret', 'watcher_instance',
        'ask_reason', 'realert_claimed_at', 'listed'],
  'relay.pending_requests has exactly these columns, none of them a coordinate');

select columns_are('relay', 'connections',
  array['id', 'instance_id', 'user_id', 'device_id', 'platform', 'connected_at', 'session_id', 'opened_at'],
  'relay.connections has exactly these columns, none of them a coordinate');

select columns_are('relay', 'sealed_results', array['request_id', 'sealed', 'stored_at'],
  'relay.sealed_results has exactly these columns: a result exists there only as ciphertext');

select columns_are('relay', 'instances', array['id', 'started_at', 'heartbeat_at', 'seen_refreshed_at', 'revocations_checked_at'],
  'relay.instances has exactly these columns');

select columns_are('relay', 'push_budgets', array['scope', 'key', 'sent_at', 'last_at'],
  'relay.push_budgets has exactly these columns: hashed targets and times, no token, endpoint or coordinate');

select columns_are('private', 'creations', array['id', 'user_id', 'kind', 'created_at'],
  'private.creations has exactly these columns: who created what kind of row when, nothing of the row itself');

-- No column anywhere in our schemas is shaped to hold a coordinate.
select is_empty($$
  select n.nspname || '.' || c.relname || '.' || a.attname
  from pg_attribute a
  join pg_class c on c.oid = a.attrelid
  join pg_namespace n on n.oid = c.relnamespace
  where n.nspname in ('public', 'relay') and c.relkind = 'r' and a.attnum > 0 and not a.attisdropped
    and (a.attname ~* '(^|_)(lat|latitude|lon|lng|longitude|coords?|coordinates?|location|accuracy|altitude|heading|speed|geo|geom|geography|position|fix)(_|$)'
         or format_type(a.atttypid, a.atttypmod) in ('point', 'double precision', 'real', 'numeric', 'json', 'jsonb'))
$$, 'no table in public or relay has a column that could hold a coordinate');

-- Ours: in public (the API's schema, whoever made them) or made by the migration role
-- anywhere; a platform's own (Supabase's pgbouncer.get_auth, storage, graphql_public, owned
-- by its admin roles) are not.
select is_empty($$
  select p.oid::regprocedure::text from pg_proc p join pg_namespace n on n.oid = p.pronamespace
  where p.prosecdef and n.nspname not in ('relay', 'private', 'tests')
    and (n.nspname = 'public' or p.proowner = 'postgres'::regrole)
$$, 'security-definer functions live only in relay or private');

select is_empty($$
  select p.oid::regprocedure::text from pg_proc p join pg_namespace n on n.oid = p.pronamespace
  where n.nspname in ('relay', 'private', 'public') and p.prosecdef
    and not coalesce('search_path=""' = any (p.proconfig), false)
$$, 'every security-definer function pins search_path to empty');

select is_empty($$
  select p.oid::regprocedure::text from pg_proc p join pg_namespace n on n.oid = p.pronamespace
  where n.nspname in ('relay', 'private', 'public') and p.prolang <> 13 and p.prokind = 'f'
    and not coalesce('search_path=""' = any (p.proconfig), false)
    and p.proowner = 'postgres'::regrole
$$, 'every function of ours pins search_path to empty');

select is_empty($$
  select n.nspname || '.' || c.relname from pg_class c join pg_namespace n on n.oid = c.relnamespace
  where n.nspname = 'public' and c.relkind = 'r'
    and (has_table_privilege('anon', c.oid, 'SELECT') or has_table_privilege('anon', c.oid, 'INSERT')
         or has_table_privilege('anon', c.oid, 'UPDATE') or has_table_privilege('anon', c.oid, 'DELETE'))
$$, 'anon holds no privilege on any public table');

select is_empty($$
  select tablename || ': ' || policyname from pg_policies
  where schemaname = 'public' and roles <> '{authenticated}'
$$, 'every policy is written to authenticated');

select is_empty($$
  select tablename || ': ' || policyname from pg_policies
  where schemaname = 'public'
    and coalesce(qual, '') || coalesce(with_check, '') ~ 'auth\.uid\(\)'
    and coalesce(qual, '') || coalesce(with_check, '') !~ 'SELECT auth\.uid\(\)'
$$, 'policies call auth.uid() through (select auth.uid()), once per statement');

select is_empty($$
  select c.relname || '.' || a.attname
  from pg_class c join pg_namespace n on n.oid = c.relnamespace
  join pg_attribute a on a.attrelid = c.oid
  where n.nspname = 'public' and c.relkind = 'r' and a.attname in ('user_id', 'owner_id', 'viewer_id')
    and not exists (select from pg_index i where i.indrelid = c.oid and i.indkey[0] = a.attnum)
$$, 'every column policies filter on leads an index');

select * from finish();
rollback;
