-- What an idle phone costs (docs/scaling.md): last_seen_at written on connect, on disconnect and
-- at most every 5 minutes; presence from relay.connections; revocation checks that read
-- the revocations since the last check, not every socket.
begin;
select plan(22);

select tests.create_supabase_user('ada', 'ada@example.com', 'Ada');
select tests.create_supabase_user('bob', 'bob@example.com', 'Bob');
select tests.create_supabase_user('cy', 'cy@example.com', 'Cy');
select tests.create_supabase_user('dee', 'dee@example.com', 'Dee');
create temp table stash (k text primary key, v uuid);
insert into stash values ('bob', tests.get_session_id('bob'));

select tests.authenticate_as_relay();
select relay.register_instance('relay-idle');
select is(tests.device_hello('relay-idle', '00000000-0000-4000-8000-00000000a0c1', tests.get_supabase_uid('ada'),
  tests.get_session_id('ada'), '00000000-0000-4000-8000-00000000a0d1', 'Ada phone', 'ios', '1', now()) ->> 'status',
  'ok', 'a phone registers');
select tests.device_hello('relay-idle', '00000000-0000-4000-8000-00000000b0c1', tests.get_supabase_uid('bob'),
  tests.get_session_id('bob'), '00000000-0000-4000-8000-00000000b0d1', 'Bob phone', 'ios', '1', now());
select tests.device_hello('relay-idle', '00000000-0000-4000-8000-00000000c0c1', tests.get_supabase_uid('cy'),
  tests.get_session_id('cy'), '00000000-0000-4000-8000-00000000c0d1', 'Cy phone', 'ios', '1', now());
select tests.device_hello('relay-idle', '00000000-0000-4000-8000-00000000d0c1', tests.get_supabase_uid('dee'),
  tests.get_session_id('dee'), '00000000-0000-4000-8000-00000000d0d1', 'Dee phone', 'ios', '1', now());
reset role;

-- ------------------------------------------------------------ last_seen_at
select is((select last_seen_at from public.devices where id = '00000000-0000-4000-8000-00000000a0d1'), now(),
  'a connect writes last_seen_at');
update public.devices set last_seen_at = now() - interval '4 minutes' where id = '00000000-0000-4000-8000-00000000a0d1';
select tests.authenticate_as_relay();
select relay.heartbeat('relay-idle');
reset role;
select is((select last_seen_at from public.devices where id = '00000000-0000-4000-8000-00000000a0d1'),
  now() - interval '4 minutes', 'a heartbeat leaves a 4-minute-old last_seen_at alone');
update public.devices set last_seen_at = now() - interval '6 minutes' where id = '00000000-0000-4000-8000-00000000a0d1';
select tests.authenticate_as_relay();
select relay.heartbeat('relay-idle');
reset role;
select is((select last_seen_at from public.devices where id = '00000000-0000-4000-8000-00000000a0d1'),
  now() - interval '6 minutes', 'nor a 6-minute-old one while the instance refreshed less than 5 minutes ago');
update relay.instances set seen_refreshed_at = now() - interval '5 minutes 1 second' where id = 'relay-idle';
select tests.authenticate_as_relay();
select relay.heartbeat('relay-idle');
reset role;
select is((select last_seen_at from public.devices where id = '00000000-0000-4000-8000-00000000a0d1'), now(),
  'every 5 minutes the heartbeat refreshes the rows older than that');
select is((select seen_refreshed_at from relay.instances where id = 'relay-idle'), now(), 'and notes when it did');

select is((select reloptions from pg_class where oid = 'public.devices'::regclass), array['fillfactor=70'],
  'devices keep room on each page, so a refresh is a HOT update');

-- ------------------------------------------------------------ presence
update public.devices set last_seen_at = now() - interval '1 day' where id = '00000000-0000-4000-8000-00000000a0d1';
select tests.authenticate_as('ada');
select results_eq($$ select public.online_devices() $$, array['00000000-0000-4000-8000-00000000a0d1'::uuid],
  'a connected device is online whatever its last_seen_at says');
select tests.authenticate_as_agent('ada');
select throws_ok($$ select public.online_devices() $$, '42501', null, 'an agent''s token learns nothing about presence');
select tests.clear_authentication();
select throws_ok($$ select public.online_devices() $$, '42501', null, 'nor does the anon key');

-- ------------------------------------------------------------ revocations
reset role;
select tests.authenticate_as_relay();
select is_empty($$ select relay.revoked_connections('relay-idle') $$, 'the first check looks at every socket: none is revoked');
reset role;
select isnt((select revocations_checked_at from relay.instances where id = 'relay-idle'), null, 'the check is noted');

delete from auth.sessions where id = tests.get_session_id('bob');
select is((select count(*)::int from private.revocations where session_id = (select v from stash where k = 'bob')), 1,
  'a signed-out session leaves a revocation');
select tests.authenticate_as('cy');
update public.devices set revoked_at = now() where id = '00000000-0000-4000-8000-00000000c0d1';
reset role;
select is((select count(*)::int from private.revocations where device_id = '00000000-0000-4000-8000-00000000c0d1'), 1,
  'a removed device leaves one for the device');
select is((select count(*)::int from private.revocations where session_id = tests.get_session_id('cy')), 1,
  'and one for the session it revoked');
update auth.sessions set not_after = now() - interval '10 seconds' where id = tests.get_session_id('dee');

select tests.authenticate_as_relay();
select set_eq($$ select relay.revoked_connections('relay-idle') $$,
  array['00000000-0000-4000-8000-00000000b0c1', '00000000-0000-4000-8000-00000000c0c1',
        '00000000-0000-4000-8000-00000000d0c1']::uuid[],
  'the next check finds the signed-out, the removed and the expired, and not the live socket');
select is_empty($$ select relay.revoked_connections('relay-idle') $$, 'each is reported once');
reset role;
select results_eq($$ select id from relay.connections where instance_id = 'relay-idle' $$,
  array['00000000-0000-4000-8000-00000000a0c1'::uuid], 'only the live socket is left');

-- A socket whose session lapsed before the last check (not a revocation since) is not
-- looked at again: the check follows the revocations, not the sockets.
update relay.instances set revocations_checked_at = now() + interval '2 minutes' where id = 'relay-idle';
update auth.sessions set not_after = now() - interval '1 second' where id = tests.get_session_id('ada');
select tests.authenticate_as_relay();
select is_empty($$ select relay.revoked_connections('relay-idle') $$,
  'a check reads only what changed since the one before (with a minute of overlap)');
reset role;
update relay.instances set revocations_checked_at = null where id = 'relay-idle';
select tests.authenticate_as_relay();
select results_eq($$ select relay.revoked_connections('relay-idle') $$,
  array['00000000-0000-4000-8000-00000000a0c1'::uuid], 'an instance that never checked looks at all of its sockets');

-- ------------------------------------------------------------ pruning
reset role;
update private.revocations set revoked_at = now() - interval '61 minutes' where session_id = (select v from stash where k = 'bob');
select tests.authenticate_as_relay();
select relay.reap();
reset role;
select is((select count(*)::int from private.revocations where session_id = (select v from stash where k = 'bob')), 0,
  'reap deletes revocations older than an hour');
select is((select count(*)::int from private.revocations), 2, 'and keeps the younger ones');

select * from finish();
rollback;
