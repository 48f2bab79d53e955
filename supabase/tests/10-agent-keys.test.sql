-- agent_keys: owners read their own keys from their own session; keys are created and
-- revoked only through functions; only hashes are stored.
begin;
select plan(33);

select tests.create_supabase_user('ada');
select tests.create_supabase_user('bob');
create temp table stash (k text primary key, v text);
grant all on stash to public;

-- ---------------------------------------------------------------- create (insert)
select tests.authenticate_as('ada');
insert into stash values ('key', public.create_agent_key('laptop'));
select matches((select v from stash where k = 'key'), '^wb_[0-9a-f]{64}$',
  'create_agent_key returns a wb_ key to the owner''s session');
insert into stash values ('id', (select id::text from public.agent_keys));
select throws_ok($$ insert into public.agent_keys (user_id, name, key_hash, key_prefix)
  values (auth.uid(), 'mine', repeat('a', 64), 'wb_aaaaaaaa') $$, '42501', null,
  'the owner cannot insert a key row directly');
select throws_ok($$ select public.create_agent_key('') $$, '22023', null,
  'create_agent_key refuses an empty name');
select throws_ok($$ select public.create_agent_key(null) $$, '22023', null,
  'create_agent_key refuses a null name');
select throws_ok($$ select public.create_agent_key(repeat('x', 101)) $$, '22023', null,
  'create_agent_key refuses a name over 100 characters');

select tests.authenticate_as('bob');
select throws_ok($$ insert into public.agent_keys (user_id, name, key_hash, key_prefix)
  values (tests.get_supabase_uid('ada'), 'evil', repeat('b', 64), 'wb_bbbbbbbb') $$, '42501', null,
  'another user cannot insert a key for the owner');

select tests.authenticate_as_agent('ada');
select throws_ok($$ select public.create_agent_key('agent made') $$, '42501', null,
  'an agent token cannot create agent keys');

select tests.clear_authentication();
select throws_ok($$ select public.create_agent_key('anon') $$, '42501', null,
  'anon cannot create agent keys');
select throws_ok($$ insert into public.agent_keys (user_id, name, key_hash, key_prefix)
  values (tests.get_supabase_uid('ada'), 'anon', repeat('c', 64), 'wb_cccccccc') $$, '42501', null,
  'anon cannot insert key rows');

-- ---------------------------------------------------------------- only the hash
reset role;
select is((select key_hash from public.agent_keys where id = (select v from stash where k = 'id')::uuid),
          encode(sha256(convert_to((select v from stash where k = 'key'), 'UTF8')), 'hex'),
  'the stored hash is the SHA-256 of the key');
select is_empty($$
  select * from public.agent_keys k
  where to_jsonb(k)::text like '%' || substr((select v from stash where k = 'key'), 4) || '%'
$$, 'no column of agent_keys holds the plaintext key');
select is((select key_prefix from public.agent_keys), left((select v from stash where k = 'key'), 11),
  'key_prefix shows the first 11 characters');

-- ---------------------------------------------------------------- select
select tests.authenticate_as('ada');
select results_eq($$ select name from public.agent_keys $$, array['laptop'],
  'the owner reads their own keys');
select tests.authenticate_as('bob');
select is_empty($$ select * from public.agent_keys $$, 'another user reads no keys of the owner');
select tests.authenticate_as_agent('ada');
select is_empty($$ select * from public.agent_keys $$, 'an agent token reads no agent keys');
select tests.clear_authentication();
select throws_ok($$ select * from public.agent_keys $$, '42501', null, 'anon cannot read agent keys');

-- ---------------------------------------------------------------- revoke (update)
select tests.authenticate_as('bob');
select throws_ok(format('select public.revoke_agent_key(%L)', (select v from stash where k = 'id')),
  'P0002', null, 'another user cannot revoke the owner''s key');
select throws_ok($$ update public.agent_keys set revoked_at = now() $$, '42501', null,
  'another user cannot update key rows');
select tests.authenticate_as_agent('ada');
select throws_ok(format('select public.revoke_agent_key(%L)', (select v from stash where k = 'id')),
  '42501', null, 'an agent token cannot revoke keys');
select tests.clear_authentication();
select throws_ok($$ update public.agent_keys set revoked_at = now() $$, '42501', null,
  'anon cannot update key rows');
select tests.authenticate_as('ada');
select throws_ok($$ update public.agent_keys set name = 'renamed' $$, '42501', null,
  'the owner cannot update key rows directly');
select throws_ok($$ select public.revoke_agent_key(null) $$, '22004', null,
  'revoke_agent_key refuses a null id');
select is(public.revoke_agent_key((select v from stash where k = 'id')::uuid), true,
  'the owner revokes their key');
select is(public.revoke_agent_key((select v from stash where k = 'id')::uuid), false,
  'revoking it again reports that it already was');
select isnt((select revoked_at from public.agent_keys), null, 'the key row is marked revoked');

select tests.authenticate_as_service_role();
select throws_ok($$ update public.agent_keys set revoked_at = null $$, '42501', null,
  'a revoked key cannot be restored, even by the service role');

-- ---------------------------------------------------------------- delete
select tests.authenticate_as('ada');
select throws_ok($$ delete from public.agent_keys $$, '42501', null,
  'the owner cannot delete key rows (they revoke them)');
select tests.authenticate_as('bob');
select throws_ok($$ delete from public.agent_keys $$, '42501', null, 'another user cannot delete key rows');
select tests.authenticate_as_agent('ada');
select throws_ok($$ delete from public.agent_keys $$, '42501', null, 'an agent token cannot delete key rows');
select tests.clear_authentication();
select throws_ok($$ delete from public.agent_keys $$, '42501', null, 'anon cannot delete key rows');
select tests.authenticate_as_service_role();
select results_eq($$ with d as (delete from public.agent_keys returning 1) select count(*)::int from d $$,
  array[1], 'the service role can delete key rows');

-- ---------------------------------------------------------------- cap
select tests.authenticate_as('bob');
select lives_ok($$ select public.create_agent_key('k' || i) from generate_series(1, 25) i $$,
  'a user may hold 25 live keys');
select throws_ok($$ select public.create_agent_key('one too many') $$, '54000', null,
  'the 26th live key is refused');

reset role;
select * from finish();
rollback;
