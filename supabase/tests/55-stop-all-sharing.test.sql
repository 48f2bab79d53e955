-- Stop all sharing (docs/protocol.md, "Stop all sharing"): relay.stop_all_sharing ends, in one call,
-- every always-allow, share, invitation, agent key and agent connected through the relay's
-- own sign-in (its OAuth grant) of the person, answers their waiting requests as declined,
-- says how many of each ended, and leaves others' grants alone.
begin;
select plan(14);

select tests.create_supabase_user('ada');
select tests.create_supabase_user('bob');
insert into public.location_shares (owner_id, viewer_id)
values (tests.get_supabase_uid('ada'), tests.get_supabase_uid('bob')),
       (tests.get_supabase_uid('bob'), tests.get_supabase_uid('ada'));
insert into public.location_shares (owner_id, viewer_email) values (tests.get_supabase_uid('ada'), 'carol@test.example');
insert into public.always_allowed_agents (user_id, client_id) values
  (tests.get_supabase_uid('ada'), 'agent-a'), (tests.get_supabase_uid('ada'), 'agent-b'),
  (tests.get_supabase_uid('bob'), 'agent-a');
select private.create_agent_key_for(tests.get_supabase_uid('ada'), 'one');
select private.create_agent_key_for(tests.get_supabase_uid('ada'), 'two');
select private.create_agent_key_for(tests.get_supabase_uid('bob'), 'bob''s');
insert into public.oauth_grants (user_id, client_id, client_name) values
  (tests.get_supabase_uid('ada'), 'wbc_' || repeat('a', 32), 'A'),
  (tests.get_supabase_uid('bob'), 'wbc_' || repeat('a', 32), 'A');

select tests.authenticate_as_relay();
select relay.register_instance('relay-s');
select relay.open_request('00000000-0000-4000-8000-0000000000c1', tests.get_supabase_uid('ada'), null, 'agent-a', 'A',
  'relay-s', decode(repeat('ab', 32), 'hex'), now() + interval '60 seconds');
select relay.open_request('00000000-0000-4000-8000-0000000000c2', tests.get_supabase_uid('ada'), tests.get_supabase_uid('bob'),
  'agent-b', 'B', 'relay-s', decode(repeat('ab', 32), 'hex'), now() + interval '60 seconds');
select relay.open_request('00000000-0000-4000-8000-0000000000c3', tests.get_supabase_uid('bob'), null, 'agent-a', 'A',
  'relay-s', decode(repeat('ab', 32), 'hex'), now() + interval '60 seconds');

select is(relay.stop_all_sharing(tests.get_supabase_uid('ada')),
  '{"always_allowed": 2, "shares": 2, "agent_keys": 2, "agents": 1, "requests": 2}'::jsonb,
  'it says what ended: two always-allows, a share and an invitation, two keys, a connected agent, two waiting requests');
select is(relay.stop_all_sharing(tests.get_supabase_uid('ada')),
  '{"always_allowed": 0, "shares": 0, "agent_keys": 0, "agents": 0, "requests": 0}'::jsonb,
  'a second time nothing is left to end');
select throws_ok($$ select relay.stop_all_sharing(null) $$, '22004', null, 'it needs a user');
reset role;

select is((select count(*)::int from public.always_allowed_agents where user_id = tests.get_supabase_uid('ada')), 0,
  'no always-allow of hers is left');
select is((select count(*)::int from public.location_shares where owner_id = tests.get_supabase_uid('ada') and revoked_at is null), 0,
  'no share or invitation of hers is active');
select is((select count(*)::int from public.agent_keys where user_id = tests.get_supabase_uid('ada') and revoked_at is null), 0,
  'no key of hers works');
select is((select count(*)::int from public.oauth_grants where user_id = tests.get_supabase_uid('ada')), 0,
  'no agent she connected stays connected');
select is((select array_agg(outcome || '/' || reason order by id) from relay.pending_requests
           where owner_id = tests.get_supabase_uid('ada')), array['denied/user', 'denied/user'],
  'her waiting requests were answered as declined (their agents get 403 with the denied text)');
select is((select count(*)::int from public.always_allowed_agents where user_id = tests.get_supabase_uid('bob')), 1,
  'bob''s always-allow is his');
select is((select count(*)::int from public.location_shares where owner_id = tests.get_supabase_uid('bob') and revoked_at is null), 1,
  'as is the share bob gives her');
select is((select count(*)::int from public.agent_keys where user_id = tests.get_supabase_uid('bob') and revoked_at is null), 1,
  'and his key');
select is((select count(*)::int from public.oauth_grants where user_id = tests.get_supabase_uid('bob')), 1,
  'and the agent he connected');
select is((select settled_at from relay.pending_requests where id = '00000000-0000-4000-8000-0000000000c3'), null,
  'and his waiting request');

select tests.authenticate_as('ada');
select throws_ok($$ select relay.stop_all_sharing(tests.get_supabase_uid('ada')) $$, '42501', null,
  'only the relay calls it (for the person''s own phone socket)');

select * from finish();
rollback;
