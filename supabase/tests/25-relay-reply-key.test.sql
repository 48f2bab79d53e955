-- relay.reply_key: only for a waiting request of the asking user's phones.
begin;
select plan(4);

select tests.create_supabase_user('ada');
select tests.create_supabase_user('bob');

select tests.authenticate_as_relay();
select relay.open_request('00000000-0000-4000-8000-0000000000e1', tests.get_supabase_uid('ada'), null,
  'agent-key', null, 'relay-a', decode(repeat('ab', 32), 'hex'), now() + interval '60 seconds');

select is(relay.reply_key('00000000-0000-4000-8000-0000000000e1', tests.get_supabase_uid('ada')),
  decode(repeat('ab', 32), 'hex'), 'the owner''s phone gets the waiter''s reply key');
select is(relay.reply_key('00000000-0000-4000-8000-0000000000e1', tests.get_supabase_uid('bob')), null,
  'another user''s phone gets nothing');
select relay.finish('00000000-0000-4000-8000-0000000000e1', 'relay-a', 'expired');
select is(relay.reply_key('00000000-0000-4000-8000-0000000000e1', tests.get_supabase_uid('ada')), null,
  'a request that no longer waits has no reply key');
select throws_ok($$ select relay.reply_key(null, null) $$, '22004', null, 'reply_key refuses null');

reset role;
select * from finish();
rollback;
