-- The one re-alert (docs/protocol.md, "Re-alert"): relay.claim_push's realert stage is claimed
-- once per request, only after an alert went out (a wake alert or a checking alert, never a
-- silent wake alone), only by the waiter, and only with at least 20 s of the request left.
begin;
select plan(9);

select tests.create_supabase_user('ada', 'ada@test.example', 'Ada');
insert into public.devices (id, user_id, platform) values
  ('00000000-0000-4000-8000-00000000000a', tests.get_supabase_uid('ada'), 'ios');
insert into public.push_tokens (token, user_id, device_id, environment) values
  (repeat('a1', 32), tests.get_supabase_uid('ada'), '00000000-0000-4000-8000-00000000000a', 'production');
insert into public.always_allowed_agents (user_id, client_id) values (tests.get_supabase_uid('ada'), 'agent-always');
create function pg_temp.open(p_id uuid, p_client text, p_seconds int default 60) returns jsonb language sql as $$
  select relay.open_request(p_id, tests.get_supabase_uid('ada'), null, p_client, 'A', 'relay-r',
    decode(repeat('ab', 32), 'hex'), now() + make_interval(secs => p_seconds))
$$;
grant execute on all functions in schema pg_temp to public;
create temp table c (v jsonb);
grant all on c to public;

select tests.authenticate_as_relay();
select relay.register_instance('relay-r');
select relay.register_instance('relay-o');
select pg_temp.open('00000000-0000-4000-8000-0000000000d1', 'agent-asks');
select pg_temp.open('00000000-0000-4000-8000-0000000000d2', 'agent-always');
select pg_temp.open('00000000-0000-4000-8000-0000000000d3', 'agent-asks', 15);

select is(relay.claim_push('00000000-0000-4000-8000-0000000000d1', 'relay-r', 'realert') ->> 'status', 'not_applicable',
  'no re-alert before the first alert');
select is(relay.claim_push('00000000-0000-4000-8000-0000000000d1', 'relay-r', 'wake') ->> 'kind', 'alert', 'the wake alert');
select throws_ok($$ select relay.claim_push('00000000-0000-4000-8000-0000000000d1', 'relay-o', 'realert') $$, '42501', null,
  'only the waiter claims it');
insert into c select relay.claim_push('00000000-0000-4000-8000-0000000000d1', 'relay-r', 'realert');
select is((select (v ->> 'status') || '/' || (v ->> 'kind') from c), 'claimed/alert', 'then one re-alert, an alert');
select is((select v -> 'apns' -> 0 ->> 'token' from c), repeat('a1', 32), 'to the person''s phone, within its budget');
select is(relay.claim_push('00000000-0000-4000-8000-0000000000d1', 'relay-r', 'realert') ->> 'status', 'already',
  'a second claim is refused');

select is(relay.claim_push('00000000-0000-4000-8000-0000000000d2', 'relay-r', 'wake') ->> 'kind', 'silent',
  'an always-allowed request wakes silently');
select is(relay.claim_push('00000000-0000-4000-8000-0000000000d2', 'relay-r', 'realert') ->> 'status', 'not_applicable',
  'a silent wake alone asked nobody: no re-alert');

select relay.claim_push('00000000-0000-4000-8000-0000000000d3', 'relay-r', 'wake');
select is(relay.claim_push('00000000-0000-4000-8000-0000000000d3', 'relay-r', 'realert') ->> 'status', 'not_applicable',
  'with less than 20 s left there is no re-alert');

select * from finish();
rollback;
