-- relay.request_replay / relay.replay_answer: only location-settled requests of the asking
-- waiter are replayed, and only they can be re-sent.
begin;
select plan(9);

select tests.create_supabase_user('ada');

select tests.authenticate_as_relay();
select relay.open_request('00000000-0000-4000-8000-0000000000f1', tests.get_supabase_uid('ada'), null,
  'agent-key', null, 'relay-a', decode(repeat('ab', 32), 'hex'), now() + interval '60 seconds');
select relay.open_request('00000000-0000-4000-8000-0000000000f2', tests.get_supabase_uid('ada'), null,
  'agent-key', null, 'relay-a', decode(repeat('ab', 32), 'hex'), now() + interval '60 seconds');
select relay.open_request('00000000-0000-4000-8000-0000000000f3', tests.get_supabase_uid('ada'), null,
  'agent-key', null, 'relay-a', decode(repeat('ab', 32), 'hex'), now() + interval '60 seconds');

select is(relay.replay_answer('00000000-0000-4000-8000-0000000000f1', 'c2VhbGVk'), false,
  'a request still waiting has no answer to replay');
select is(relay.settle('00000000-0000-4000-8000-0000000000f1', tests.get_supabase_uid('ada'), null,
  'location', null, 'c2VhbGVk'), 'settled', 'f1 settled with a sealed location');
select is(relay.settle('00000000-0000-4000-8000-0000000000f2', tests.get_supabase_uid('ada'), null,
  'denied', 'user', null), 'settled', 'f2 settled as denied');

select is(relay.request_replay(array['00000000-0000-4000-8000-0000000000f1',
  '00000000-0000-4000-8000-0000000000f2', '00000000-0000-4000-8000-0000000000f3',
  '00000000-0000-4000-8000-0000000000f9']::uuid[], 'relay-a'), 1,
  'only the location-settled request is replayed (denied, waiting and unknown ones are not)');
select is(relay.request_replay(array['00000000-0000-4000-8000-0000000000f1']::uuid[], 'relay-b'), 0,
  'another instance cannot ask for a waiter''s answers');
select is(relay.replay_answer('00000000-0000-4000-8000-0000000000f1', 'c2VhbGVk'), true,
  'the sealer re-sends a location answer');
select is(relay.replay_answer('00000000-0000-4000-8000-0000000000f2', 'c2VhbGVk'), false,
  'a denied request cannot be turned into a location');
select throws_ok($$ select relay.replay_answer('00000000-0000-4000-8000-0000000000f1', 'not base64!') $$,
  '22023', null, 'replay_answer refuses text that is not base64');
select throws_ok($$ select relay.request_replay(null, 'relay-a') $$, '22023', null,
  'request_replay refuses a null list');

reset role;
select * from finish();
rollback;
