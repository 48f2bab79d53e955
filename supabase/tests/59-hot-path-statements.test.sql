-- Fewer statements on a locate's path (docs/benchmarks.md): a batch runs in one subtransaction and,
-- only when an element fails, each element again in one of its own — the good elements
-- are made once, the bad one is refused alone; the hot functions plan once per session.
begin;
select plan(7);

select tests.create_supabase_user('ada');
select tests.create_supabase_user('bob');
insert into public.devices (id, user_id, platform) values ('00000000-0000-4000-8000-00000000000a', tests.get_supabase_uid('ada'), 'ios');
create function pg_temp.element(p_id uuid, p_owner uuid) returns jsonb language sql as $$
  select jsonb_build_object('id', p_id, 'owner', p_owner, 'client_id', 'agent',
    'reply_key', encode(decode(repeat('ab', 32), 'hex'), 'base64'), 'expires_at', extract(epoch from now() + interval '1 minute'))
$$;
grant execute on all functions in schema pg_temp to public;

select tests.authenticate_as_relay();
select relay.register_instance('relay-h');
create temp table result (v jsonb);
grant all on result to public;
insert into result select relay.open_requests('relay-h', jsonb_build_array(
  pg_temp.element('00000000-0000-4000-8000-0000000000f1', tests.get_supabase_uid('ada')),
  pg_temp.element('00000000-0000-4000-8000-0000000000f2', gen_random_uuid()),
  pg_temp.element('00000000-0000-4000-8000-0000000000f3', tests.get_supabase_uid('bob'))));
select is((select array_agg(e ->> 'status' order by n) from result, jsonb_array_elements(v) with ordinality x(e, n)),
  array['opened', 'error', 'opened'], 'a batch with an unknown owner in the middle opens the others');
select is((select v -> 1 ->> 'code' from result), 'P0002', 'the bad element carries its own SQLSTATE');
reset role;
select is((select count(*)::int from relay.pending_requests where id in
  ('00000000-0000-4000-8000-0000000000f1', '00000000-0000-4000-8000-0000000000f2', '00000000-0000-4000-8000-0000000000f3')), 2,
  'the good elements are stored once each (the failed first pass left nothing)');

select tests.authenticate_as_relay();
select is(relay.settle_many('relay-h', jsonb_build_array(
  jsonb_build_object('id', '00000000-0000-4000-8000-0000000000f1', 'user', tests.get_supabase_uid('ada'),
                     'device', '00000000-0000-4000-8000-00000000000a', 'outcome', 'denied', 'reason', 'user'),
  jsonb_build_object('id', '00000000-0000-4000-8000-0000000000f3', 'user', tests.get_supabase_uid('bob'),
                     'outcome', 'exploded'))) -> 1 ->> 'status', 'error',
  'settle_many refuses an answer with an unknown outcome alone');
reset role;
select is((select outcome from relay.pending_requests where id = '00000000-0000-4000-8000-0000000000f1'), 'denied',
  'and settles the good answer of the batch');
select is((select settled_at from relay.pending_requests where id = '00000000-0000-4000-8000-0000000000f3'), null,
  'while the refused one still waits');

select ok((select bool_and('plan_cache_mode=force_generic_plan' = any (p.proconfig)) from pg_proc p
           where p.oid in ('relay.open_request(uuid, uuid, uuid, text, text, text, bytea, timestamptz, int, text)'::regprocedure,
                           'relay.settle(uuid, uuid, uuid, text, text, text, text, int)'::regprocedure,
                           'private.locate_message(relay.pending_requests)'::regprocedure)),
  'open_request, settle and locate_message plan their statements once per session');

select * from finish();
rollback;
