-- What a hostile user cannot do to the relay's functions: borrow a name, keep a socket
-- after sign-out or device removal, flood sockets, replace a live socket with a stale
-- hello, keep an owner at the cap, or leave rows behind across a restart.
begin;
select plan(32);

select tests.create_supabase_user('alice', 'alice@example.com', 'Alice');
select tests.create_supabase_user('mallory', 'mallory@example.com', 'alice@example.com');
select tests.create_supabase_user('victor', 'victor@example.com', 'Victor');
select tests.create_supabase_user('trudy', 'trudy@example.com', E'Tru\u202Edy\n' || repeat('y', 200));
insert into public.location_shares (owner_id, viewer_id) values
  (tests.get_supabase_uid('mallory'), tests.get_supabase_uid('victor')),
  (tests.get_supabase_uid('trudy'), tests.get_supabase_uid('victor'));

-- ------------------------------------------------------------ lookalike names
select tests.authenticate_as_relay();
select is_empty($$ select * from relay.resolve_person(tests.get_supabase_uid('victor'), 'alice@example.com') $$,
  'an email never matches a display name: Mallory named "alice@example.com" is not Alice');
select is_empty($$ select * from relay.resolve_person(tests.get_supabase_uid('victor'), 'ALICE@example.com') $$,
  'nor in another case');
select results_eq($$ select email from relay.resolve_person(tests.get_supabase_uid('victor'), 'Mallory@Example.com') $$,
  $$ values ('mallory@example.com') $$, 'an email matches the account email, case-insensitively');
select is_empty($$ select * from relay.resolve_person(tests.get_supabase_uid('victor'), 'alice') $$,
  'a name without @ never matches part of an email');
select results_eq($$ select name from relay.people_sharing_with(tests.get_supabase_uid('victor')) where email = 'trudy@example.com' $$,
  $$ values ('Trudy' || repeat('y', 75)) $$, 'names reach agents without control or format characters, cut to 80');
reset role;
insert into public.location_shares (owner_id, viewer_id)
  select tests.get_supabase_uid('alice'), tests.get_supabase_uid('victor');
select tests.authenticate_as_relay();
select results_eq($$ select owner_id, email from relay.resolve_person(tests.get_supabase_uid('victor'), 'alice@example.com') $$,
  $$ values (tests.get_supabase_uid('alice'), 'alice@example.com') $$, 'once Alice shares, her email finds her, and only her');

-- ------------------------------------------------------------ sessions
select relay.register_instance('relay-h');
select is(relay.session_states(array[tests.get_session_id('alice')], array[tests.get_supabase_uid('alice')]), array['alive'], 'a live session is alive');
select is(relay.session_states(array[tests.get_session_id('alice')], array[tests.get_supabase_uid('victor')]), array['signed_out'],
  'a session checked against another user is not alive');
select is(tests.device_hello('relay-h', '00000000-0000-4000-8000-0000000001c1', tests.get_supabase_uid('alice'),
  tests.get_session_id('alice'), '00000000-0000-4000-8000-0000000001d1', 'Alice phone', 'ios', '1', now()) ->> 'status',
  'ok', 'a phone registers');
reset role;
select is((select session_id from public.devices where id = '00000000-0000-4000-8000-0000000001d1'),
  tests.get_session_id('alice'), 'the device remembers the session that registered it');
select tests.authenticate_as_relay();
select is(tests.device_hello('relay-h', '00000000-0000-4000-8000-0000000001c2', tests.get_supabase_uid('alice'),
  gen_random_uuid(), '00000000-0000-4000-8000-0000000001d2', 'x', 'ios', '1', now()) ->> 'status',
  'revoked', 'a hello with a session that does not exist is refused');
select is_empty($$ select relay.revoked_connections('relay-h') $$, 'nothing to close while sessions and devices are fine');

reset role;
select tests.authenticate_as('alice');
update public.devices set revoked_at = now() where id = '00000000-0000-4000-8000-0000000001d1';
reset role;
select tests.authenticate_as_relay();
select is(relay.session_states(array[tests.get_session_id('alice')], array[tests.get_supabase_uid('alice')]), array['device_removed'],
  'removing a device revokes the session that registered it');
select is(tests.device_hello('relay-h', '00000000-0000-4000-8000-0000000001c3', tests.get_supabase_uid('alice'),
  tests.get_session_id('alice'), '00000000-0000-4000-8000-0000000001d3', 'new id', 'ios', '1', now()) ->> 'status',
  'revoked', 'that session cannot register a device again, not even under a new device id');
select results_eq($$ select relay.revoked_connections('relay-h') $$,
  $$ values ('00000000-0000-4000-8000-0000000001c1'::uuid) $$, 'the heartbeat finds the removed device''s socket');
select is_empty($$ select relay.revoked_connections('relay-h') $$, 'and removes its row, so it is reported once');

select tests.device_hello('relay-h', '00000000-0000-4000-8000-0000000002c1', tests.get_supabase_uid('victor'),
  tests.get_session_id('victor'), '00000000-0000-4000-8000-0000000002d1', 'Victor phone', 'ios', '1', now());
reset role;
delete from auth.sessions where id = tests.get_session_id('victor');
select tests.authenticate_as_relay();
select results_eq($$ select relay.revoked_connections('relay-h') $$,
  $$ values ('00000000-0000-4000-8000-0000000002c1'::uuid) $$, 'a signed-out session''s socket is found at the next heartbeat');

-- A session of another user cannot be revoked through a device row that names it.
reset role;
insert into public.devices (id, user_id, platform, session_id)
  values ('00000000-0000-4000-8000-0000000003d1', tests.get_supabase_uid('mallory'), 'ios', tests.get_session_id('trudy'));
update public.devices set revoked_at = now() where id = '00000000-0000-4000-8000-0000000003d1';
select tests.authenticate_as_relay();
select is(relay.session_states(array[tests.get_session_id('trudy')], array[tests.get_supabase_uid('trudy')]), array['alive'],
  'removing a device that names someone else''s session revokes nothing');

-- ------------------------------------------------------------ stale hello, socket cap
select is(tests.device_hello('relay-h', '00000000-0000-4000-8000-0000000004c2', tests.get_supabase_uid('trudy'),
  tests.get_session_id('trudy'), '00000000-0000-4000-8000-0000000004d1', 'T', 'web', '1', now()) ->> 'status',
  'ok', 'a socket opened now registers');
select is(tests.device_hello('relay-h', '00000000-0000-4000-8000-0000000004c1', tests.get_supabase_uid('trudy'),
  tests.get_session_id('trudy'), '00000000-0000-4000-8000-0000000004d1', 'T', 'web', '1', now() - interval '5 seconds') ->> 'status',
  'replaced', 'a late hello from a socket opened earlier does not replace the live one');
reset role;
select results_eq($$ select id from relay.connections where device_id = '00000000-0000-4000-8000-0000000004d1' $$,
  $$ values ('00000000-0000-4000-8000-0000000004c2'::uuid) $$, 'the live socket stays registered');
select tests.authenticate_as_relay();

select is(tests.device_hello('relay-h', gen_random_uuid(), tests.get_supabase_uid('trudy'), tests.get_session_id('trudy'),
  gen_random_uuid(), 'T', 'web', '1', now(), 2) ->> 'status', 'ok', 'a second device of the user registers');
select is(tests.device_hello('relay-h', gen_random_uuid(), tests.get_supabase_uid('trudy'), tests.get_session_id('trudy'),
  gen_random_uuid(), 'T', 'web', '1', now(), 2) ->> 'status', 'too_many', 'a socket past the per-user cap is refused');
select is(tests.device_hello('relay-h', gen_random_uuid(), tests.get_supabase_uid('trudy'), tests.get_session_id('trudy'),
  '00000000-0000-4000-8000-0000000004d1', 'T', 'web', '1', now(), 2) ->> 'status', 'ok',
  'a device replacing its own socket is not counted against the cap');

-- ------------------------------------------------------------ caps per requester
select relay.open_request(gen_random_uuid(), tests.get_supabase_uid('trudy'), tests.get_supabase_uid('victor'), 'v', null,
  'relay-h', decode(repeat('ab', 32), 'hex'), now() + interval '1 minute', 2) from generate_series(1, 2);
select is(relay.open_request(gen_random_uuid(), tests.get_supabase_uid('trudy'), tests.get_supabase_uid('victor'), 'v', null,
  'relay-h', decode(repeat('ab', 32), 'hex'), now() + interval '1 minute', 2) ->> 'status', 'too_many',
  'a viewer reaches their own cap for an owner');
select is(relay.open_request(gen_random_uuid(), tests.get_supabase_uid('trudy'), null, 'own', null,
  'relay-h', decode(repeat('ab', 32), 'hex'), now() + interval '1 minute', 2) ->> 'status', 'opened',
  'while the owner''s own agents still get through');
select is(relay.open_request(gen_random_uuid(), tests.get_supabase_uid('alice'), tests.get_supabase_uid('victor'), 'v', null,
  'relay-h', decode(repeat('ab', 32), 'hex'), now() + interval '1 minute', 2) ->> 'status', 'too_many',
  'and the viewer''s cap holds across every owner who shares with them');

-- ------------------------------------------------------------ restart under the same id
select is(relay.register_instance('relay-h'), '{"connections": 2, "abandoned": 3}'::jsonb,
  'registering again under the same id forgets the earlier process''s sockets and abandons its waiters');
reset role;
select is((select count(*)::int from relay.pending_requests where waiter_instance = 'relay-h' and settled_at is null), 0,
  'no request of the earlier process still waits');

-- ------------------------------------------------------------ revoked sessions are bounded
reset role;
delete from auth.sessions where id = tests.get_session_id('alice');
select tests.authenticate_as_relay();
select is(relay.forget_ended_sessions(10), 1, 'a revoked session is forgotten once its auth.sessions row is gone');
select is(relay.forget_ended_sessions(10), 0, 'and only once');
select throws_ok($$ select relay.forget_ended_sessions(0) $$, '22023', null, 'the batch size is bounded');

select * from finish();
rollback;
