-- One socket's hello (relay.device_hellos, through tests.device_hello), the pings a hello
-- returns, and relay.device_disconnects.
begin;
select plan(22);

select tests.create_supabase_user('ada', 'ada@test.example', 'Ada');
select tests.create_supabase_user('bob', 'bob@test.example', 'Bob');
insert into public.devices (id, user_id, platform, revoked_at) values
  ('00000000-0000-4000-8000-0000000000a9', tests.get_supabase_uid('ada'), 'ios', now());
insert into public.location_shares (owner_id, viewer_id)
values (tests.get_supabase_uid('ada'), tests.get_supabase_uid('bob'));
create temp table stash (k text primary key, v jsonb);
grant all on stash to public;

select tests.authenticate_as_relay();
select relay.register_instance('relay-a');
select relay.register_instance('relay-b');

-- A request waits for Ada before her phone connects (Bob's agent asks, through the share).
select relay.open_request('00000000-0000-4000-8000-0000000000e1', tests.get_supabase_uid('ada'),
  tests.get_supabase_uid('bob'), '11111111-1111-4111-8111-111111111111', 'Claude', 'relay-a',
  decode(repeat('ab', 32), 'hex'), now() + interval '60 seconds');

insert into stash values ('hello', tests.device_hello('relay-a', '00000000-0000-4000-8000-0000000000c1',
  tests.get_supabase_uid('ada'), tests.get_session_id('ada'), '00000000-0000-4000-8000-00000000000a', ' Ada''s iPhone ', 'ios', '2.1.0', now()));
select is((select v ->> 'status' from stash where k = 'hello'), 'ok', 'hello registers a new device');
select is((select jsonb_array_length(v -> 'pending') from stash where k = 'hello'), 1,
  'hello returns the request that waits for the owner');
select is((select (v -> 'pending' -> 0) - 'expires_ms' from stash where k = 'hello'),
  jsonb_build_object('type', 'locate', 'id', '00000000-0000-4000-8000-0000000000e1',
    'owner', tests.get_supabase_uid('ada'), 'client_id', '11111111-1111-4111-8111-111111111111', 'agent_name', 'Claude',
    'requester', jsonb_build_object('user_id', tests.get_supabase_uid('bob'), 'name', 'Bob', 'email', 'bob@test.example'),
    'reply_key', encode(decode(repeat('ab', 32), 'hex'), 'base64'), 'reason', null, 'always_allow', null),
  'the pending ping carries id, owner, client_id, the agent''s name, the requester, the reply key, the reason and the relay''s decision');
select cmp_ok((select (v -> 'pending' -> 0 ->> 'expires_ms')::bigint from stash where k = 'hello'),
  '=', (extract(epoch from now() + interval '60 seconds') * 1000)::bigint, 'expires_ms is the deadline in epoch ms');

reset role;
select results_eq($$ select user_id, name, platform, app_version from public.devices
  where id = '00000000-0000-4000-8000-00000000000a' $$,
  $$ values (tests.get_supabase_uid('ada'), 'Ada''s iPhone', 'ios', '2.1.0') $$,
  'hello creates the device row for its user, trimmed');
select results_eq($$ select instance_id, device_id from relay.connections $$,
  $$ values ('relay-a', '00000000-0000-4000-8000-00000000000a'::uuid) $$, 'hello registers the socket');

-- The same device connects again through relay-b: the older socket is replaced.
select tests.authenticate_as_relay();
select is(tests.device_hello('relay-b', '00000000-0000-4000-8000-0000000000c2', tests.get_supabase_uid('ada'), tests.get_session_id('ada'),
  '00000000-0000-4000-8000-00000000000a', '', 'ios', '2.2.0', now()) ->> 'status', 'ok', 'the device says hello again elsewhere');
reset role;
select results_eq($$ select id, instance_id from relay.connections $$,
  $$ values ('00000000-0000-4000-8000-0000000000c2'::uuid, 'relay-b') $$,
  'only the newest socket of a device stays registered');
select is((select name from public.devices where id = '00000000-0000-4000-8000-00000000000a'), 'Ada''s iPhone',
  'an empty name keeps the device''s name');

select tests.authenticate_as_relay();
select is(tests.device_hello('relay-b', '00000000-0000-4000-8000-0000000000c2', tests.get_supabase_uid('ada'), tests.get_session_id('ada'),
  '00000000-0000-4000-8000-00000000000a', '', 'ios', '2.2.0', now()) ->> 'status', 'ok',
  'hello for a live socket again (resync) is harmless');
select is(tests.device_hello('relay-a', '00000000-0000-4000-8000-0000000000c3', tests.get_supabase_uid('bob'), tests.get_session_id('bob'),
  '00000000-0000-4000-8000-00000000000a', 'stolen', 'ios', '1', now()) ->> 'status', 'forbidden',
  'hello with another user''s device_id is forbidden');
select is(tests.device_hello('relay-a', '00000000-0000-4000-8000-0000000000c4', tests.get_supabase_uid('ada'), tests.get_session_id('ada'),
  '00000000-0000-4000-8000-0000000000a9', 'old', 'ios', '1', now()),
  '{"status": "revoked", "pending": []}'::jsonb, 'hello of a removed device reports revoked');
reset role;
select is((select count(*)::int from relay.connections), 1, 'forbidden and revoked sockets are not registered');

select tests.authenticate_as_relay();
select is(tests.device_hello('relay-a', gen_random_uuid(), tests.get_supabase_uid('ada'), tests.get_session_id('ada'),
  gen_random_uuid(), 'x', 'nokia', '1', now()) ->> 'status', 'invalid', 'hello refuses an unknown platform (status invalid)');
select throws_ok($$ select tests.device_hello('relay-a', null, tests.get_supabase_uid('ada'), tests.get_session_id('ada'),
  gen_random_uuid(), 'x', 'ios', '1', now()) $$, '22004', null, 'hello refuses a null connection id');
select is(tests.device_hello('relay-a', gen_random_uuid(), gen_random_uuid(), gen_random_uuid(),
  gen_random_uuid(), 'x', 'ios', '1', now()), '{"status": "revoked", "pending": []}'::jsonb,
  'hello of an unknown user is refused (status revoked)');
select throws_ok($$ select tests.device_hello('no good', gen_random_uuid(), tests.get_supabase_uid('ada'), tests.get_session_id('ada'),
  gen_random_uuid(), 'x', 'ios', '1', now()) $$, '22023', null, 'hello refuses a malformed instance id');

select results_eq($$ select (p ->> 'owner')::uuid from jsonb_array_elements(relay.device_hellos('relay-a', jsonb_build_array(
    jsonb_build_object('connection', '00000000-0000-4000-8000-0000000000c5', 'user', tests.get_supabase_uid('ada'),
      'session', tests.get_session_id('ada'), 'device', '00000000-0000-4000-8000-00000000000c', 'name', 'iPad',
      'platform', 'ios', 'app_version', '1', 'opened_at', now()),
    jsonb_build_object('connection', '00000000-0000-4000-8000-0000000000c6', 'user', tests.get_supabase_uid('bob'),
      'session', tests.get_session_id('bob'), 'device', '00000000-0000-4000-8000-00000000000b', 'name', 'Phone',
      'platform', 'ios', 'app_version', '1', 'opened_at', now()))) -> 'pending') p $$,
  array[tests.get_supabase_uid('ada')], 'a batch of hellos gets the requests waiting for its users, and only those');
select throws_ok($$ select relay.device_hellos('relay-a', null) $$, '22023', null, 'device_hellos refuses null');

select is(relay.device_disconnects(array['00000000-0000-4000-8000-0000000000c1']::uuid[]), 0,
  'disconnecting a replaced socket reports that it was not registered');
select is(relay.device_disconnects(array['00000000-0000-4000-8000-0000000000c2']::uuid[]), 1,
  'disconnecting the live socket removes it');
select throws_ok($$ select relay.device_disconnects(null) $$, '22023', null, 'device_disconnects refuses null');

reset role;
select * from finish();
rollback;
