-- relay.register_instance, relay.heartbeat and relay.reap.
begin;
select plan(17);

select tests.create_supabase_user('ada');
insert into public.devices (id, user_id, platform, last_seen_at)
values ('00000000-0000-4000-8000-00000000000a', tests.get_supabase_uid('ada'), 'ios', now() - interval '5 minutes');

select tests.authenticate_as_relay();
select lives_ok($$ select relay.register_instance('relay-a') $$, 'an instance registers');
select lives_ok($$ select relay.register_instance('relay-b') $$, 'a second instance registers');
select throws_ok($$ select relay.register_instance('bad id!') $$, '22023', null, 'a malformed instance id is refused');
select throws_ok($$ select relay.register_instance(null) $$, '22023', null, 'a null instance id is refused');
select is(relay.heartbeat('relay-a'), false, 'a heartbeat of a registered instance reports no loss');
select is(relay.heartbeat('relay-c'), true, 'a heartbeat of a vanished instance re-creates it and reports the loss');

-- relay-b holds a socket of Ada's phone and waits for one request; then it goes silent.
select is(tests.device_hello('relay-b', '00000000-0000-4000-8000-0000000000c1', tests.get_supabase_uid('ada'), tests.get_session_id('ada'),
  '00000000-0000-4000-8000-00000000000a', 'Phone', 'ios', '1.0', now()) ->> 'status', 'ok', 'a phone connects to relay-b');
select is(relay.open_request('00000000-0000-4000-8000-0000000000e1', tests.get_supabase_uid('ada'), null,
  'agent-key', 'CI', 'relay-b', decode(repeat('ab', 32), 'hex'), now() + interval '60 seconds') ->> 'status',
  'opened', 'relay-b waits for a request');

reset role;
update public.devices set last_seen_at = now() - interval '6 minutes';
update relay.instances set seen_refreshed_at = now() - interval '6 minutes' where id = 'relay-b';
select tests.authenticate_as_relay();
select is(relay.heartbeat('relay-b'), false, 'relay-b beats');
reset role;
select cmp_ok((select last_seen_at from public.devices), '>', now() - interval '1 second',
  'a heartbeat refreshes last_seen_at of the instance''s devices (every 5 minutes, for rows older than that)');
update relay.instances set heartbeat_at = now() - interval '5 minutes' where id = 'relay-b';
-- A request of a live waiter, stuck far past its deadline.
insert into relay.pending_requests (id, owner_id, client_id, waiter_instance, reply_key, expires_at, created_at)
values ('00000000-0000-4000-8000-0000000000e2', tests.get_supabase_uid('ada'), 'agent-key', 'relay-a',
        decode(repeat('cd', 32), 'hex'), now() - interval '5 minutes', now() - interval '6 minutes');
-- A request settled long ago.
insert into relay.pending_requests (id, owner_id, client_id, waiter_instance, reply_key, expires_at,
                                    created_at, settled_at, outcome)
values ('00000000-0000-4000-8000-0000000000e3', tests.get_supabase_uid('ada'), 'agent-key', 'relay-a',
        decode(repeat('ef', 32), 'hex'), now() - interval '1 hour', now() - interval '1 hour',
        now() - interval '1 hour', 'expired');

select tests.authenticate_as_relay();
select is(relay.reap(),
  '{"instances": 1, "connections": 1, "abandoned": 1, "expired": 1, "deleted": 1}'::jsonb,
  'reap removes the silent instance and its socket, abandons its waiter, expires the stuck request, deletes the old one');
reset role;
select results_eq($$ select id from relay.instances order by id $$, array['relay-a', 'relay-c'],
  'the silent instance is gone, the live ones stay');
select is_empty($$ select * from relay.connections $$, 'the silent instance''s socket is gone');
select results_eq($$ select outcome from relay.pending_requests order by id $$, array['abandoned', 'expired'],
  'the dead waiter''s request is abandoned and the stuck one expired');
select tests.authenticate_as_relay();
select is(relay.reap(), '{"instances": 0, "connections": 0, "abandoned": 0, "expired": 0, "deleted": 0}'::jsonb,
  'reaping again finds nothing');
select throws_ok($$ select relay.reap(interval '0 seconds') $$, '22023', null, 'reap refuses a zero dead_after');
select throws_ok($$ select relay.reap(interval '30 seconds', null) $$, '22023', null, 'reap refuses a null keep_settled');

reset role;
select * from finish();
rollback;
