-- Agent keys from the browser phone: the relay creates, lists and revokes a user's keys
-- for the user of the phone socket only; the plaintext exists once, and the API's
-- functions behave as before on the shared implementation.
begin;
select plan(12);

select tests.create_supabase_user('ada');
select tests.create_supabase_user('bob');

create temporary table made (key text);
grant select, insert on made to whereabot_relay;

select tests.authenticate_as_relay();
insert into made select relay.create_agent_key(tests.get_supabase_uid('ada'), '  laptop <b>x</b>  ')->>'key';
select ok((select key ~ '^wb_[0-9a-f]{64}$' from made), 'the plaintext key comes back once');
select is(jsonb_array_length(relay.agent_keys(tests.get_supabase_uid('ada'))), 1, 'the owner lists it');
select is(relay.agent_keys(tests.get_supabase_uid('ada'))->0->>'name', 'laptop <b>x</b>', 'its name is trimmed, kept as text');
select ok(relay.agent_keys(tests.get_supabase_uid('ada'))::text !~ '[0-9a-f]{64}', 'the list holds neither the key nor its hash');
select is((select user_id from relay.agent_key_owner(encode(sha256(convert_to((select key from made), 'UTF8')), 'hex'))),
  tests.get_supabase_uid('ada'), 'the key works as an agent credential');
select is(relay.agent_keys(tests.get_supabase_uid('bob')), '[]'::jsonb, 'another user lists none');
select throws_ok($$ select relay.revoke_agent_key(tests.get_supabase_uid('bob'),
  (relay.agent_keys(tests.get_supabase_uid('ada'))->0->>'id')::uuid) $$, 'P0002', null, 'another user cannot revoke it');
select throws_ok($$ select relay.create_agent_key(tests.get_supabase_uid('ada'), '   ') $$, '22023', null, 'a key needs a name');
select is(relay.revoke_agent_key(tests.get_supabase_uid('ada'), (relay.agent_keys(tests.get_supabase_uid('ada'))->0->>'id')::uuid),
  '[]'::jsonb, 'the owner revokes it');
select is((select count(*)::int from relay.agent_key_owner(encode(sha256(convert_to((select key from made), 'UTF8')), 'hex'))),
  0, 'a revoked key is no credential');

reset role;
select tests.authenticate_as('bob');
select ok(public.create_agent_key('api') ~ '^wb_', 'the API''s create_agent_key works as before');
select tests.authenticate_as_agent('bob');
select throws_ok($$ select public.create_agent_key('sneaky') $$, '42501', null, 'an agent credential still cannot create keys');

reset role;
select * from finish();
rollback;
