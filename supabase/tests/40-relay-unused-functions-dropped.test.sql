-- The single-socket forms the relay no longer called are gone
-- (20261201160000_drop_unused_relay_functions.sql), and the two functions that used them
-- inside give the answers they gave: a hello checks its session (relay.session_states) and
-- returns the pings waiting for its users, oldest first, without settled or expired ones.
begin;
select plan(9);

select hasnt_function('relay', 'device_hello', 'relay.device_hello is gone (hellos go through relay.device_hellos)');
select hasnt_function('relay', 'device_disconnect', 'relay.device_disconnect is gone (relay.device_disconnects)');
select hasnt_function('relay', 'session_state', 'relay.session_state is gone (relay.session_states)');
select hasnt_function('relay', 'pending_locates', 'relay.pending_locates is gone (relay.device_hellos returns the pings)');
select is_empty($$
  select p.oid::regprocedure::text from pg_proc p join pg_namespace n on n.oid = p.pronamespace
  where n.nspname in ('relay', 'private', 'public')
    and p.prosrc ~ '(device_hello|device_disconnect|session_state|pending_locates)\s*\('
$$, 'no function of ours calls one of them');

select tests.create_supabase_user('ada');
select tests.create_supabase_user('bob');
-- Ada's requests: two waiting (the older one first), one settled, one past its deadline.
insert into relay.instances (id) values ('relay-a');
insert into relay.pending_requests (id, owner_id, client_id, waiter_instance, reply_key, created_at, expires_at,
                                    settled_at, outcome) values
  ('00000000-0000-4000-8000-0000000000e2', tests.get_supabase_uid('ada'), 'agent-key', 'relay-a',
   decode(repeat('ab', 32), 'hex'), now() - interval '1 second', now() + interval '1 minute', null, null),
  ('00000000-0000-4000-8000-0000000000e1', tests.get_supabase_uid('ada'), 'agent-key', 'relay-a',
   decode(repeat('ab', 32), 'hex'), now() - interval '2 seconds', now() + interval '1 minute', null, null),
  ('00000000-0000-4000-8000-0000000000e3', tests.get_supabase_uid('ada'), 'agent-key', 'relay-a',
   decode(repeat('ab', 32), 'hex'), now() - interval '3 seconds', now() + interval '1 minute', now(), 'denied'),
  ('00000000-0000-4000-8000-0000000000e4', tests.get_supabase_uid('ada'), 'agent-key', 'relay-a',
   decode(repeat('ab', 32), 'hex'), now() - interval '4 seconds', now() - interval '1 second', null, null);

select tests.authenticate_as_relay();
select is((select jsonb_agg(p -> 'message' ->> 'id') from jsonb_array_elements(relay.device_hellos('relay-a', jsonb_build_array(
    jsonb_build_object('connection', gen_random_uuid(), 'user', tests.get_supabase_uid('ada'),
      'session', tests.get_session_id('ada'), 'device', gen_random_uuid(), 'name', 'Phone', 'platform', 'ios',
      'app_version', '1', 'opened_at', now()),
    jsonb_build_object('connection', gen_random_uuid(), 'user', tests.get_supabase_uid('ada'),
      'session', tests.get_session_id('ada'), 'device', gen_random_uuid(), 'name', 'Tablet', 'platform', 'ios',
      'app_version', '1', 'opened_at', now()),
    jsonb_build_object('connection', gen_random_uuid(), 'user', tests.get_supabase_uid('bob'),
      'session', tests.get_session_id('bob'), 'device', gen_random_uuid(), 'name', 'Phone', 'platform', 'ios',
      'app_version', '1', 'opened_at', now()))) -> 'pending') p),
  '["00000000-0000-4000-8000-0000000000e1", "00000000-0000-4000-8000-0000000000e2"]'::jsonb,
  'a batch gets each waiting ping of its users once, oldest first, never a settled or expired one');

reset role;
insert into auth.sessions (id, user_id, not_after) values
  ('00000000-0000-4000-8000-0000000000f2', tests.get_supabase_uid('bob'), now() - interval '1 minute');
select tests.authenticate_as_relay();
select is(tests.device_hello('relay-a', gen_random_uuid(), tests.get_supabase_uid('bob'),
  '00000000-0000-4000-8000-0000000000f2', gen_random_uuid(), 'Phone', 'ios', '1', now()) ->> 'status', 'revoked',
  'a hello whose session is past not_after is revoked');
select is(tests.device_hello('relay-a', gen_random_uuid(), tests.get_supabase_uid('ada'),
  '00000000-0000-4000-8000-0000000000f1', gen_random_uuid(), 'Phone', 'ios', '1', now()) ->> 'status', 'revoked',
  'so is a hello with a session that does not exist');
reset role;
insert into private.revoked_sessions (session_id, user_id) values (tests.get_session_id('ada'), tests.get_supabase_uid('ada'));
select tests.authenticate_as_relay();
select is(tests.device_hello('relay-a', gen_random_uuid(), tests.get_supabase_uid('ada'), tests.get_session_id('ada'),
  gen_random_uuid(), 'Phone', 'ios', '1', now()) ->> 'status', 'revoked',
  'and one whose session was revoked by removing a device');

reset role;
select * from finish();
rollback;
