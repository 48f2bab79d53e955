-- Reminders of standing grants (docs/protocol.md, "Reminders"): a location under an always-allow
-- marks its last use; the first use of a for-good always-allow standing the relay's interval
-- since it was made or kept claims one reminder; Keep starts the interval again; a refusal
-- is no use; a grant for a while is never reminded of; only the relay calls any of it. The
-- settling instance pushes the reminder: relay.claim_reminder_push claims it once, within a
-- minute, with the targets the push budgets pay for.
begin;
select plan(27);

select tests.create_supabase_user('ada');
create function pg_temp.allow(p_client text, p_age interval, p_expires interval default null) returns void
language sql as $$
  insert into public.always_allowed_agents (user_id, client_id, client_name, created_at, expires_at)
  values (tests.get_supabase_uid('ada'), p_client, 'Agent ' || p_client, now() - p_age, now() + p_expires)
$$;
select pg_temp.allow('agent-old', '40 days');
select pg_temp.allow('agent-new', '1 hour');
select pg_temp.allow('agent-hour', '40 days', '1 hour');
select pg_temp.allow('agent-settled', '40 days');
select pg_temp.allow('agent-denied', '40 days');
select pg_temp.allow('agent-kept', '40 days');
select pg_temp.allow('agent-off', '40 days');
create function pg_temp.note(p_client text, p_after int default 2592000) returns boolean language sql as $$
  select private.note_always_allowed_use(tests.get_supabase_uid('ada'), p_client, null, p_after, 'relay-g')
$$;
create function pg_temp.row(p_client text) returns public.always_allowed_agents language sql as $$
  select * from public.always_allowed_agents where user_id = tests.get_supabase_uid('ada') and client_id = p_client
$$;

select is(pg_temp.note('agent-old'), true, 'standing 40 days of a 30-day interval, its next use claims the reminder');
select is(pg_temp.note('agent-old'), false, 'once: the next use (here in the same batch) does not remind again');
select is(pg_temp.note('agent-new'), false, 'a grant made an hour ago is not due');
select is(pg_temp.note('agent-hour'), false, 'a grant for a while is never reminded of');
select is((pg_temp.row('agent-hour')).last_used_at, now(), 'but its use is marked');
select is(pg_temp.note('agent-off', null), false, 'no interval (the relay sends none): no reminder');
select is(pg_temp.note('agent-nobody'), false, 'an agent not allowed: nothing to mark or remind');

select tests.authenticate_as_relay();
select relay.register_instance('relay-g');
select relay.open_request(('00000000-0000-4000-8000-0000000000e' || n)::uuid, tests.get_supabase_uid('ada'), null, client,
  'A', 'relay-g', decode(repeat('ab', 32), 'hex'), now() + interval '60 seconds')
from (values (1, 'agent-settled'), (2, 'agent-denied'), (3, 'agent-kept'), (4, 'agent-kept')) r(n, client);
select is(relay.settle('00000000-0000-4000-8000-0000000000e1', tests.get_supabase_uid('ada'), null, 'location', null, null,
  'relay-g', 2592000), 'settled', 'a location settles as before');
select is(relay.settle('00000000-0000-4000-8000-0000000000e2', tests.get_supabase_uid('ada'), null, 'denied', 'user', null,
  'relay-g', 2592000), 'settled', 'a refusal settles as before');
select is((select a ->> 'last_used_ms' from jsonb_array_elements(relay.always_allowed_agents(tests.get_supabase_uid('ada'))) a
           where a ->> 'client_id' = 'agent-settled'), ((extract(epoch from now()) * 1000)::bigint)::text,
  'the list the phone gets shows the last use');
select ok(relay.keep_always_allowed(tests.get_supabase_uid('ada'), 'agent-kept', null) @> '[{"client_id": "agent-kept"}]',
  'Keep answers with the list');
select throws_ok($$ select relay.keep_always_allowed(tests.get_supabase_uid('ada'), 'agent-hour', null) $$, 'P0002', null,
  'Keep is for a for-good grant that exists');
select throws_ok($$ select relay.settle('00000000-0000-4000-8000-0000000000e3', tests.get_supabase_uid('ada'), null,
  'location', null, null, 'relay-g', 0) $$, '22023', null, 'an interval is at least a second');
reset role;

select is(array[(pg_temp.row('agent-settled')).reminded_at, (pg_temp.row('agent-settled')).last_used_at], array[now(), now()],
  'the settled location marked the use and claimed the due reminder');
select is(array[(pg_temp.row('agent-denied')).reminded_at, (pg_temp.row('agent-denied')).last_used_at], array[null, null]::timestamptz[],
  'a refusal is no use');
select is(pg_temp.note('agent-kept'), false, 'after Keep the interval starts again');

-- The reminder's push: Ada's phone has an APNs token and a Web Push subscription.
insert into public.devices (id, user_id, platform) values ('00000000-0000-4000-8000-0000000000d1', tests.get_supabase_uid('ada'), 'ios');
insert into public.push_tokens (token, user_id, device_id, environment) values
  (repeat('d1', 32), tests.get_supabase_uid('ada'), '00000000-0000-4000-8000-0000000000d1', 'production');
insert into public.web_push_subscriptions (endpoint, p256dh, auth, user_id, device_id) values
  ('https://push.example/ada-reminder', repeat('B', 87), repeat('A', 22), tests.get_supabase_uid('ada'),
   '00000000-0000-4000-8000-0000000000d1');
select tests.authenticate_as_relay();
create function pg_temp.claim(p_client text, p_per_target int default 30) returns jsonb language sql as $$
  select relay.claim_reminder_push(tests.get_supabase_uid('ada'), p_client, null, p_per_target, 100)
$$;
select is(pg_temp.claim('agent-old') - 'owner',
  jsonb_build_object('status', 'claimed', 'apns', jsonb_build_array(jsonb_build_object('token', repeat('d1', 32), 'environment', 'production', 'language', 'en')),
    'web', jsonb_build_array(jsonb_build_object('endpoint', 'https://push.example/ada-reminder', 'p256dh', repeat('B', 87), 'auth', repeat('A', 22), 'language', 'en')),
    'limited', jsonb_build_object('apns', 0, 'web', 0)),
  'the pusher claims the reminder''s push to every target of the owner');
select is(pg_temp.claim('agent-old') ->> 'status', 'already', 'once per reminder');
select is(pg_temp.claim('agent-new') ->> 'status', 'not_applicable', 'no push without a reminder');
select is(pg_temp.claim('agent-hour') ->> 'status', 'gone', 'nor for a grant for a while');
select is(pg_temp.claim('agent-nobody') ->> 'status', 'gone', 'nor for an agent not allowed');
select is(pg_temp.claim('agent-settled', 1) -> 'limited', '{"apns": 1, "web": 1}',
  'within the per-target budget: each target has had its one push of the hour');
reset role;
update public.always_allowed_agents set reminded_at = now() - interval '2 minutes', reminder_pushed_at = null
where user_id = tests.get_supabase_uid('ada') and client_id = 'agent-kept';
select tests.authenticate_as_relay();
select is(pg_temp.claim('agent-kept') ->> 'status', 'not_applicable', 'a reminder is pushed within a minute or not at all');
select throws_ok($$ select relay.claim_reminder_push(tests.get_supabase_uid('ada'), null, null, 30, 100) $$, '22004', null,
  'a client id is needed');
select throws_ok($$ select pg_temp.claim('agent-old', 0) $$, '22023', null, 'budgets are range-checked');
reset role;

select tests.authenticate_as('ada');
select throws_ok($$ select relay.keep_always_allowed(tests.get_supabase_uid('ada'), 'agent-old', null) $$, '42501', null,
  'only the relay calls Keep (for the phone socket)');
select throws_ok($$ select relay.claim_reminder_push(tests.get_supabase_uid('ada'), 'agent-old', null, 30, 100) $$, '42501', null,
  'only the relay claims a reminder''s push');
select tests.clear_authentication();

select * from finish();
rollback;
