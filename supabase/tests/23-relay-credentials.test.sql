-- relay.agent_key_owner, relay.session_states, relay.client_name.
begin;
select plan(14);

select tests.create_supabase_user('ada', 'ada@test.example');
create temp table stash (k text primary key, v text);
grant all on stash to public;
select tests.authenticate_as('ada');
insert into stash values ('key', public.create_agent_key('CI runner'));
insert into stash values ('old', public.create_agent_key('old'));
select public.revoke_agent_key((select id from public.agent_keys where name = 'old'));
reset role;
insert into stash values ('hash', encode(sha256(convert_to((select v from stash where k = 'key'), 'UTF8')), 'hex'));
insert into stash values ('oldhash', encode(sha256(convert_to((select v from stash where k = 'old'), 'UTF8')), 'hex'));
select tests.create_oauth_client('11111111-1111-4111-8111-111111111111', 'Claude');
select tests.create_oauth_client('22222222-2222-4222-8222-222222222222', '  ');
select tests.create_oauth_client('33333333-3333-4333-8333-333333333333', 'Gone', now());
insert into auth.sessions (id, user_id, not_after) values
  ('00000000-0000-4000-8000-0000000000f1', tests.get_supabase_uid('ada'), now() - interval '1 minute');

select tests.authenticate_as_relay();
select results_eq(format('select user_id, key_name, email from relay.agent_key_owner(%L)', (select v from stash where k = 'hash')),
  $$ values (tests.get_supabase_uid('ada'), 'CI runner', 'ada@test.example') $$,
  'agent_key_owner finds the owner, key name and email by hash');
select is_empty(format('select * from relay.agent_key_owner(%L)', (select v from stash where k = 'oldhash')),
  'a revoked key has no owner');
select is_empty(format('select * from relay.agent_key_owner(%L)', repeat('0', 64)), 'an unknown hash has no owner');
select throws_ok(format('select * from relay.agent_key_owner(%L)', (select v from stash where k = 'key')), '22023', null,
  'agent_key_owner refuses a plaintext key: only hashes cross');
select throws_ok('select * from relay.agent_key_owner(null)', '22023', null, 'agent_key_owner refuses null');
reset role;
select isnt((select last_used_at from public.agent_keys where name = 'CI runner'), null, 'a lookup touches last_used_at');
update public.agent_keys set last_used_at = now() - interval '30 seconds' where name = 'CI runner';
select tests.authenticate_as_relay();
select * from relay.agent_key_owner((select v from stash where k = 'hash'));
reset role;
select is((select last_used_at from public.agent_keys where name = 'CI runner'), now() - interval '30 seconds',
  'last_used_at is touched at most once a minute');

select tests.authenticate_as_relay();
select is(relay.session_states(array[tests.get_session_id('ada')], array[tests.get_supabase_uid('ada')]), array['alive'],
  'a live session is alive');
select is(relay.session_states(array[tests.get_session_id('ada')], array[gen_random_uuid()]), array['signed_out'],
  'a session is alive only for its own user');
select is(relay.session_states(array['00000000-0000-4000-8000-0000000000f1']::uuid[], array[tests.get_supabase_uid('ada')]),
  array['signed_out'], 'a session past not_after is not alive');
select throws_ok($$ select relay.session_states(array[null]::uuid[], array[null]::uuid[]) $$, '22004', null,
  'session_states refuses a null session or user');

select results_eq($$ select relay.client_name('11111111-1111-4111-8111-111111111111') $$, array['Claude'],
  'client_name reads the OAuth client''s name');
select results_eq($$ select relay.client_name(x) from unnest(array['22222222-2222-4222-8222-222222222222',
  '33333333-3333-4333-8333-333333333333', '44444444-4444-4444-8444-444444444444', 'agent-key']) x $$,
  array[null, null, null, null]::text[], 'blank, deleted, unknown and non-OAuth clients have no name');
select throws_ok($$ select relay.client_name(null) $$, '22004', null, 'client_name refuses null');

reset role;
select * from finish();
rollback;
