-- always_allowed_agents: the user and their agents read the list; only the user's own
-- session writes it; generic client ids are refused.
begin;
select plan(24);

select tests.create_supabase_user('ada');
select tests.create_supabase_user('bob');
insert into public.always_allowed_agents (user_id, client_id, client_name) values
  (tests.get_supabase_uid('ada'), '11111111-1111-4111-8111-111111111111', 'Claude'),
  (tests.get_supabase_uid('bob'), '22222222-2222-4222-8222-222222222222', 'Bob''s bot');

-- select
select tests.authenticate_as('ada');
select results_eq($$ select client_name from public.always_allowed_agents $$, array['Claude'],
  'the owner reads their always-allowed agents');
select tests.authenticate_as_agent('ada');
select results_eq($$ select client_name from public.always_allowed_agents $$, array['Claude'],
  'the owner''s agent reads its user''s list');
select tests.authenticate_as('bob');
select results_eq($$ select client_name from public.always_allowed_agents $$, array['Bob''s bot'],
  'another user reads only their own list');
select tests.clear_authentication();
select throws_ok($$ select * from public.always_allowed_agents $$, '42501', null, 'anon cannot read the list');

-- insert
select tests.authenticate_as('ada');
select lives_ok($$ insert into public.always_allowed_agents (user_id, client_id, client_name)
  values (auth.uid(), '33333333-3333-4333-8333-333333333333', 'Cursor') $$,
  'the owner always-allows an agent from their own session');
select lives_ok($$ insert into public.always_allowed_agents (user_id, client_id, client_name, requester_id)
  values (auth.uid(), '33333333-3333-4333-8333-333333333333', 'Cursor', tests.get_supabase_uid('bob')) $$,
  'the owner always-allows another person''s agent separately');
select throws_ok($$ insert into public.always_allowed_agents (user_id, client_id)
  values (auth.uid(), '33333333-3333-4333-8333-333333333333') $$, '23505', null,
  'the same agent is always-allowed once');
select throws_ok($$ insert into public.always_allowed_agents (user_id, client_id) values (auth.uid(), 'unknown') $$,
  '23514', null, 'the generic client id unknown is refused');
select throws_ok($$ insert into public.always_allowed_agents (user_id, client_id) values (auth.uid(), 'agent-key') $$,
  '23514', null, 'the generic client id agent-key is refused');
select throws_ok($$ insert into public.always_allowed_agents (user_id, client_id, requester_id)
  values (auth.uid(), '44444444-4444-4444-8444-444444444444', auth.uid()) $$,
  '23514', null, 'the requester is someone else than the user');
select tests.authenticate_as_agent('ada', '55555555-5555-4555-8555-555555555555');
select throws_ok($$ insert into public.always_allowed_agents (user_id, client_id)
  values (auth.uid(), '55555555-5555-4555-8555-555555555555') $$, '42501', null,
  'an agent token cannot always-allow itself');
select tests.authenticate_as('bob');
select throws_ok($$ insert into public.always_allowed_agents (user_id, client_id)
  values (tests.get_supabase_uid('ada'), '66666666-6666-4666-8666-666666666666') $$, '42501', null,
  'another user cannot always-allow an agent for the owner');
select tests.clear_authentication();
select throws_ok($$ insert into public.always_allowed_agents (user_id, client_id)
  values (tests.get_supabase_uid('ada'), '77777777-7777-4777-8777-777777777777') $$, '42501', null,
  'anon cannot always-allow agents');

-- update
select tests.authenticate_as_agent('ada');
select is_empty($$ update public.always_allowed_agents set client_name = 'hijack' returning 1 $$,
  'an agent token cannot change the list');
select tests.authenticate_as('bob');
select is_empty($$ update public.always_allowed_agents set client_name = 'hijack'
  where user_id = tests.get_supabase_uid('ada') returning 1 $$, 'another user cannot change the owner''s list');
select tests.clear_authentication();
select throws_ok($$ update public.always_allowed_agents set client_name = 'anon' $$, '42501', null,
  'anon cannot change the list');
select tests.authenticate_as('ada');
select throws_ok($$ update public.always_allowed_agents set user_id = tests.get_supabase_uid('bob') $$,
  '42501', null, 'the owner cannot move an entry to another user');
select results_eq($$ update public.always_allowed_agents set client_name = 'Claude Desktop'
  where client_id = '11111111-1111-4111-8111-111111111111' returning client_name $$, array['Claude Desktop'],
  'the owner renames an entry');

-- delete
select tests.authenticate_as_agent('ada');
select is_empty($$ delete from public.always_allowed_agents returning 1 $$, 'an agent token cannot remove entries');
select tests.authenticate_as('bob');
select is_empty($$ delete from public.always_allowed_agents where user_id = tests.get_supabase_uid('ada') returning 1 $$,
  'another user cannot remove the owner''s entries');
select tests.clear_authentication();
select throws_ok($$ delete from public.always_allowed_agents $$, '42501', null, 'anon cannot remove entries');
select tests.authenticate_as('ada');
select results_eq($$ with d as (delete from public.always_allowed_agents
  where client_id = '11111111-1111-4111-8111-111111111111' returning 1) select count(*)::int from d $$,
  array[1], 'the owner removes an entry');

reset role;
select is((select count(*)::int from public.always_allowed_agents where user_id = tests.get_supabase_uid('ada')), 2,
  'the owner keeps exactly the entries they added');
select is((select client_name from public.always_allowed_agents where user_id = tests.get_supabase_uid('bob')),
  'Bob''s bot', 'the other user''s entry is unchanged');

select * from finish();
rollback;
