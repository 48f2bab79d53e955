-- relay.device_hellos (a batch of hellos in one call), relay.device_disconnects,
-- relay.drain_connections, and the races that could leave a phone without its ping: a
-- reaped instance is never re-created
-- by a hello (2), and a stale hello never displaces a newer socket, batched or not (3).
begin;
select plan(31);

select tests.create_supabase_user('ada');
select tests.create_supabase_user('bob');
select tests.create_supabase_user('cyd');

-- One hello as device_hellos takes it: socket c<n>, device d<n>, opened `ago` before now.
create function pg_temp.hello(p_socket int, p_who text, p_device int, p_ago interval default '0')
returns jsonb language sql as $$
  select jsonb_build_object(
    'connection', ('00000000-0000-4000-8000-0000000001' || lpad(p_socket::text, 2, '0'))::uuid,
    'user', tests.get_supabase_uid(p_who), 'session', tests.get_session_id(p_who),
    'device', ('00000000-0000-4000-8000-0000000002' || lpad(p_device::text, 2, '0'))::uuid,
    'name', 'Phone', 'platform', 'ios', 'app_version', '1', 'opened_at', now() - p_ago)
$$;
create function pg_temp.statuses(p_result jsonb) returns text[] language sql as $$
  select array_agg(r ->> 'status' order by n) from jsonb_array_elements(p_result -> 'results') with ordinality x(r, n)
$$;
create temp table stash (k text primary key, v jsonb);
grant all on stash to public;

select tests.authenticate_as_relay();
select relay.register_instance('relay-a'), relay.register_instance('relay-b');
select relay.open_request('00000000-0000-4000-8000-0000000000e1', tests.get_supabase_uid('ada'), null, 'c-1', 'Claude',
  'relay-b', decode(repeat('ab', 32), 'hex'), now() + interval '60 seconds');

-- A batch of three sockets of two users.
insert into stash values ('batch', relay.device_hellos('relay-a', jsonb_build_array(
  pg_temp.hello(1, 'ada', 1), pg_temp.hello(2, 'ada', 2), pg_temp.hello(3, 'bob', 3))));
select is(pg_temp.statuses((select v from stash where k = 'batch')), array['ok', 'ok', 'ok'],
  'every hello of a batch is registered, each with its status, in the order given');
select is((select v -> 'results' -> 1 ->> 'connection' from stash where k = 'batch'),
  '00000000-0000-4000-8000-000000000102', 'a result names its connection');
select is((select jsonb_array_length(v -> 'pending') from stash where k = 'batch'), 1,
  'the pings waiting for the batch''s users come back once per user, not once per socket');
select is((select v -> 'pending' -> 0 ->> 'owner' from stash where k = 'batch'), tests.get_supabase_uid('ada')::text,
  'a pending ping names its owner');
select is((select v -> 'pending' -> 0 -> 'message' ->> 'id' from stash where k = 'batch'),
  '00000000-0000-4000-8000-0000000000e1', 'with the locate message of the waiting request');
reset role;
select is((select count(*)::int from relay.connections where instance_id = 'relay-a'), 3, 'three rows for three sockets');

-- Statuses a batch reports per socket.
select tests.authenticate_as_relay();
select is(pg_temp.statuses(relay.device_hellos('relay-a', jsonb_build_array(
  pg_temp.hello(4, 'cyd', 4) || jsonb_build_object('session', gen_random_uuid()), pg_temp.hello(5, 'bob', 1),
  pg_temp.hello(6, 'bob', 6) || jsonb_build_object('user', gen_random_uuid())))),
  array['revoked', 'forbidden', 'revoked'],
  'a session that is gone is revoked, another user''s device forbidden, an unknown user revoked — each alone');
select is(pg_temp.statuses(relay.device_hellos('relay-a', jsonb_build_array(pg_temp.hello(7, 'bob', 7)), 1)),
  array['too_many'], 'the cap on a user''s sockets holds in a batch');

-- Race 3: a stale hello (replayed for an older socket of the device) never displaces the newer one.
select relay.device_hellos('relay-b', jsonb_build_array(pg_temp.hello(10, 'bob', 10)));
select is(pg_temp.statuses(relay.device_hellos('relay-a', jsonb_build_array(pg_temp.hello(11, 'bob', 10, '1 minute')))),
  array['replaced'], 'a batched hello of an older socket of a device is replaced by the newer one');
select is(pg_temp.statuses(relay.device_hellos('relay-a', jsonb_build_array(
  pg_temp.hello(12, 'bob', 12), pg_temp.hello(13, 'bob', 12, '1 minute')))),
  array['ok', 'replaced'], 'in one batch the later socket of a device wins, whichever comes first');
reset role;
select results_eq($$ select id from relay.connections where device_id in
  ('00000000-0000-4000-8000-000000000210', '00000000-0000-4000-8000-000000000212') order by id $$,
  $$ values ('00000000-0000-4000-8000-000000000110'::uuid), ('00000000-0000-4000-8000-000000000112'::uuid) $$,
  'only the newer sockets keep their rows');

-- Bad batches are refused whole.
select tests.authenticate_as_relay();
select throws_ok($$ select relay.device_hellos('relay-a', '[]') $$, '22023', null, 'an empty batch is refused');
select throws_ok($$ select relay.device_hellos('relay-a', (select jsonb_agg(pg_temp.hello(1, 'ada', 1) || jsonb_build_object('connection', gen_random_uuid()))
  from generate_series(1, 1001))) $$, '22023', null, 'a batch over 1000 hellos is refused');
select throws_ok($$ select relay.device_hellos('relay-a', jsonb_build_array(pg_temp.hello(20, 'ada', 20), pg_temp.hello(20, 'ada', 21))) $$,
  '22023', null, 'a connection twice in one batch is refused');
select is(pg_temp.statuses(relay.device_hellos('relay-a', jsonb_build_array(pg_temp.hello(20, 'ada', 20) - 'device',
  pg_temp.hello(21, 'cyd', 21)))), array['invalid', 'ok'], 'a hello without a device id is invalid alone; the rest of its batch registers');
select is(pg_temp.statuses(relay.device_hellos('relay-a', jsonb_build_array(pg_temp.hello(22, 'ada', 22) || '{"platform": "nokia"}',
  pg_temp.hello(23, 'cyd', 23)))), array['invalid', 'ok'], 'an unknown platform is invalid alone');
select throws_ok($$ select relay.device_hellos('relay-a', jsonb_build_array(pg_temp.hello(20, 'ada', 20) || '{"opened_at": "yesterday-ish"}')) $$,
  '22007', null, 'a malformed opening time is refused');

-- device_disconnects and drain_connections.
select is(relay.device_disconnects(array['00000000-0000-4000-8000-000000000101', '00000000-0000-4000-8000-000000000199']::uuid[]), 1,
  'device_disconnects forgets the registered sockets and skips unknown ones');
select throws_ok($$ select relay.device_disconnects(array(select gen_random_uuid() from generate_series(1, 10001))) $$,
  '22023', null, 'device_disconnects takes at most 10000 ids');
select is(relay.drain_connections('relay-a'), 5, 'drain_connections forgets every socket of the draining instance at once');
reset role;
select is((select count(*)::int from relay.connections where instance_id = 'relay-a'), 0, 'relay-a holds no socket any more');
select is((select count(*)::int from relay.connections where instance_id = 'relay-b'), 1, 'relay-b''s sockets stay');

-- Race 2: a reaped instance learns it from its heartbeat, not from a hello that re-created its row.
update relay.instances set heartbeat_at = now() - interval '5 minutes' where id = 'relay-b';
select tests.authenticate_as_relay();
select relay.reap();
select is(pg_temp.statuses(relay.device_hellos('relay-b', jsonb_build_array(pg_temp.hello(30, 'ada', 30)))),
  array['unregistered'], 'a hello on a reaped instance is unregistered');
select is(tests.device_hello('relay-b', '00000000-0000-4000-8000-000000000131', tests.get_supabase_uid('ada'),
  tests.get_session_id('ada'), '00000000-0000-4000-8000-000000000231', 'Phone', 'ios', '1', now()) ->> 'status',
  'unregistered', 'and so is every later hello, of any device');
reset role;
select is((select count(*)::int from relay.instances where id = 'relay-b'), 0, 'neither re-created the reaped instance''s row');
select is((select count(*)::int from relay.connections where instance_id = 'relay-b'), 0, 'nor registered a socket');
select tests.authenticate_as_relay();
select ok(relay.heartbeat('relay-b'), 'so the reaped instance''s heartbeat finds its row gone (and it re-registers its sockets)');

-- relay.session_states: the session checks of many sockets in one call.
select is(relay.session_states(array[tests.get_session_id('ada'), tests.get_session_id('bob'), gen_random_uuid()],
                               array[tests.get_supabase_uid('ada'), tests.get_supabase_uid('ada'), tests.get_supabase_uid('bob')]),
  array['alive', 'signed_out', 'signed_out'], 'session_states answers each pair in order (another user''s session is not alive)');
select is(relay.session_states('{}', '{}'), '{}'::text[], 'no pairs, no states');
select throws_ok($$ select relay.session_states(array[gen_random_uuid()], '{}') $$, '22023', null,
  'session_states needs as many users as sessions');
select throws_ok($$ select relay.session_states(array(select gen_random_uuid() from generate_series(1, 1001)),
  array(select gen_random_uuid() from generate_series(1, 1001))) $$, '22023', null, 'session_states takes at most 1000 pairs');

select * from finish();
rollback;
