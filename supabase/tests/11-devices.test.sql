-- devices: owners read their devices (their agents too), register, rename and remove them
-- from their own session; removal is final and notifies the relay.
begin;
select plan(24);

select tests.create_supabase_user('ada');
select tests.create_supabase_user('bob');
insert into public.devices (id, user_id, name, platform)
values ('00000000-0000-4000-8000-00000000000a', tests.get_supabase_uid('ada'), 'Ada''s iPhone', 'ios'),
       ('00000000-0000-4000-8000-00000000000b', tests.get_supabase_uid('bob'), 'Bob''s Pixel', 'android');

-- ---------------------------------------------------------------- select
select tests.authenticate_as('ada');
select results_eq($$ select name from public.devices $$, array['Ada''s iPhone'],
  'the owner reads only their own devices');
select tests.authenticate_as_agent('ada');
select is_empty($$ select name, last_seen_at from public.devices $$,
  'the owner''s agent reads none of the owner''s devices (no presence without a request)');
select tests.authenticate_as('bob');
select results_eq($$ select name from public.devices $$, array['Bob''s Pixel'],
  'another user reads none of the owner''s devices');
select tests.clear_authentication();
select throws_ok($$ select * from public.devices $$, '42501', null, 'anon cannot read devices');

-- ---------------------------------------------------------------- insert
select tests.authenticate_as('ada');
select lives_ok($$ insert into public.devices (id, user_id, name, platform)
  values ('00000000-0000-4000-8000-0000000000a2', auth.uid(), 'Ada''s Mac', 'desktop') $$,
  'the owner registers a device from their own session');
select throws_ok($$ insert into public.devices (id, user_id, name, platform, revoked_at)
  values ('00000000-0000-4000-8000-0000000000a3', auth.uid(), 'x', 'web', now()) $$, '42501', null,
  'a device cannot be registered already removed');
select throws_ok($$ insert into public.devices (id, user_id, name, platform)
  values ('00000000-0000-4000-8000-0000000000a4', auth.uid(), 'x', 'blackberry') $$, '23514', null,
  'an unknown platform is refused');
select tests.authenticate_as('bob');
select throws_ok($$ insert into public.devices (id, user_id, name, platform)
  values ('00000000-0000-4000-8000-0000000000b2', tests.get_supabase_uid('ada'), 'planted', 'ios') $$,
  '42501', null, 'another user cannot register a device for the owner');
select tests.authenticate_as_agent('ada');
select throws_ok($$ insert into public.devices (id, user_id, name, platform)
  values ('00000000-0000-4000-8000-0000000000a5', auth.uid(), 'agent', 'web') $$, '42501', null,
  'an agent token cannot register devices');
select tests.clear_authentication();
select throws_ok($$ insert into public.devices (id, user_id, name, platform)
  values ('00000000-0000-4000-8000-0000000000a6', tests.get_supabase_uid('ada'), 'anon', 'web') $$,
  '42501', null, 'anon cannot register devices');

-- ---------------------------------------------------------------- update
select tests.authenticate_as('bob');
select is_empty($$ update public.devices set name = 'pwned'
  where id = '00000000-0000-4000-8000-00000000000a' returning 1 $$,
  'another user cannot rename the owner''s device');
select tests.authenticate_as_agent('ada');
select is_empty($$ update public.devices set revoked_at = now() returning 1 $$,
  'an agent token cannot remove devices');
select tests.clear_authentication();
select throws_ok($$ update public.devices set name = 'anon' $$, '42501', null, 'anon cannot update devices');
select tests.authenticate_as('ada');
select throws_ok($$ update public.devices set user_id = tests.get_supabase_uid('bob') $$, '42501', null,
  'the owner cannot give a device to someone else');
select results_eq($$ update public.devices set name = 'Work phone'
  where id = '00000000-0000-4000-8000-00000000000a' returning name $$, array['Work phone'],
  'the owner renames their device');
select results_eq($$ update public.devices set revoked_at = now()
  where id = '00000000-0000-4000-8000-00000000000a' returning revoked_at is not null $$, array[true],
  'the owner removes their device');
select throws_ok($$ update public.devices set revoked_at = null
  where id = '00000000-0000-4000-8000-00000000000a' $$, '42501', null,
  'a removed device cannot be restored');
reset role;
select is((select name from public.devices where id = '00000000-0000-4000-8000-00000000000b'),
  'Bob''s Pixel', 'the other user''s device is unchanged');

-- ---------------------------------------------------------------- delete
select tests.authenticate_as('ada');
select throws_ok($$ delete from public.devices $$, '42501', null,
  'the owner cannot delete devices (they remove them, which the relay enforces)');
select tests.authenticate_as('bob');
select throws_ok($$ delete from public.devices where user_id <> auth.uid() $$, '42501', null,
  'another user cannot delete devices');
select tests.authenticate_as_agent('ada');
select throws_ok($$ delete from public.devices $$, '42501', null, 'an agent token cannot delete devices');
select tests.clear_authentication();
select throws_ok($$ delete from public.devices $$, '42501', null, 'anon cannot delete devices');
select tests.authenticate_as_service_role();
select lives_ok($$ delete from public.devices where id = '00000000-0000-4000-8000-0000000000a2' $$,
  'the service role can delete devices');

-- ---------------------------------------------------------------- cap
reset role;
select throws_ok($$ insert into public.devices (id, user_id, platform)
  select gen_random_uuid(), tests.get_supabase_uid('bob'), 'web' from generate_series(1, 50) $$,
  '54000', null, 'a user may hold at most 50 live devices');

select * from finish();
rollback;
