-- relay.open_request, relay.mark_delivered, relay.settle, relay.finish, relay.request_states.
begin;
select plan(44);

select tests.create_supabase_user('ada');
select tests.create_supabase_user('bob');
select tests.create_supabase_user('eve');
insert into public.location_shares (owner_id, viewer_id)
values (tests.get_supabase_uid('ada'), tests.get_supabase_uid('bob'));
create temp table r (name text primary key, id uuid);
insert into r select 'r' || i, gen_random_uuid() from generate_series(1, 9) i;
grant all on r to public;
create function pg_temp.rid(text) returns uuid language sql as $$ select id from r where name = $1 $$;
create function pg_temp.open(p_id uuid, p_owner text, p_requester text default null, p_max int default 5)
returns jsonb language sql as $$
  select relay.open_request(p_id, tests.get_supabase_uid(p_owner), tests.get_supabase_uid(p_requester),
    '11111111-1111-4111-8111-111111111111', 'Claude', 'relay-a', decode(repeat('ab', 32), 'hex'),
    now() + interval '60 seconds', p_max)
$$;
grant execute on all functions in schema pg_temp to public;

select tests.authenticate_as_relay();
select relay.register_instance('relay-a');
select relay.register_instance('relay-b');
select tests.device_hello('relay-b', gen_random_uuid(), tests.get_supabase_uid('ada'), tests.get_session_id('ada'),
  '00000000-0000-4000-8000-00000000000a', 'Phone A', 'ios', '1', now());
select tests.device_hello('relay-b', gen_random_uuid(), tests.get_supabase_uid('ada'), tests.get_session_id('ada'),
  '00000000-0000-4000-8000-00000000000b', 'Phone B', 'android', '1', now());
select tests.device_hello('relay-b', gen_random_uuid(), tests.get_supabase_uid('bob'), tests.get_session_id('bob'),
  '00000000-0000-4000-8000-0000000000bb', 'Bob''s', 'ios', '1', now());

-- ---------------------------------------------------------------- open
select is(pg_temp.open(pg_temp.rid('r1'), 'ada'), '{"status": "opened", "connections": 2, "ping": null}'::jsonb,
  'open_request opens and counts the owner''s live sockets (none on the calling instance: no ping back)');
select is(pg_temp.open(pg_temp.rid('r1'), 'ada'), '{"status": "exists", "connections": null, "ping": null}'::jsonb,
  'opening the same id again changes nothing');
select is(pg_temp.open(pg_temp.rid('r2'), 'ada', 'bob') ->> 'status', 'opened',
  'a viewer''s agent may ask for an owner who shares with the viewer');
select throws_ok($$ select pg_temp.open(pg_temp.rid('r9'), 'ada', 'eve') $$, '42501', null,
  'nobody else''s agent may ask for the owner');
select is(pg_temp.open(pg_temp.rid('r3'), 'ada', null, 2) ->> 'status', 'opened',
  'the second request of the owner''s own agents opens (the viewer''s does not count)');
select is(pg_temp.open(pg_temp.rid('r4'), 'ada', null, 2), '{"status": "too_many", "connections": 2, "ping": null}'::jsonb,
  'the cap refuses the request past the limit');
select is(pg_temp.open(pg_temp.rid('r4'), 'eve', null, 2), '{"status": "opened", "connections": 0, "ping": null}'::jsonb,
  'the cap is per owner; an owner without sockets has 0 connections');
select is((relay.open_request(pg_temp.rid('r8'), tests.get_supabase_uid('bob'), null, 'x', 'Claude', 'relay-b',
    decode(repeat('ab', 32), 'hex'), now() + interval '1 minute') -> 'ping') - 'expires_ms' - 'requester',
  jsonb_build_object('type', 'locate', 'id', pg_temp.rid('r8'), 'owner', tests.get_supabase_uid('bob'), 'client_id', 'x',
    'agent_name', 'Claude', 'reply_key', encode(decode(repeat('ab', 32), 'hex'), 'base64'), 'reason', null,
    'always_allow', null),
  'the instance holding the owner''s socket gets the ping back with the reply key (it is not notified of its own request)');

select throws_ok($$ select relay.open_request(gen_random_uuid(), tests.get_supabase_uid('ada'), null, 'x', null,
  'relay-a', decode('abcd', 'hex'), now() + interval '1 minute') $$, '22023', null, 'a short reply key is refused');
select throws_ok($$ select relay.open_request(gen_random_uuid(), tests.get_supabase_uid('ada'), null, 'x', null,
  'relay-a', decode(repeat('ab', 32), 'hex'), now() - interval '1 second') $$, '22023', null, 'a past deadline is refused');
select throws_ok($$ select relay.open_request(gen_random_uuid(), tests.get_supabase_uid('ada'), null, 'x', null,
  'relay-a', decode(repeat('ab', 32), 'hex'), now() + interval '1 hour') $$, '22023', null, 'a deadline over 10 minutes away is refused');
select throws_ok($$ select relay.open_request(gen_random_uuid(), tests.get_supabase_uid('ada'), null, '', null,
  'relay-a', decode(repeat('ab', 32), 'hex'), now() + interval '1 minute') $$, '22023', null, 'an empty client id is refused');
select throws_ok($$ select relay.open_request(gen_random_uuid(), gen_random_uuid(), null, 'x', null,
  'relay-a', decode(repeat('ab', 32), 'hex'), now() + interval '1 minute') $$, 'P0002', null, 'an unknown owner is refused');
select throws_ok($$ select relay.open_request(null, tests.get_supabase_uid('ada'), null, 'x', null,
  'relay-a', decode(repeat('ab', 32), 'hex'), now() + interval '1 minute') $$, '22004', null, 'a null id is refused');
select throws_ok($$ select pg_temp.open(gen_random_uuid(), 'eve', null, 0) $$, '22023', null, 'a cap of 0 is refused');

-- ---------------------------------------------------------------- deliver
select is(relay.mark_delivered(array[pg_temp.rid('r1'), gen_random_uuid()]), 1,
  'mark_delivered records the waiting requests of a batch, not unknown ones');
select is(relay.mark_delivered(array[pg_temp.rid('r1')]), 0, 'a request is marked once');
select throws_ok($$ select relay.mark_delivered(null) $$, '22023', null, 'mark_delivered refuses null');
select throws_ok($$ select relay.mark_delivered(array(select gen_random_uuid() from generate_series(1, 10001))) $$,
  '22023', null, 'mark_delivered refuses more than 10000 ids');

-- ---------------------------------------------------------------- settle
select is(relay.settle(pg_temp.rid('r1'), tests.get_supabase_uid('bob'), '00000000-0000-4000-8000-0000000000bb',
  'denied', 'user', null), 'forbidden', 'another user''s device cannot settle the owner''s request');
select is(relay.settle(pg_temp.rid('r1'), tests.get_supabase_uid('ada'), '00000000-0000-4000-8000-0000000000bb',
  'denied', 'user', null), 'forbidden', 'a device that is not the user''s cannot settle');
select is(relay.settle(pg_temp.rid('r1'), tests.get_supabase_uid('ada'), '00000000-0000-4000-8000-00000000000a',
  'location', null, 'c2VhbGVk'), 'settled', 'the first answer settles the request');
select is(relay.settle(pg_temp.rid('r1'), tests.get_supabase_uid('ada'), '00000000-0000-4000-8000-00000000000b',
  'denied', 'user', null), 'gone', 'a second answer finds it gone');
select is(relay.settle(gen_random_uuid(), tests.get_supabase_uid('ada'), null, 'denied', 'no_answer', null), 'gone',
  'an answer to an unknown id is gone');
select is(relay.settle(pg_temp.rid('r2'), tests.get_supabase_uid('ada'), null, 'unavailable', 'no_fix', null), 'settled',
  'an answer without a device (POST /v1/device/answer) settles');
select throws_ok(format($$ select relay.settle(%L, tests.get_supabase_uid('ada'), null, 'location', null, null) $$,
  pg_temp.rid('r3')), '22023', null, 'a location without a sealed answer is refused');
select throws_ok(format($$ select relay.settle(%L, tests.get_supabase_uid('ada'), null, 'denied', 'user', 'c2VhbGVk') $$,
  pg_temp.rid('r3')), '22023', null, 'a sealed answer with a denial is refused');
select throws_ok(format($$ select relay.settle(%L, tests.get_supabase_uid('ada'), null, 'denied', 'bored', null) $$,
  pg_temp.rid('r3')), '22023', null, 'an unknown denial reason is refused');
select throws_ok(format($$ select relay.settle(%L, tests.get_supabase_uid('ada'), null, 'unavailable', null, null) $$,
  pg_temp.rid('r3')), '22023', null, 'unavailable without a reason is refused');
select throws_ok(format($$ select relay.settle(%L, tests.get_supabase_uid('ada'), null, 'teleported', null, null) $$,
  pg_temp.rid('r3')), '22023', null, 'an unknown outcome is refused');
select throws_ok(format($$ select relay.settle(%L, tests.get_supabase_uid('ada'), null, 'location', null, 'not base64!') $$,
  pg_temp.rid('r3')), '22023', null, 'a sealed answer that is not base64 is refused');
select pg_temp.open(pg_temp.rid('r7'), 'eve');
select throws_ok(format($$ select relay.settle(%L, tests.get_supabase_uid('eve'), null, 'location', null, null, 'relay-b') $$,
  pg_temp.rid('r7')), '22023', null, 'a location for another instance''s waiter without a sealed answer is refused');
select is(relay.settle(pg_temp.rid('r7'), tests.get_supabase_uid('eve'), null, 'location', null, null, 'relay-a'), 'settled',
  'the waiter''s own instance settles a location without sealing it (the fix never crosses Postgres)');
select throws_ok($$ select relay.settle(null, tests.get_supabase_uid('ada'), null, 'denied', 'user', null) $$,
  '22004', null, 'settle refuses a null id');

reset role;
select results_eq(format($$ select outcome, reason, answered_by from relay.pending_requests where id = %L $$, pg_temp.rid('r1')),
  $$ values ('location', null::text, '00000000-0000-4000-8000-00000000000a'::uuid) $$,
  'the settled row records outcome and device, and no coordinate');

-- ---------------------------------------------------------------- finish
select tests.authenticate_as_relay();
select throws_ok(format($$ select relay.finish(%L, 'relay-b', 'expired') $$, pg_temp.rid('r3')), '42501', null,
  'only the waiting instance may finish a request');
select is(relay.finish(pg_temp.rid('r3'), 'relay-a', 'expired'),
  '{"status": "finished", "delivered": false, "outcome": "expired", "reason": null}'::jsonb,
  'finish at the deadline reports that no device got the ping');
select relay.mark_delivered(array[pg_temp.rid('r4')]);
select is(relay.finish(pg_temp.rid('r4'), 'relay-a', 'abandoned') ->> 'delivered', 'true',
  'finish reports that a device got the ping');
select is(relay.finish(pg_temp.rid('r2'), 'relay-a', 'expired'),
  '{"status": "already_settled", "delivered": true, "outcome": "unavailable", "reason": "no_fix"}'::jsonb,
  'finish after an answer reports the answer (an answer proves the ping arrived)');
select is(relay.finish(gen_random_uuid(), 'relay-a', 'expired') ->> 'status', 'gone', 'finish of an unknown id is gone');
select throws_ok(format($$ select relay.finish(%L, 'relay-a', 'location') $$, pg_temp.rid('r3')), '22023', null,
  'finish refuses an outcome other than expired or abandoned');
select is(pg_temp.open(pg_temp.rid('r5'), 'ada', null, 3) ->> 'status', 'opened',
  'settled requests no longer count against the cap');

-- ---------------------------------------------------------------- request_states
select results_eq(format($$ select id, settled, outcome from relay.request_states(array[%L, %L, %L]::uuid[]) order by settled $$,
    pg_temp.rid('r5'), pg_temp.rid('r1'), pg_temp.rid('r9')),
  format($$ values (%L::uuid, false, null::text), (%L::uuid, true, 'location') $$, pg_temp.rid('r5'), pg_temp.rid('r1')),
  'request_states reports waiting and settled requests and omits vanished ones');
select throws_ok($$ select * from relay.request_states(null) $$, '22023', null, 'request_states refuses null');

reset role;
select * from finish();
rollback;
