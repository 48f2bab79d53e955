-- A removed permission is removed everywhere (docs/security.md, "Under floods"): when an OAuth client's
-- last session of a user goes (its grant was revoked) or an agent key is revoked, the
-- requests it opened and that still wait are abandoned at once (their phones get cancel).
begin;
select plan(7);

select tests.create_supabase_user('ada');
select tests.create_oauth_client('00000000-0000-4000-8000-00000000c11e', 'Claude');
select tests.create_oauth_client('00000000-0000-4000-8000-00000000c22e', 'Other');
insert into auth.sessions (id, user_id, created_at, oauth_client_id) values
  ('00000000-0000-4000-8000-0000000005e1', tests.get_supabase_uid('ada'), now(), '00000000-0000-4000-8000-00000000c11e'),
  ('00000000-0000-4000-8000-0000000005e2', tests.get_supabase_uid('ada'), now(), '00000000-0000-4000-8000-00000000c11e'),
  ('00000000-0000-4000-8000-0000000005e3', tests.get_supabase_uid('ada'), now(), '00000000-0000-4000-8000-00000000c22e');
insert into public.agent_keys (id, user_id, name, key_hash, key_prefix)
values ('00000000-0000-4000-8000-00000000ce01', tests.get_supabase_uid('ada'), 'laptop', repeat('a', 64), 'wb_aaaaaaaa');

create function pg_temp.open(p_id uuid, p_client text, p_key uuid default null) returns text language sql as $$
  select relay.open_durable_request(p_id, tests.get_supabase_uid('ada'), null, p_client, null, p_key, 'relay-a',
    decode(repeat('ab', 32), 'hex'), now() + interval '300 seconds', now() + interval '310 seconds', true, null)->>'status'
$$;
create function pg_temp.outcome(p_id uuid) returns text language sql as $$
  select coalesce(outcome, 'waiting') from relay.pending_requests where id = p_id
$$;

select pg_temp.open('00000000-0000-4000-8000-0000000000f1', '00000000-0000-4000-8000-00000000c11e');
select pg_temp.open('00000000-0000-4000-8000-0000000000f2', '00000000-0000-4000-8000-00000000c22e');
select pg_temp.open('00000000-0000-4000-8000-0000000000f3', 'agent-key', '00000000-0000-4000-8000-00000000ce01');

delete from auth.sessions where id = '00000000-0000-4000-8000-0000000005e1';
select is(pg_temp.outcome('00000000-0000-4000-8000-0000000000f1'), 'waiting',
  'a session of the client goes, another of the same grant stays: the request waits');
delete from auth.sessions where id = '00000000-0000-4000-8000-0000000005e2';
select is(pg_temp.outcome('00000000-0000-4000-8000-0000000000f1'), 'abandoned',
  'the grant''s last session goes (revoked): its request is abandoned');
select is(pg_temp.outcome('00000000-0000-4000-8000-0000000000f2'), 'waiting', 'another client''s request waits on');
select is(pg_temp.outcome('00000000-0000-4000-8000-0000000000f3'), 'waiting', 'and so does the agent key''s');

update public.agent_keys set revoked_at = now() where id = '00000000-0000-4000-8000-00000000ce01';
select is(pg_temp.outcome('00000000-0000-4000-8000-0000000000f3'), 'abandoned', 'a revoked agent key''s request is abandoned');
select is(pg_temp.outcome('00000000-0000-4000-8000-0000000000f2'), 'waiting', 'the other client''s still waits');

select ok(not exists (select from pg_trigger where tgrelid = 'auth.sessions'::regclass and tgname = 'sessions_cancel_revoked_client_requests'
                      and tgqual is not null),
  'the trigger on auth.sessions names no column of it (Auth''s own migrations stay free to alter them)');

select * from finish();
rollback;
