-- A hello (relay.device_hellos) and a disconnect (relay.device_disconnects) rewrite the
-- device row only when something changed or last_seen_at is older than 30 s (no durable
-- write in a reconnect storm).
begin;
select plan(7);

select tests.create_supabase_user('ada');
create temp table stash (k text primary key, v tid);
grant all on stash to public;

select tests.authenticate_as_relay();
select relay.register_instance('relay-a'), relay.register_instance('relay-b');
select tests.device_hello('relay-a', '00000000-0000-4000-8000-0000000000c1', tests.get_supabase_uid('ada'), tests.get_session_id('ada'),
  '00000000-0000-4000-8000-00000000000a', 'Phone', 'ios', '1.0', now());
reset role;
insert into stash select 'first', ctid from public.devices where id = '00000000-0000-4000-8000-00000000000a';

select tests.authenticate_as_relay();
select is(tests.device_hello('relay-b', '00000000-0000-4000-8000-0000000000c2', tests.get_supabase_uid('ada'), tests.get_session_id('ada'),
  '00000000-0000-4000-8000-00000000000a', 'Phone', 'ios', '1.0', now()) ->> 'status', 'ok', 'the same phone says hello again');
reset role;
select is((select ctid from public.devices where id = '00000000-0000-4000-8000-00000000000a'),
  (select v from stash where k = 'first'), 'an unchanged, recently seen device row is not rewritten');
select results_eq($$ select id from relay.connections $$, $$ values ('00000000-0000-4000-8000-0000000000c2'::uuid) $$,
  'the socket is still replaced');

select tests.authenticate_as_relay();
select tests.device_hello('relay-b', '00000000-0000-4000-8000-0000000000c3', tests.get_supabase_uid('ada'), tests.get_session_id('ada'),
  '00000000-0000-4000-8000-00000000000a', 'Phone', 'ios', '1.1', now());
reset role;
select is((select app_version from public.devices where id = '00000000-0000-4000-8000-00000000000a'), '1.1',
  'a new app version is written');

update public.devices set last_seen_at = now() - interval '5 minutes' where id = '00000000-0000-4000-8000-00000000000a';
select tests.authenticate_as_relay();
select tests.device_hello('relay-b', '00000000-0000-4000-8000-0000000000c4', tests.get_supabase_uid('ada'), tests.get_session_id('ada'),
  '00000000-0000-4000-8000-00000000000a', 'Phone', 'ios', '1.1', now());
reset role;
select is((select last_seen_at from public.devices where id = '00000000-0000-4000-8000-00000000000a'), now(),
  'a device last seen minutes ago is marked seen now');

delete from stash;
insert into stash select 'fresh', ctid from public.devices where id = '00000000-0000-4000-8000-00000000000a';
select tests.authenticate_as_relay();
select is(relay.device_disconnects(array['00000000-0000-4000-8000-0000000000c4']::uuid[]), 1, 'the socket closes');
reset role;
select is((select ctid from public.devices where id = '00000000-0000-4000-8000-00000000000a'),
  (select v from stash where k = 'fresh'), 'a disconnect right after being seen rewrites nothing');

select * from finish();
rollback;
