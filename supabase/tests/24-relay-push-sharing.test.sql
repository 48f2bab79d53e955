-- relay.is_always_allowed, push targets and dropping them, resolve_person, people_sharing_with.
begin;
select plan(20);

select tests.create_supabase_user('ada', 'ada@test.example', 'Ada Lovelace');
select tests.create_supabase_user('bob', 'bob@test.example', 'Bob');
select tests.create_supabase_user('al1', 'al@one.example', 'Al');
select tests.create_supabase_user('al2', 'al@two.example', 'al');
select tests.create_supabase_user('gone', 'gone@test.example', 'Gone');
insert into public.location_shares (owner_id, viewer_id) select tests.get_supabase_uid(o), tests.get_supabase_uid('bob')
  from unnest(array['ada', 'al1', 'al2']) o;
insert into public.location_shares (owner_id, viewer_id, revoked_at)
  values (tests.get_supabase_uid('gone'), tests.get_supabase_uid('bob'), now());
insert into public.always_allowed_agents (user_id, client_id, requester_id) values
  (tests.get_supabase_uid('ada'), '11111111-1111-4111-8111-111111111111', null),
  (tests.get_supabase_uid('ada'), '22222222-2222-4222-8222-222222222222', tests.get_supabase_uid('bob'));
insert into public.devices (id, user_id, platform, revoked_at) values
  ('00000000-0000-4000-8000-00000000000a', tests.get_supabase_uid('ada'), 'ios', null),
  ('00000000-0000-4000-8000-0000000000a9', tests.get_supabase_uid('ada'), 'ios', now());
insert into public.push_tokens (token, user_id, device_id, environment) values
  (repeat('a1', 32), tests.get_supabase_uid('ada'), '00000000-0000-4000-8000-00000000000a', 'sandbox'),
  (repeat('a9', 32), tests.get_supabase_uid('ada'), '00000000-0000-4000-8000-0000000000a9', 'production'),
  (repeat('b1', 32), tests.get_supabase_uid('bob'), null, 'production');
insert into public.web_push_subscriptions (endpoint, p256dh, auth, user_id) values
  ('https://push.example/ada', repeat('B', 87), repeat('A', 22), tests.get_supabase_uid('ada'));

select tests.authenticate_as_relay();
select is(relay.is_always_allowed(tests.get_supabase_uid('ada'), '11111111-1111-4111-8111-111111111111', null), true,
  'the owner''s own agent is always allowed');
select is(relay.is_always_allowed(tests.get_supabase_uid('ada'), '11111111-1111-4111-8111-111111111111',
  tests.get_supabase_uid('ada')), true, 'a requester equal to the owner counts as the owner''s own agent');
select is(relay.is_always_allowed(tests.get_supabase_uid('ada'), '11111111-1111-4111-8111-111111111111',
  tests.get_supabase_uid('bob')), false, 'always-allow for the owner''s agent does not extend to Bob''s requests');
select is(relay.is_always_allowed(tests.get_supabase_uid('ada'), '22222222-2222-4222-8222-222222222222',
  tests.get_supabase_uid('bob')), true, 'always-allow is per owner, agent and requester');
select is(relay.is_always_allowed(tests.get_supabase_uid('ada'), 'agent-key', null), false, 'agent keys are never always allowed');
select throws_ok($$ select relay.is_always_allowed(null, 'x', null) $$, '22004', null, 'is_always_allowed refuses a null owner');

select results_eq($$ select token, environment from relay.apns_tokens(tests.get_supabase_uid('ada')) $$,
  $$ values (repeat('a1', 32), 'sandbox') $$, 'apns_tokens lists the owner''s tokens, none of removed devices');
select results_eq($$ select endpoint from relay.web_push_subscriptions(tests.get_supabase_uid('ada')) $$,
  array['https://push.example/ada'], 'web_push_subscriptions lists the owner''s subscriptions');
select throws_ok($$ select * from relay.apns_tokens(null) $$, '22004', null, 'apns_tokens refuses null');
select throws_ok($$ select * from relay.web_push_subscriptions(null) $$, '22004', null, 'web_push_subscriptions refuses null');
select is(relay.drop_apns_token(repeat('a1', 32)), true, 'drop_apns_token deletes a dead token');
select is(relay.drop_apns_token(repeat('a1', 32)), false, 'dropping it again reports it gone');
select is(relay.drop_web_push_subscription('https://push.example/ada'), true, 'drop_web_push_subscription deletes a dead one');
select throws_ok($$ select relay.drop_apns_token(null) $$, '22004', null, 'drop_apns_token refuses null');
select throws_ok($$ select relay.drop_web_push_subscription(null) $$, '22004', null, 'drop_web_push_subscription refuses null');

select results_eq($$ select name, email from relay.people_sharing_with(tests.get_supabase_uid('bob')) $$,
  $$ values ('Ada Lovelace', 'ada@test.example'), ('Al', 'al@one.example'), ('al', 'al@two.example') $$,
  'people_sharing_with lists active shares by name, without revoked ones');
select results_eq($$ select email from relay.resolve_person(tests.get_supabase_uid('bob'), ' ADA@test.example ') $$,
  array['ada@test.example'], 'resolve_person matches an email, any case');
select results_eq($$ select email from relay.resolve_person(tests.get_supabase_uid('bob'), 'AL') order by email $$,
  array['al@one.example', 'al@two.example'], 'resolve_person returns every owner whose name matches');
select is_empty($$ select * from relay.resolve_person(tests.get_supabase_uid('bob'), 'Gone') $$,
  'resolve_person ignores revoked shares');
select throws_ok($$ select * from relay.resolve_person(tests.get_supabase_uid('bob'), '  ') $$, '22023', null,
  'resolve_person refuses a blank person');

reset role;
select * from finish();
rollback;
