-- push_tokens: only the owner's own session reads and writes them; agents never see them.
begin;
select plan(20);

select tests.create_supabase_user('ada');
select tests.create_supabase_user('bob');
insert into public.devices (id, user_id, platform) values
  ('00000000-0000-4000-8000-00000000000a', tests.get_supabase_uid('ada'), 'ios'),
  ('00000000-0000-4000-8000-00000000000b', tests.get_supabase_uid('bob'), 'ios');
insert into public.push_tokens (token, user_id, device_id) values
  (repeat('a1', 32), tests.get_supabase_uid('ada'), '00000000-0000-4000-8000-00000000000a'),
  (repeat('b1', 32), tests.get_supabase_uid('bob'), '00000000-0000-4000-8000-00000000000b');

-- select
select tests.authenticate_as('ada');
select results_eq($$ select token from public.push_tokens $$, array[repeat('a1', 32)],
  'the owner reads their own push tokens');
select tests.authenticate_as('bob');
select results_eq($$ select token from public.push_tokens $$, array[repeat('b1', 32)],
  'another user reads only their own push tokens');
select tests.authenticate_as_agent('ada');
select is_empty($$ select * from public.push_tokens $$, 'an agent token reads no push tokens');
select tests.clear_authentication();
select throws_ok($$ select * from public.push_tokens $$, '42501', null, 'anon cannot read push tokens');

-- insert
select tests.authenticate_as('ada');
select lives_ok($$ insert into public.push_tokens (token, user_id, device_id, environment)
  values (repeat('a2', 32), auth.uid(), '00000000-0000-4000-8000-00000000000a', 'sandbox') $$,
  'the owner adds a push token for their device');
select throws_ok($$ insert into public.push_tokens (token, user_id, device_id)
  values (repeat('a3', 32), auth.uid(), '00000000-0000-4000-8000-00000000000b') $$, '42501', null,
  'the owner cannot attach a token to another user''s device');
select throws_ok($$ insert into public.push_tokens (token, user_id) values ('not hex', auth.uid()) $$,
  '23514', null, 'a token that is not hex is refused');
select tests.authenticate_as('bob');
select throws_ok($$ insert into public.push_tokens (token, user_id)
  values (repeat('b2', 32), tests.get_supabase_uid('ada')) $$, '42501', null,
  'another user cannot add a token for the owner');
select tests.authenticate_as_agent('ada');
select throws_ok($$ insert into public.push_tokens (token, user_id) values (repeat('a4', 32), auth.uid()) $$,
  '42501', null, 'an agent token cannot add push tokens');
select tests.clear_authentication();
select throws_ok($$ insert into public.push_tokens (token, user_id)
  values (repeat('a5', 32), tests.get_supabase_uid('ada')) $$, '42501', null, 'anon cannot add push tokens');

-- update
select tests.authenticate_as('ada');
select results_eq($$ update public.push_tokens set environment = 'sandbox'
  where token = repeat('a1', 32) returning environment $$, array['sandbox'],
  'the owner updates their push token');
select tests.authenticate_as('bob');
select is_empty($$ update public.push_tokens set environment = 'production'
  where token = repeat('a1', 32) returning 1 $$, 'another user cannot update the owner''s token');
select tests.authenticate_as_agent('ada');
select is_empty($$ update public.push_tokens set environment = 'production' returning 1 $$,
  'an agent token cannot update push tokens');
select tests.clear_authentication();
select throws_ok($$ update public.push_tokens set environment = 'production' $$, '42501', null,
  'anon cannot update push tokens');

-- delete
select tests.authenticate_as('bob');
select is_empty($$ delete from public.push_tokens where token = repeat('a1', 32) returning 1 $$,
  'another user cannot delete the owner''s token');
select tests.authenticate_as_agent('ada');
select is_empty($$ delete from public.push_tokens returning 1 $$, 'an agent token cannot delete push tokens');
select tests.clear_authentication();
select throws_ok($$ delete from public.push_tokens $$, '42501', null, 'anon cannot delete push tokens');
select tests.authenticate_as('ada');
select results_eq($$ with d as (delete from public.push_tokens where token = repeat('a1', 32) returning 1)
  select count(*)::int from d $$, array[1], 'the owner deletes their push token (sign-out)');

-- a removed device's tokens stay but are never pushed to (see 24-relay-push-sharing)
reset role;
select is((select count(*)::int from public.push_tokens where user_id = tests.get_supabase_uid('bob')), 1,
  'the other user''s token survived every attempt');
select throws_ok($$ insert into public.push_tokens (token, user_id)
  select md5(i::text) || md5((i + 1000)::text), tests.get_supabase_uid('bob') from generate_series(1, 10) i $$,
  '54000', null, 'a user may hold at most 10 push tokens');

select * from finish();
rollback;
