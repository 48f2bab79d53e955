-- Durable requests (docs/protocol.md, "Durable requests"): bound to their credential, results kept only sealed and
-- only until keep_until, outliving their instance, capped per credential.
begin;
select plan(39);

select tests.create_supabase_user('ada');
select tests.create_supabase_user('bob');

create temporary table ids (name text primary key, id uuid);
grant select on ids to whereabot_relay;
insert into ids values
  ('task', '00000000-0000-4000-8000-0000000000d1'), ('call', '00000000-0000-4000-8000-0000000000d2'),
  ('keyed', '00000000-0000-4000-8000-0000000000d3'), ('sync', '00000000-0000-4000-8000-0000000000d4'),
  ('late', '00000000-0000-4000-8000-0000000000d5'), ('gone', '00000000-0000-4000-8000-0000000000d6');
create temporary table agent_keys_made (id uuid);
insert into agent_keys_made values ('00000000-0000-4000-8000-00000000ce01');
grant select on agent_keys_made to whereabot_relay;

select tests.authenticate_as_relay();

-- ---------------------------------------------------------------- opening
select is(relay.open_durable_request((select id from ids where name = 'task'), tests.get_supabase_uid('ada'), null,
  'client-1', 'Claude', null, 'relay-a', decode(repeat('ab', 32), 'hex'), now() + interval '300 seconds',
  now() + interval '310 seconds', true, decode(repeat('cd', 48), 'hex'))->>'status', 'opened',
  'a durable request opens');
select is(relay.open_durable_request((select id from ids where name = 'call'), tests.get_supabase_uid('ada'), null,
  'client-1', 'Claude', null, 'relay-a', decode(repeat('ab', 32), 'hex'), now() + interval '60 seconds',
  now() + interval '70 seconds', false, null)->>'status', 'opened',
  'a get_phone_location call opens its request resumable, not yet durable');
select is(relay.open_durable_request((select id from ids where name = 'keyed'), tests.get_supabase_uid('ada'), null,
  'agent-key', 'laptop', (select id from agent_keys_made), 'relay-a', decode(repeat('ab', 32), 'hex'),
  now() + interval '300 seconds', now() + interval '300 seconds', true, null)->>'status', 'opened',
  'an agent key''s durable request opens');
select relay.open_request((select id from ids where name = 'sync'), tests.get_supabase_uid('ada'), null,
  'client-1', null, 'relay-a', decode(repeat('ab', 32), 'hex'), now() + interval '60 seconds');

select throws_ok($$ select relay.open_durable_request(gen_random_uuid(), tests.get_supabase_uid('ada'), null,
  'client-1', null, null, 'relay-a', decode(repeat('ab', 32), 'hex'), now() + interval '60 seconds',
  now() + interval '20 minutes', true, null) $$, '22023', null, 'keep_until at most 10 minutes past the deadline');
select throws_ok($$ select relay.open_durable_request(gen_random_uuid(), tests.get_supabase_uid('ada'), null,
  'client-1', null, null, 'relay-a', decode(repeat('ab', 32), 'hex'), now() + interval '60 seconds',
  now() + interval '30 seconds', true, null) $$, '22023', null, 'keep_until never before the deadline');
select throws_ok($$ select relay.open_durable_request(gen_random_uuid(), tests.get_supabase_uid('ada'), null,
  'client-1', null, (select id from agent_keys_made), 'relay-a', decode(repeat('ab', 32), 'hex'),
  now() + interval '60 seconds', now() + interval '60 seconds', true, null) $$, '22023', null,
  'a key-bound request has client_id agent-key');
select throws_ok($$ select relay.open_durable_request(gen_random_uuid(), tests.get_supabase_uid('ada'), null,
  'client-1', null, null, 'relay-a', decode(repeat('ab', 32), 'hex'), now() + interval '60 seconds',
  now() + interval '60 seconds', true, '\x00'::bytea) $$, '22023', null, 'a wrapped secret has its size');

-- ---------------------------------------------------------------- binding
select is(relay.durable_state((select id from ids where name = 'task'), tests.get_supabase_uid('ada'), 'client-1', null,
  'relay-b')->>'status', 'waiting', 'its credential sees it waiting, from another instance');
select is(relay.durable_state((select id from ids where name = 'task'), tests.get_supabase_uid('bob'), 'client-1', null,
  'relay-b')->>'status', 'unknown', 'another user: unknown');
select is(relay.durable_state((select id from ids where name = 'task'), tests.get_supabase_uid('ada'), 'client-2', null,
  'relay-b')->>'status', 'unknown', 'another client of the same user: unknown');
select is(relay.durable_state((select id from ids where name = 'keyed'), tests.get_supabase_uid('ada'), 'agent-key',
  '00000000-0000-4000-8000-00000000ce02', 'relay-b')->>'status', 'unknown', 'another agent key of the same user: unknown');
select is(relay.durable_state((select id from ids where name = 'keyed'), tests.get_supabase_uid('ada'), 'agent-key',
  (select id from agent_keys_made), 'relay-b')->>'status', 'waiting', 'the key that opened it sees it');
select is(relay.durable_state((select id from ids where name = 'call'), tests.get_supabase_uid('ada'), 'client-1', null,
  'relay-b')->>'status', 'waiting', 'a call''s request is visible to its own credential before it is made durable (a repeated ask joins it)');
select is(relay.durable_state((select id from ids where name = 'sync'), tests.get_supabase_uid('ada'), 'client-1', null,
  'relay-b')->>'status', 'unknown', 'a synchronous request is never pollable');
select is(relay.cancel_durable((select id from ids where name = 'task'), tests.get_supabase_uid('bob'), 'client-1', null, false),
  'unknown', 'another user cannot cancel it');

-- ---------------------------------------------------------------- watching
select relay.durable_state((select id from ids where name = 'task'), tests.get_supabase_uid('ada'), 'client-1', null,
  'relay-c', true);
reset role;
select is((select watcher_instance from relay.pending_requests where id = (select id from ids where name = 'task')), 'relay-c',
  'a watching poll has the answer sent to its own instance too');
select tests.authenticate_as_relay();

-- ---------------------------------------------------------------- results, sealed only
select throws_ok($$ select relay.settle((select id from ids where name = 'task'), tests.get_supabase_uid('ada'), null,
  'location', null, null, 'relay-a') $$, '22023', null,
  'a resumable request''s location comes sealed, even from its waiter''s instance');
select is(relay.settle((select id from ids where name = 'task'), tests.get_supabase_uid('ada'), null,
  'location', null, 'c2VhbGVk', 'relay-b'), 'settled', 'the sealed answer settles it');
select is(relay.durable_state((select id from ids where name = 'task'), tests.get_supabase_uid('ada'), 'client-1', null,
  'relay-b')->>'sealed', 'c2VhbGVk', 'the poll gets the ciphertext back');
select is(relay.settle((select id from ids where name = 'sync'), tests.get_supabase_uid('ada'), null,
  'location', null, 'c2VhbGVk', 'relay-b'), 'settled', 'a synchronous request settles as before');
reset role;
select is((select count(*)::int from relay.sealed_results), 1, 'only the resumable request''s result is kept');
select ok((select keep_until <= now() + interval '10 minutes' from relay.pending_requests
           where id = (select id from ids where name = 'task')), 'a settled result is kept at most 10 minutes');
select tests.authenticate_as_relay();

-- ---------------------------------------------------------------- make_durable, instances dying
select is(relay.make_durable((select id from ids where name = 'call'), 'relay-b')->>'status', 'gone',
  'only the call''s own instance makes it durable');
select is(relay.make_durable((select id from ids where name = 'call'), 'relay-a')->>'status', 'durable',
  'the call''s instance makes it durable at its wait bound');
select relay.register_instance('relay-a');
select is(relay.durable_state((select id from ids where name = 'call'), tests.get_supabase_uid('ada'), 'client-1', null,
  'relay-b')->>'status', 'waiting', 'a restarting instance leaves its durable requests open');
select is(relay.open_durable_request((select id from ids where name = 'late'), tests.get_supabase_uid('ada'), null,
  'client-1', null, null, 'relay-d', decode(repeat('ab', 32), 'hex'), now() + interval '60 seconds',
  now() + interval '70 seconds', false, null)->>'status', 'opened', 'another call opens');
reset role;
insert into relay.instances (id, heartbeat_at) values ('relay-d', now() - interval '1 hour')
  on conflict (id) do update set heartbeat_at = excluded.heartbeat_at;
update relay.instances set heartbeat_at = now() - interval '1 hour' where id = 'relay-a';
select tests.authenticate_as_relay();
select relay.reap();
reset role;
select is((select outcome from relay.pending_requests where id = (select id from ids where name = 'late')), 'abandoned',
  'a call that was not yet durable is abandoned with its dead instance');
select is((select settled_at from relay.pending_requests where id = (select id from ids where name = 'call')), null,
  'a durable request outlives its dead instance');
select tests.authenticate_as_relay();

-- ---------------------------------------------------------------- listing
select is((select count(*)::int from relay.durable_requests(tests.get_supabase_uid('ada'), 'client-1', null, null, null, 10)),
  1, 'tasks/list shows the credential''s own requests whose secret is wrapped');
select is((select count(*)::int from relay.durable_requests(tests.get_supabase_uid('bob'), 'client-1', null, null, null, 10)),
  0, 'another user lists none of them');
select ok((select bool_and(view->'sealed' is null) from relay.durable_requests(tests.get_supabase_uid('ada'), 'client-1', null, null, null, 10)),
  'the list never carries a result');

-- ---------------------------------------------------------------- cancelling
select is(relay.cancel_durable((select id from ids where name = 'call'), tests.get_supabase_uid('ada'), 'client-1', null, false),
  'cancelled', 'the agent cancels its open request');
select is(relay.durable_state((select id from ids where name = 'call'), tests.get_supabase_uid('ada'), 'client-1', null,
  'relay-b')->>'outcome', 'abandoned', 'a later poll says it was abandoned');
select is(relay.cancel_durable((select id from ids where name = 'keyed'), tests.get_supabase_uid('ada'), 'agent-key',
  (select id from agent_keys_made), true), 'cancelled', 'DELETE cancels and forgets');
select is(relay.durable_state((select id from ids where name = 'keyed'), tests.get_supabase_uid('ada'), 'agent-key',
  (select id from agent_keys_made), 'relay-b')->>'status', 'unknown', 'a forgotten request is unknown');

-- ---------------------------------------------------------------- past the TTL
reset role;
update relay.pending_requests set keep_until = now() - interval '1 second' where id = (select id from ids where name = 'task');
select tests.authenticate_as_relay();
select is(relay.durable_state((select id from ids where name = 'task'), tests.get_supabase_uid('ada'), 'client-1', null,
  'relay-b')->>'status', 'unknown', 'past keep_until the result is gone for its agent too');
select relay.reap();
reset role;
select is((select count(*)::int from relay.sealed_results), 0, 'the reaper deletes the request and its sealed result');

-- ---------------------------------------------------------------- the cap per credential
select tests.authenticate_as_relay();
select is((select count(*)::int from generate_series(1, 20) n
           where relay.open_durable_request(gen_random_uuid(), tests.get_supabase_uid('bob'), null, 'client-9', null, null,
             'relay-b', decode(repeat('ab', 32), 'hex'), now() + interval '300 seconds', now() + interval '300 seconds',
             true, null, 100)->>'status' = 'opened'), 20, 'a credential opens 20 durable requests');
select is(relay.open_durable_request(gen_random_uuid(), tests.get_supabase_uid('bob'), null, 'client-9', null, null,
  'relay-b', decode(repeat('ab', 32), 'hex'), now() + interval '300 seconds', now() + interval '300 seconds',
  true, null, 100)->>'status', 'too_many', 'the 21st is refused');
reset role;

select * from finish();
rollback;
