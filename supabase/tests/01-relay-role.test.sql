-- The relay's role executes relay.* functions and nothing else; the API roles cannot
-- execute relay or private functions they were not granted.
begin;
select plan(12);

select ok(
  (select not rolcanlogin and not rolsuper and not rolbypassrls from pg_roles where rolname = 'whereabot_relay')
  or (select not rolsuper and not rolbypassrls from pg_roles where rolname = 'whereabot_relay'),
  'whereabot_relay is neither superuser nor bypasses RLS');

select is_empty($$
  select n.nspname || '.' || c.relname || ' ' || priv
  from pg_class c join pg_namespace n on n.oid = c.relnamespace
  cross join unnest(array['SELECT', 'INSERT', 'UPDATE', 'DELETE', 'TRUNCATE', 'REFERENCES', 'TRIGGER']) priv
  where n.nspname in ('public', 'relay', 'private', 'auth', 'supabase_migrations', 'tests')
    and c.relkind in ('r', 'v', 'm', 'p', 'f')
    and has_table_privilege('whereabot_relay', c.oid, priv)
$$, 'whereabot_relay holds no privilege on any table or view');

select is_empty($$
  select c.relname || '.' || a.attname
  from pg_class c join pg_namespace n on n.oid = c.relnamespace
  join pg_attribute a on a.attrelid = c.oid and a.attnum > 0
  where n.nspname in ('public', 'relay', 'auth')
    and c.relkind = 'r'
    and has_column_privilege('whereabot_relay', c.oid, a.attnum, 'SELECT,INSERT,UPDATE')
$$, 'whereabot_relay holds no column privilege either');

select is_empty($$
  select p.oid::regprocedure::text from pg_proc p join pg_namespace n on n.oid = p.pronamespace
  where n.nspname = 'relay' and not has_function_privilege('whereabot_relay', p.oid, 'EXECUTE')
$$, 'whereabot_relay may execute every relay function');

select is_empty($$
  select p.oid::regprocedure::text || ' by ' || r
  from pg_proc p join pg_namespace n on n.oid = p.pronamespace
  cross join unnest(array['anon', 'authenticated', 'service_role']) r
  where n.nspname = 'relay' and has_function_privilege(r, p.oid, 'EXECUTE')
$$, 'anon, authenticated and service_role cannot execute any relay function');

select is_empty($$
  select p.oid::regprocedure::text
  from pg_proc p join pg_namespace n on n.oid = p.pronamespace
  where n.nspname in ('relay', 'private')
    and exists (select from aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) a
                where a.grantee = 0 and a.privilege_type = 'EXECUTE')
$$, 'no relay or private function is executable by PUBLIC');

select set_eq($$
  select p.oid::regprocedure::text from pg_proc p join pg_namespace n on n.oid = p.pronamespace
  where n.nspname = 'private' and has_function_privilege('authenticated', p.oid, 'EXECUTE')
$$, array['private.create_agent_key(text)', 'private.revoke_agent_key(uuid)',
          'private.share_location_with(text)', 'private.is_own_device(uuid)'],
  'authenticated may execute only the private functions behind the public API and policies');

select tests.authenticate_as_relay();

select throws_ok($$ select * from relay.pending_requests $$, '42501', null,
  'whereabot_relay cannot read relay.pending_requests');
select throws_ok($$ insert into relay.instances (id) values ('sneaky') $$, '42501', null,
  'whereabot_relay cannot write relay.instances');
select throws_ok($$ select * from public.agent_keys $$, '42501', null,
  'whereabot_relay cannot read public.agent_keys');
select throws_ok($$ select * from auth.users $$, '42501', null,
  'whereabot_relay cannot read auth.users');
select lives_ok($$ select relay.register_instance('role-test') $$,
  'whereabot_relay can call a relay function');

reset role;
select * from finish();
rollback;
