-- web_push_subscriptions: only the owner's own session reads and writes them. Writes through
-- the API must name a known push service (the rows set up here as postgres need not).
begin;
select plan(20);

select tests.create_supabase_user('ada');
select tests.create_supabase_user('bob');
create temp table keys as select repeat('B', 87) as p256dh, repeat('A', 22) as auth;
grant select on keys to public;
insert into public.devices (id, user_id, platform) values
  ('00000000-0000-4000-8000-00000000000a', tests.get_supabase_uid('ada'), 'web'),
  ('00000000-0000-4000-8000-00000000000b', tests.get_supabase_uid('bob'), 'web');
insert into public.web_push_subscriptions (endpoint, p256dh, auth, user_id, device_id)
select 'https://push.example/ada', p256dh, auth, tests.get_supabase_uid('ada'), '00000000-0000-4000-8000-00000000000a'::uuid from keys
union all
select 'https://push.example/bob', p256dh, auth, tests.get_supabase_uid('bob'), '00000000-0000-4000-8000-00000000000b'::uuid from keys;

-- select
select tests.authenticate_as('ada');
select results_eq($$ select endpoint from public.web_push_subscriptions $$, array['https://push.example/ada'],
  'the owner reads their own subscriptions');
select tests.authenticate_as('bob');
select results_eq($$ select endpoint from public.web_push_subscriptions $$, array['https://push.example/bob'],
  'another user reads only their own subscriptions');
select tests.authenticate_as_agent('ada');
select is_empty($$ select * from public.web_push_subscriptions $$, 'an agent token reads no subscriptions');
select tests.clear_authentication();
select throws_ok($$ select * from public.web_push_subscriptions $$, '42501', null, 'anon cannot read subscriptions');

-- insert
select tests.authenticate_as('ada');
select lives_ok($$ insert into public.web_push_subscriptions (endpoint, p256dh, auth, user_id, device_id)
  select 'https://fcm.googleapis.com/fcm/send/ada2', p256dh, auth, auth.uid(), '00000000-0000-4000-8000-00000000000a' from keys $$,
  'the owner adds a subscription');
select throws_ok($$ insert into public.web_push_subscriptions (endpoint, p256dh, auth, user_id)
  select 'http://push.example/plain', p256dh, auth, auth.uid() from keys $$, '23514', null,
  'an endpoint that is not https is refused');
select throws_ok($$ insert into public.web_push_subscriptions (endpoint, p256dh, auth, user_id, device_id)
  select 'https://fcm.googleapis.com/fcm/send/x', p256dh, auth, auth.uid(), '00000000-0000-4000-8000-00000000000b' from keys $$,
  '42501', null, 'the owner cannot attach a subscription to another user''s device');
select tests.authenticate_as('bob');
select throws_ok($$ insert into public.web_push_subscriptions (endpoint, p256dh, auth, user_id)
  select 'https://fcm.googleapis.com/fcm/send/planted', p256dh, auth, tests.get_supabase_uid('ada') from keys $$,
  '42501', null, 'another user cannot add a subscription for the owner');
select tests.authenticate_as_agent('ada');
select throws_ok($$ insert into public.web_push_subscriptions (endpoint, p256dh, auth, user_id)
  select 'https://fcm.googleapis.com/fcm/send/agent', p256dh, auth, auth.uid() from keys $$,
  '42501', null, 'an agent token cannot add subscriptions');
select tests.clear_authentication();
select throws_ok($$ insert into public.web_push_subscriptions (endpoint, p256dh, auth, user_id)
  values ('https://fcm.googleapis.com/fcm/send/anon', repeat('B', 87), repeat('A', 22), tests.get_supabase_uid('ada')) $$,
  '42501', null, 'anon cannot add subscriptions');

-- update
select tests.authenticate_as('ada');
select results_eq($$ update public.web_push_subscriptions set auth = repeat('C', 22)
  where endpoint = 'https://push.example/ada' returning auth $$, array[repeat('C', 22)],
  'the owner updates their subscription');
select tests.authenticate_as('bob');
select is_empty($$ update public.web_push_subscriptions set auth = repeat('D', 22)
  where endpoint = 'https://push.example/ada' returning 1 $$, 'another user cannot update the owner''s subscription');
select tests.authenticate_as_agent('ada');
select is_empty($$ update public.web_push_subscriptions set auth = repeat('D', 22) returning 1 $$,
  'an agent token cannot update subscriptions');
select tests.clear_authentication();
select throws_ok($$ update public.web_push_subscriptions set auth = repeat('D', 22) $$, '42501', null,
  'anon cannot update subscriptions');

-- delete
select tests.authenticate_as('bob');
select is_empty($$ delete from public.web_push_subscriptions where endpoint = 'https://push.example/ada' returning 1 $$,
  'another user cannot delete the owner''s subscription');
select tests.authenticate_as_agent('ada');
select is_empty($$ delete from public.web_push_subscriptions returning 1 $$, 'an agent token cannot delete subscriptions');
select tests.clear_authentication();
select throws_ok($$ delete from public.web_push_subscriptions $$, '42501', null, 'anon cannot delete subscriptions');
select tests.authenticate_as('ada');
select results_eq($$ with d as (delete from public.web_push_subscriptions
  where endpoint = 'https://push.example/ada' returning 1) select count(*)::int from d $$, array[1],
  'the owner deletes their subscription');

reset role;
select is((select auth from public.web_push_subscriptions where endpoint = 'https://push.example/bob'),
  repeat('A', 22), 'the other user''s subscription survived every attempt');
select throws_ok($$ insert into public.web_push_subscriptions (endpoint, p256dh, auth, user_id)
  select 'https://push.example/bob' || i, repeat('B', 87), repeat('A', 22), tests.get_supabase_uid('bob')
  from generate_series(1, 10) i $$, '54000', null, 'a user may hold at most 10 subscriptions');

select * from finish();
rollback;
