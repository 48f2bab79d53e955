-- relay.claim_push (each push stage once, by the waiter only) and drop_apns_token's 410 timestamp.
begin;
select plan(31);

select tests.create_supabase_user('ada', 'ada@test.example', 'Ada Lovelace');
select tests.create_supabase_user('bob', 'bob@test.example', 'Bob');
select tests.create_supabase_user('cy', 'cy@test.example', 'Cy');
insert into public.location_shares (owner_id, viewer_id) values (tests.get_supabase_uid('ada'), tests.get_supabase_uid('bob'));
-- Ada always allows agent 1111… for herself and agent 2222… for Bob's requests; Cy always
-- allows agent 1111… but has only a Web Push subscription.
insert into public.always_allowed_agents (user_id, client_id, requester_id) values
  (tests.get_supabase_uid('ada'), '11111111-1111-4111-8111-111111111111', null),
  (tests.get_supabase_uid('ada'), '22222222-2222-4222-8222-222222222222', tests.get_supabase_uid('bob')),
  (tests.get_supabase_uid('cy'), '11111111-1111-4111-8111-111111111111', null);
insert into public.devices (id, user_id, platform, revoked_at) values
  ('00000000-0000-4000-8000-00000000000a', tests.get_supabase_uid('ada'), 'ios', null),
  ('00000000-0000-4000-8000-0000000000a9', tests.get_supabase_uid('ada'), 'ios', now()),
  ('00000000-0000-4000-8000-00000000000c', tests.get_supabase_uid('cy'), 'web', null);
insert into public.push_tokens (token, user_id, device_id, environment) values
  (repeat('a1', 32), tests.get_supabase_uid('ada'), '00000000-0000-4000-8000-00000000000a', 'sandbox'),
  (repeat('a9', 32), tests.get_supabase_uid('ada'), '00000000-0000-4000-8000-0000000000a9', 'production');
insert into public.web_push_subscriptions (endpoint, p256dh, auth, user_id, device_id) values
  ('https://push.example/ada', repeat('B', 87), repeat('A', 22), tests.get_supabase_uid('ada'), '00000000-0000-4000-8000-00000000000a'),
  ('https://push.example/cy', repeat('C', 87), repeat('A', 22), tests.get_supabase_uid('cy'), '00000000-0000-4000-8000-00000000000c');

create temp table r (name text primary key, id uuid);
insert into r select 'r' || i, gen_random_uuid() from generate_series(1, 9) i;
grant all on r to public;
create function pg_temp.rid(text) returns uuid language sql as $$ select id from r where name = $1 $$;
create function pg_temp.open(p_name text, p_owner text, p_client text, p_requester text default null)
returns jsonb language sql as $$
  select relay.open_request(pg_temp.rid(p_name), tests.get_supabase_uid(p_owner), tests.get_supabase_uid(p_requester),
    p_client, 'Claude', 'relay-a', decode(repeat('ab', 32), 'hex'), now() + interval '60 seconds', 10)
$$;
create function pg_temp.claim(p_name text, p_stage text, p_instance text default 'relay-a')
returns jsonb language sql as $$ select relay.claim_push(pg_temp.rid(p_name), p_instance, p_stage) $$;
grant execute on all functions in schema pg_temp to public;

select tests.authenticate_as_relay();
select relay.register_instance('relay-a');
select relay.register_instance('relay-b');
select pg_temp.open('r1', 'ada', 'agent-other');
select pg_temp.open('r2', 'ada', '11111111-1111-4111-8111-111111111111');
select pg_temp.open('r3', 'cy', '11111111-1111-4111-8111-111111111111');
select pg_temp.open('r4', 'ada', '22222222-2222-4222-8222-222222222222', 'bob');
select pg_temp.open('r5', 'ada', '11111111-1111-4111-8111-111111111111', 'bob');
select pg_temp.open('r6', 'ada', 'agent-other');
select pg_temp.open('r7', 'ada', 'agent-other');

-- ---------------------------------------------------------------- who may claim
select throws_ok($$ select pg_temp.claim('r1', 'wake', 'relay-b') $$, '42501', null,
  'only the waiting instance may claim a push stage');
select throws_ok($$ select relay.claim_push(null, 'relay-a', 'wake') $$, '22004', null, 'claim_push refuses a null id');
select throws_ok($$ select pg_temp.claim('r1', null) $$, '22004', null, 'claim_push refuses a null stage');
select throws_ok($$ select pg_temp.claim('r1', 'alert') $$, '22023', null, 'claim_push refuses an unknown stage');
select throws_ok($$ select pg_temp.claim('r1', 'wake', 'bad instance!') $$, '22023', null, 'claim_push checks the instance id');
select is(relay.claim_push(gen_random_uuid(), 'relay-a', 'wake') ->> 'status', 'gone', 'an unknown request is gone');

-- ---------------------------------------------------------------- wake: alert
select is(pg_temp.claim('r1', 'wake') - 'expires_ms' - 'owner' - 'limited',
  jsonb_build_object('status', 'claimed', 'kind', 'alert',
    'apns', jsonb_build_array(jsonb_build_object('token', repeat('a1', 32), 'environment', 'sandbox', 'language', 'en')),
    'web', jsonb_build_array(jsonb_build_object('endpoint', 'https://push.example/ada', 'p256dh', repeat('B', 87), 'auth', repeat('A', 22), 'language', 'en')),
    'client_id', 'agent-other', 'client_name', 'Claude', 'reason', null, 'requester', null),
  'a wake for an agent that is not always allowed is an alert to every target, none of removed devices');
select is((pg_temp.claim('r1', 'wake')) ->> 'status', 'already', 'the second claim of a stage finds it taken');
select is((pg_temp.claim('r1', 'checking')) ->> 'status', 'not_applicable', 'no checking stage after an alert wake');
select ok(abs(((select relay.claim_push(pg_temp.rid('r6'), 'relay-a', 'wake')) ->> 'expires_ms')::bigint
              - (extract(epoch from now() + interval '60 seconds') * 1000)::bigint) < 1000,
  'the claim carries the deadline in epoch milliseconds');

-- ---------------------------------------------------------------- wake: silent, then checking
select is((pg_temp.claim('r2', 'checking')) ->> 'status', 'not_applicable', 'checking is refused before any wake');
select is(pg_temp.claim('r2', 'wake') #>> '{kind}', 'silent', 'an always-allowed agent with an APNs token gets a silent wake');
select is(pg_temp.claim('r2', 'wake') ->> 'status', 'already', 'the silent wake is claimed once');
reset role;
select results_eq($$ select wake_kind from relay.pending_requests where id = pg_temp.rid('r2') $$, array['silent'],
  'the wake kind is recorded');
select tests.authenticate_as_relay();
select is(pg_temp.claim('r2', 'checking') - 'expires_ms' - 'owner' - 'limited',
  jsonb_build_object('status', 'claimed', 'kind', 'checking',
    'apns', jsonb_build_array(jsonb_build_object('token', repeat('a1', 32), 'environment', 'sandbox', 'language', 'en')),
    'web', jsonb_build_array(jsonb_build_object('endpoint', 'https://push.example/ada', 'p256dh', repeat('B', 87), 'auth', repeat('A', 22), 'language', 'en')),
    'client_id', '11111111-1111-4111-8111-111111111111', 'client_name', 'Claude', 'reason', null, 'requester', null),
  'checking after a silent wake goes to every APNs token and subscription');
select is(pg_temp.claim('r2', 'checking') ->> 'status', 'already', 'checking is claimed once');

-- ---------------------------------------------------------------- silent wake carries no Web Push
select is(relay.claim_push(pg_temp.rid('r4'), 'relay-a', 'wake') -> 'web', '[]'::jsonb,
  'a silent wake lists no Web Push subscription');
select is(pg_temp.claim('r4', 'checking') -> 'requester',
  jsonb_build_object('user_id', tests.get_supabase_uid('bob'), 'name', 'Bob', 'email', 'bob@test.example'),
  'a shared request''s claim names the requester');
select is(pg_temp.claim('r5', 'wake') ->> 'kind', 'alert',
  'always-allow for the owner''s own requests does not cover Bob''s requests with the same agent');

-- ---------------------------------------------------------------- always allowed, no APNs token
select is(pg_temp.claim('r3', 'wake') - 'expires_ms' - 'client_name' - 'client_id' - 'reason' - 'requester' - 'owner' - 'limited',
  jsonb_build_object('status', 'claimed', 'kind', 'checking', 'apns', '[]'::jsonb,
    'web', jsonb_build_array(jsonb_build_object('endpoint', 'https://push.example/cy', 'p256dh', repeat('C', 87), 'auth', repeat('A', 22), 'language', 'en'))),
  'always allowed without an APNs token: the checking Web Push goes out at wake');
select is(pg_temp.claim('r3', 'checking') ->> 'status', 'not_applicable', 'and no second checking stage follows');

-- ---------------------------------------------------------------- settled, expired
select relay.settle(pg_temp.rid('r7'), tests.get_supabase_uid('ada'), '00000000-0000-4000-8000-00000000000a', 'denied', 'user', null);
select is(pg_temp.claim('r7', 'wake') ->> 'status', 'settled', 'no push for a settled request');
reset role;
update relay.pending_requests set expires_at = now() - interval '1 second' where id = pg_temp.rid('r6');
select tests.authenticate_as_relay();
select is(pg_temp.claim('r6', 'wake') ->> 'status', 'expired', 'no push for a request past its deadline');
select throws_ok($$ update relay.pending_requests set checking_claimed_at = now() where id = pg_temp.rid('r1') $$,
  '42501', null, 'the relay role cannot write claim columns directly');

-- ---------------------------------------------------------------- who may execute
select tests.authenticate_as('ada');
select throws_ok($$ select pg_temp.claim('r1', 'wake') $$, '42501', null, 'a user cannot claim pushes');
select tests.clear_authentication();
select throws_ok($$ select pg_temp.claim('r1', 'wake') $$, '42501', null, 'anon cannot claim pushes');
select tests.authenticate_as_service_role();
select throws_ok($$ select pg_temp.claim('r1', 'wake') $$, '42501', null, 'the service role cannot claim pushes');

-- ---------------------------------------------------------------- drop_apns_token and 410 timestamps
reset role;
insert into public.push_tokens (token, user_id, environment, created_at) values
  (repeat('c1', 32), tests.get_supabase_uid('cy'), 'production', now() - interval '1 hour'),
  (repeat('c2', 32), tests.get_supabase_uid('cy'), 'production', now());
select tests.authenticate_as_relay();
select is(relay.drop_apns_token(repeat('c2', 32), now() - interval '10 minutes'), false,
  'a token stored after APNs'' 410 timestamp is kept (the app registered it again)');
select is(relay.drop_apns_token(repeat('c1', 32), now() - interval '10 minutes'), true,
  'a token stored before the 410 timestamp is dropped');
select is(relay.drop_apns_token(repeat('c2', 32)), true, 'without a timestamp the token is dropped');
reset role;
select results_eq($$ select count(*)::int from public.push_tokens where token in (repeat('c1', 32), repeat('c2', 32)) $$,
  array[0], 'both tokens are gone');

select * from finish();
rollback;
