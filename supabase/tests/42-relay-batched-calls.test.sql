-- Batched calls (docs/architecture.md, "One instance"): relay.open_requests and relay.settle_many take several elements
-- in one call, answer each in the elements' order, and never fail as a whole because of
-- one element (docs/security.md, "One account never degrades another").
begin;
select plan(21);

select tests.create_supabase_user('ada', 'ada@example.com', 'Ada');
select tests.create_supabase_user('bob', 'bob@example.com', 'Bob');
create temp table ids (k text primary key, v uuid);
insert into ids values ('ada', tests.get_supabase_uid('ada')), ('bob', tests.get_supabase_uid('bob'));
grant select on ids to public;

-- One open_requests element: ada's or bob's, for 5 minutes, with a valid key unless told.
create function pg_temp.req(p_id text, p_owner text, p_key text default repeat('A', 43) || '=', p_max int default 5)
returns jsonb language sql as $$
  select jsonb_build_object('id', p_id, 'owner', (select v from ids where k = p_owner), 'client_id', 'claude',
    'client_name', 'Claude', 'reply_key', p_key, 'expires_at', extract(epoch from now() + interval '5 minutes'),
    'max_waiting', p_max)
$$;
grant execute on all functions in schema pg_temp to public;

select tests.authenticate_as_relay();
select relay.register_instance('relay-batch');
select tests.device_hello('relay-batch', '00000000-0000-4000-8000-00000000a0c1', (select v from ids where k = 'ada'),
  tests.get_session_id('ada'), '00000000-0000-4000-8000-00000000a0d1', 'Ada phone', 'ios', '1', now());

-- ------------------------------------------------------------ open_requests
create temp table opened as select relay.open_requests('relay-batch', jsonb_build_array(
  pg_temp.req('00000000-0000-4000-8000-0000000000b1', 'ada'),
  pg_temp.req('00000000-0000-4000-8000-0000000000b2', 'bob', 'c2hvcnQ='),
  pg_temp.req('00000000-0000-4000-8000-0000000000b3', 'bob'),
  '"not an object"'::jsonb,
  pg_temp.req('00000000-0000-4000-8000-0000000000b5', 'ada', repeat('A', 43) || '=', 1),
  jsonb_build_object('id', '00000000-0000-4000-8000-0000000000b6', 'owner', '00000000-0000-4000-8000-00000000dead',
    'client_id', 'claude', 'reply_key', repeat('A', 43) || '=', 'expires_at', extract(epoch from now() + interval '1 minute')),
  jsonb_build_object('id', 'not-a-uuid', 'owner', (select v from ids where k = 'ada'))
)) as r;
select is((select jsonb_array_length(r) from opened), 7, 'a result per element');
select is((select r -> 0 ->> 'status' from opened), 'opened', 'an element opens');
select is((select (r -> 0 ->> 'connections')::int from opened), 1, 'with the owner''s sockets counted');
select is((select r -> 0 -> 'ping' ->> 'id' from opened), '00000000-0000-4000-8000-0000000000b1',
  'and the ping for the caller''s own sockets of the owner');
select is((select r -> 1 from opened), '{"status": "error", "code": "22023"}'::jsonb,
  'a bad reply key is refused alone, with open_request''s SQLSTATE');
select is((select r -> 2 ->> 'status' from opened), 'opened', 'an element after a refused one opens');
select is((select r -> 2 -> 'ping' from opened), 'null'::jsonb, 'no ping where the caller holds none of the owner''s sockets');
select is((select r -> 3 ->> 'code' from opened), '22023', 'an element that is not an object is refused alone');
select is((select r -> 4 ->> 'status' from opened), 'too_many', 'the cap counts what the same batch opened');
select is((select r -> 5 ->> 'code' from opened), 'P0002', 'an unknown owner is refused alone');
select is((select r -> 6 ->> 'code' from opened), '22P02', 'an id that is no uuid is refused alone');
reset role;
select is((select count(*)::int from relay.pending_requests where id in ('00000000-0000-4000-8000-0000000000b1',
  '00000000-0000-4000-8000-0000000000b3')), 2, 'the opened rows are there, the refused ones are not');
select is((select count(*)::int from relay.pending_requests), 2, 'and nothing else');

select tests.authenticate_as_relay();
select is(relay.open_requests('relay-batch', jsonb_build_array(
  pg_temp.req('00000000-0000-4000-8000-0000000000c1', 'ada'),
  pg_temp.req('00000000-0000-4000-8000-0000000000c2', 'ada') || jsonb_build_object('requester', (select v from ids where k = 'bob'))
)) -> 1, '{"status": "error", "code": "0A000"}'::jsonb,
  'a request on someone else''s behalf is never batched (its second lock has no order with the owners'')');
select is(relay.open_requests('relay-batch', jsonb_build_array(
  pg_temp.req('00000000-0000-4000-8000-0000000000c3', 'ada') || jsonb_build_object('requester', (select v from ids where k = 'bob'))
)) -> 0 ->> 'code', '42501', 'alone it goes to open_request, which checks the share');
select throws_ok($$ select relay.open_requests('relay-batch', '[]') $$, '22023', null, 'an empty batch is refused');
select throws_ok($$ select relay.open_requests('relay-batch', (select jsonb_agg(pg_temp.req(gen_random_uuid()::text, 'ada'))
  from generate_series(1, 33))) $$, '22023', null, 'so is one of more than 32 elements');

-- ------------------------------------------------------------ settle_many
select is(relay.settle_many('relay-batch', jsonb_build_array(
  jsonb_build_object('id', '00000000-0000-4000-8000-0000000000b3', 'user', (select v from ids where k = 'bob'),
    'outcome', 'denied', 'reason', 'user'),
  jsonb_build_object('id', '00000000-0000-4000-8000-0000000000b1', 'user', (select v from ids where k = 'ada'),
    'device', '00000000-0000-4000-8000-00000000a0d1', 'outcome', 'denied', 'reason', 'maybe'),
  jsonb_build_object('id', '00000000-0000-4000-8000-0000000000b1', 'user', (select v from ids where k = 'bob'),
    'outcome', 'denied', 'reason', 'user'),
  jsonb_build_object('id', '00000000-0000-4000-8000-0000000000ff', 'user', (select v from ids where k = 'ada'),
    'outcome', 'denied', 'reason', 'user'),
  jsonb_build_object('id', '00000000-0000-4000-8000-0000000000b3', 'user', (select v from ids where k = 'bob'),
    'outcome', 'unavailable', 'reason', 'no_fix')
)), '[{"status": "settled"}, {"status": "error", "code": "22023"}, {"status": "forbidden"}, {"status": "gone"},
      {"status": "gone"}]'::jsonb,
  'settle_many: a status per answer, in order; a refused one alone; the first answer wins within a batch too');
reset role;
select is((select outcome || '/' || reason from relay.pending_requests where id = '00000000-0000-4000-8000-0000000000b3'),
  'denied/user', 'the settled row has the first answer');
select is((select settled_at from relay.pending_requests where id = '00000000-0000-4000-8000-0000000000b1'), null,
  'the refused and forbidden answers changed nothing');

select is((select array_agg(p.proname::text || ': ' || array_to_string(p.proconfig, ', ') order by p.proname)
  from pg_proc p where p.oid in ('relay.open_requests(text, jsonb)'::regprocedure, 'relay.settle_many(text, jsonb, int)'::regprocedure)),
  array['open_requests: search_path="", lock_timeout=50ms', 'settle_many: search_path="", lock_timeout=50ms, plan_cache_mode=force_generic_plan'],
  'no element waits long for a lock (past 50 ms it is refused alone with 55P03 and made alone)');

select * from finish();
rollback;
