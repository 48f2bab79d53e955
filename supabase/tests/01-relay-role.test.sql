-- The relay's role executes relay.* functions and nothing else; the API roles cannot
-- execute relay or private functions they were not granted.
begin;
select plan(13);

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

-- Exactly the functions the relay calls (Sources/Relay/Database), plus the three that
-- relay.claim_push calls for its push targets and the always-allow check (granted since
-- 20261129171200, not called by the relay itself); none of the single-socket forms
-- (device_hello, device_disconnect, session_state, pending_locates: dropped), nothing
-- outside relay. Looked for in the project's schemas and, anywhere else, among functions
-- granted to the relay's role by name: a platform's own functions that PUBLIC may execute
-- (Supabase's storage, graphql_public, pgbouncer) are none of this project's business.
select set_eq($$
  select p.oid::regprocedure::text from pg_proc p join pg_namespace n on n.oid = p.pronamespace
  where (n.nspname in ('public', 'relay', 'private')
         or exists (select from aclexplode(p.proacl) a where a.grantee = 'whereabot_relay'::regrole))
    and has_function_privilege('whereabot_relay', p.oid, 'EXECUTE')
$$, array[
        -- called by the relay
        'relay.agent_key_owner(text)', 'relay.agent_key_secret()', 'relay.agent_keys(uuid)',
        'relay.always_allowed_agents(uuid)', 'relay.keep_always_allowed(uuid,text,uuid)', 'relay.cancel_durable(uuid,uuid,text,uuid,boolean)',
        'relay.claim_push(uuid,text,text,integer,integer)', 'relay.claim_reminder_push(uuid,text,uuid,integer,integer)',
        'relay.client_name(text)',
        'relay.create_agent_key(uuid,text)', 'relay.delete_web_push_subscriptions(uuid,uuid)',
        'relay.device_disconnects(uuid[])', 'relay.device_hellos(text,jsonb,integer)',
        'relay.drain_connections(text)', 'relay.drop_apns_token(text,timestamp with time zone)',
        'relay.drop_web_push_subscription(text)',
        'relay.durable_requests(uuid,text,uuid,bigint,uuid,integer)',
        'relay.joinable_request(uuid,text,uuid,uuid)',
        'relay.durable_state(uuid,uuid,text,uuid,text,boolean)', 'relay.finish(uuid,text,text)',
        'relay.forget_ended_sessions(integer)', 'relay.heartbeat(text)',
        'relay.make_durable(uuid,text)', 'relay.mark_delivered(uuid[])',
        'relay.open_durable_request(uuid,uuid,uuid,text,text,uuid,text,bytea,timestamp with time zone,timestamp with time zone,boolean,bytea,integer,text)',
        'relay.open_request(uuid,uuid,uuid,text,text,text,bytea,timestamp with time zone,integer,text)',
        'relay.open_requests(text,jsonb)',
        'relay.may_wake_agents(uuid)', 'relay.quiet_hours(uuid)', 'relay.refresh_time_zone_names()',
        'relay.set_may_wake(uuid,text,uuid,boolean)', 'relay.set_quiet_hours(uuid,jsonb)',
        'relay.pending_locates_on(text)', 'relay.people_sharing_with(uuid)',
        'relay.reap(interval,interval)', 'relay.register_instance(text)',
        'relay.remove_device(uuid,uuid)', 'relay.rename_device(uuid,uuid,text)',
        'relay.replay_answer(uuid,text)', 'relay.reply_key(uuid,uuid)',
        'relay.request_replay(uuid[],text)', 'relay.request_states(uuid[])',
        'relay.resolve_person(uuid,text)', 'relay.revoke_agent_key(uuid,uuid)',
        'relay.revoked_connections(text)',
        'relay.save_web_push_subscription(uuid,uuid,text,text,text,text[],text)',
        'relay.session_states(uuid[],uuid[])',
        'relay.set_always_allowed(uuid,text,text,uuid,boolean,text,integer)',
        'relay.stop_all_sharing(uuid)',
        'relay.settle(uuid,uuid,uuid,text,text,text,text,integer)', 'relay.settle_many(text,jsonb,integer)',
        'relay.user_devices(uuid)',
        -- called by the relay's OAuth server (Sources/Relay/Database/RelayDatabase+OAuth.swift)
        'relay.oauth_begin(uuid,text,text,text,text,text,text,text,text,integer)', 'relay.oauth_client(text)',
        'relay.oauth_consent_request(uuid)', 'relay.oauth_decide(uuid,uuid,boolean,bytea,integer)',
        'relay.oauth_disconnect(uuid,uuid)', 'relay.oauth_grants(uuid)',
        'relay.oauth_redeem_code(bytea,text,text,text,text,uuid,bytea,integer)',
        'relay.oauth_refresh(bytea,text,bytea,integer)',
        'relay.oauth_register_client(text,text,text[],text[],text,bytea,text)',
        'relay.oauth_remember_document(text,text,text[],text[],text)', 'relay.oauth_revoke(bytea,uuid,text)',
        'relay.sweep_oauth(integer,integer)',
        -- called by relay.claim_push
        'relay.apns_tokens(uuid)', 'relay.is_always_allowed(uuid,text,uuid)',
        'relay.web_push_subscriptions(uuid)'],
  'whereabot_relay may execute exactly the relay functions the relay needs');

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
          'private.share_location_with(text)', 'private.is_own_device(uuid)', 'private.online_devices()'],
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
