-- A banned or deleted user is refused on every path (docs/agents.md, "Credentials"), as
-- relay.agent_key_owner refuses them: relay.session_states says signed_out for their
-- Supabase sessions and their relay OAuth token families, a hello of theirs is revoked,
-- and the update that bans or deletes them records their sessions (the heartbeat's
-- relay.revoked_connections closes their sockets) and abandons the requests waiting for or
-- by them. A ban that has passed refuses nothing; other updates of a user change nothing.
begin;
select plan(21);

select tests.create_supabase_user('ada');
select tests.create_supabase_user('bob');
select tests.create_supabase_user('cyd');
insert into public.location_shares (owner_id, viewer_id) values (tests.get_supabase_uid('bob'), tests.get_supabase_uid('ada'));
insert into public.oauth_grants (id, user_id, client_id) values
  ('00000000-0000-4000-8000-0000000000f1', tests.get_supabase_uid('ada'), 'client-a');
insert into private.oauth_families (id, grant_id, resource, scope, expires_at) values
  ('00000000-0000-4000-8000-0000000000f2', '00000000-0000-4000-8000-0000000000f1', 'http://relay/mcp', 'location',
   now() + interval '1 hour');
create function pg_temp.states(p_who text) returns text[] language sql as $$
  select relay.session_states(array[tests.get_session_id(p_who), '00000000-0000-4000-8000-0000000000f2'::uuid],
                              array[tests.get_supabase_uid(p_who), tests.get_supabase_uid('ada')])
$$;
create function pg_temp.hello(p_who text, p_n int) returns text language sql as $$
  select tests.device_hello('relay-h', ('00000000-0000-4000-8000-0000000001' || lpad(p_n::text, 2, '0'))::uuid,
    tests.get_supabase_uid(p_who), tests.get_session_id(p_who),
    ('00000000-0000-4000-8000-0000000002' || lpad(p_n::text, 2, '0'))::uuid, 'Phone', 'ios', '1', clock_timestamp()) ->> 'status'
$$;
grant execute on all functions in schema pg_temp to public;
create temp table k (hash text);
insert into k select encode(sha256(convert_to(private.create_agent_key_for(tests.get_supabase_uid('ada'), 'nightly'), 'UTF8')), 'hex');
grant select on k to public;

select tests.authenticate_as_relay();
select relay.register_instance('relay-h');
select is(pg_temp.states('ada'), array['alive', 'alive'], 'ada''s session and token family are alive');
select is(pg_temp.hello('ada', 1), 'ok', 'her phone says hello');
select is(pg_temp.hello('cyd', 2), 'ok', 'and so does cyd''s');
select isnt_empty($$ select * from relay.agent_key_owner((select hash from k)) $$, 'her agent key works');
select is_empty($$ select relay.revoked_connections('relay-h') $$, 'the heartbeat''s first check closes nothing');
-- A request for ada's phones, and one of her agent's for bob's.
select relay.open_request('00000000-0000-4000-8000-0000000000e1', tests.get_supabase_uid('ada'), null, 'agent-x', 'X',
  'relay-h', decode(repeat('ab', 32), 'hex'), now() + interval '60 seconds');
select relay.open_request('00000000-0000-4000-8000-0000000000e2', tests.get_supabase_uid('bob'), tests.get_supabase_uid('ada'),
  'client-a', 'A', 'relay-h', decode(repeat('ab', 32), 'hex'), now() + interval '60 seconds');
reset role;

-- ------------------------------------------------------------ a ban
update auth.users set banned_until = now() + interval '1 day' where id = tests.get_supabase_uid('ada');
select is((select count(*)::int from private.revocations where session_id = tests.get_session_id('ada')), 1,
  'the ban records her session as revoked');
select results_eq($$ select outcome from relay.pending_requests order by id $$, array['abandoned', 'abandoned'],
  'the requests waiting for her and by her agent are abandoned');
select tests.authenticate_as_relay();
select is(pg_temp.states('ada'), array['signed_out', 'signed_out'],
  'her session and her token family are signed out');
select is(pg_temp.states('cyd'), array['alive', 'signed_out'], 'cyd''s session is alive (the family is ada''s)');
select results_eq($$ select relay.revoked_connections('relay-h') $$,
  array['00000000-0000-4000-8000-000000000101'::uuid], 'the heartbeat closes her socket and only hers');
select is(pg_temp.hello('ada', 3), 'revoked', 'a new hello of hers is revoked');
select is_empty($$ select * from relay.agent_key_owner((select hash from k)) $$, 'her agent key is refused (as it was)');
reset role;
update auth.users set last_sign_in_at = now() where id = tests.get_supabase_uid('ada');
select is((select count(*)::int from private.revocations where session_id = tests.get_session_id('ada')), 1,
  'another update of a banned user records nothing again');

-- ------------------------------------------------------------ a ban that has passed
update auth.users set banned_until = now() - interval '1 second' where id = tests.get_supabase_uid('ada');
select tests.authenticate_as_relay();
select is(pg_temp.states('ada'), array['alive', 'alive'], 'a ban that has passed refuses nothing');
select is(pg_temp.hello('ada', 4), 'ok', 'she says hello again');
reset role;
update auth.users set last_sign_in_at = now() where id = tests.get_supabase_uid('ada');
select is((select count(*)::int from private.revocations where session_id = tests.get_session_id('ada')), 1,
  'an update of a user who may sign in records nothing');

-- ------------------------------------------------------------ a soft deletion
update auth.users set deleted_at = now() where id = tests.get_supabase_uid('ada');
select is((select count(*)::int from private.revocations where session_id = tests.get_session_id('ada')), 2,
  'deleting her records her session again');
select tests.authenticate_as_relay();
select is(pg_temp.states('ada'), array['signed_out', 'signed_out'], 'a deleted user''s sessions are signed out');
select results_eq($$ select relay.revoked_connections('relay-h') $$,
  array['00000000-0000-4000-8000-000000000104'::uuid], 'the heartbeat closes her socket');
select is(pg_temp.hello('ada', 5), 'revoked', 'and she cannot say hello');
reset role;
select is((select count(*)::int from relay.connections where user_id = tests.get_supabase_uid('cyd')), 1,
  'cyd''s socket stays');

select * from finish();
rollback;
