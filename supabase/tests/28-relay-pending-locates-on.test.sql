-- relay.pending_locates_on: the waiting pings of users with a socket on the instance only.
begin;
select plan(4);

select tests.create_supabase_user('ada');
select tests.create_supabase_user('bob');

select tests.authenticate_as_relay();
select relay.register_instance('relay-a'), relay.register_instance('relay-b');
select tests.device_hello('relay-a', '00000000-0000-4000-8000-0000000000c1', tests.get_supabase_uid('ada'), tests.get_session_id('ada'),
  '00000000-0000-4000-8000-00000000000a', 'Phone', 'ios', '1', now());
select tests.device_hello('relay-b', '00000000-0000-4000-8000-0000000000c2', tests.get_supabase_uid('bob'), tests.get_session_id('bob'),
  '00000000-0000-4000-8000-00000000000b', 'Phone', 'ios', '1', now());
select relay.open_request('00000000-0000-4000-8000-0000000000e1', tests.get_supabase_uid('ada'), null,
  'agent-key', null, 'relay-b', decode(repeat('ab', 32), 'hex'), now() + interval '60 seconds');
select relay.open_request('00000000-0000-4000-8000-0000000000e2', tests.get_supabase_uid('bob'), null,
  'agent-key', null, 'relay-b', decode(repeat('ab', 32), 'hex'), now() + interval '60 seconds');
select relay.open_request('00000000-0000-4000-8000-0000000000e3', tests.get_supabase_uid('ada'), null,
  'agent-key', null, 'relay-b', decode(repeat('ab', 32), 'hex'), now() + interval '60 seconds');
select relay.finish('00000000-0000-4000-8000-0000000000e3', 'relay-b', 'expired');

select results_eq($$ select owner_id, message ->> 'id' from relay.pending_locates_on('relay-a') $$,
  $$ values (tests.get_supabase_uid('ada'), '00000000-0000-4000-8000-0000000000e1') $$,
  'relay-a gets the waiting ping of its phone''s user, not finished ones, not other users''');
select is((select message ->> 'type' from relay.pending_locates_on('relay-a')), 'locate', 'as a locate message');
select is((select count(*)::int from relay.pending_locates_on('relay-c')), 0, 'an instance without sockets gets none');
select throws_ok($$ select * from relay.pending_locates_on('bad id!') $$, '22023', null, 'the instance id is checked');

reset role;
select * from finish();
rollback;
