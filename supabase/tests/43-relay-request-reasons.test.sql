-- The agent says why (docs/protocol.md, "Consent"): a reason travels with the request, in the ping
-- and the push claim, and is gone once the request settles.
begin;
select plan(15);

select tests.create_supabase_user('ada', 'ada@test.example', 'Ada');
insert into public.devices (id, user_id, platform) values ('00000000-0000-4000-8000-00000000000a', tests.get_supabase_uid('ada'), 'ios');
insert into public.push_tokens (token, user_id, device_id, environment) values
  (repeat('a1', 32), tests.get_supabase_uid('ada'), '00000000-0000-4000-8000-00000000000a', 'sandbox');
create temp table r (name text primary key, id uuid);
insert into r select 'r' || i, gen_random_uuid() from generate_series(1, 9) i;
grant all on r to public;
create function pg_temp.rid(text) returns uuid language sql as $$ select id from r where name = $1 $$;
create function pg_temp.open(p_name text, p_reason text)
returns jsonb language sql as $$
  select relay.open_request(pg_temp.rid(p_name), tests.get_supabase_uid('ada'), null, 'agent', 'Claude', 'relay-r',
    decode(repeat('ab', 32), 'hex'), now() + interval '60 seconds', 10, p_reason)
$$;
grant execute on all functions in schema pg_temp to public;

select tests.authenticate_as_relay();
select relay.register_instance('relay-r');
select tests.device_hello('relay-r', '00000000-0000-4000-8000-0000000000c1', tests.get_supabase_uid('ada'),
  tests.get_session_id('ada'), '00000000-0000-4000-8000-00000000000a', 'Phone', 'ios', '1', now());

select is(pg_temp.open('r1', 'To pick you up at the station') -> 'ping' ->> 'reason', 'To pick you up at the station',
  'the ping carries the agent''s reason');
select is(pg_temp.open('r2', null) -> 'ping' -> 'reason', 'null'::jsonb, 'and null when the agent gave none');
select is(pg_temp.open('r3', E'Bring\u202E the \u200Bkeys\u0007') -> 'ping' ->> 'reason', 'Bring the keys',
  'controls and invisible characters are removed here too, whatever the caller sent');
select is(pg_temp.open('r4', repeat('🚉', 120)) ->> 'status', 'opened', '120 characters (one emoji each) are allowed');
select throws_ok($$ select pg_temp.open('r5', repeat('x', 121)) $$, '22023', 'reason must be at most 120 characters',
  'a longer reason is refused');
select is(pg_temp.open('r6', E' \u200B ') -> 'ping' -> 'reason', 'null'::jsonb, 'a reason of nothing visible is none');
select is(relay.claim_push(pg_temp.rid('r1'), 'relay-r', 'wake') ->> 'reason', 'To pick you up at the station',
  'the push claim carries it, for the alert''s text');
select is(relay.open_requests('relay-r', jsonb_build_array(jsonb_build_object('id', pg_temp.rid('r7'),
  'owner', tests.get_supabase_uid('ada'), 'client_id', 'agent', 'reply_key', encode(decode(repeat('ab', 32), 'hex'), 'base64'),
  'expires_at', extract(epoch from now() + interval '1 minute'), 'max_waiting', 10, 'reason', 'Batched too'))) -> 0 -> 'ping' ->> 'reason',
  'Batched too', 'open_requests passes each element''s reason');
select is((select p -> 'message' ->> 'reason'
           from jsonb_array_elements(relay.device_hellos('relay-r', jsonb_build_array(jsonb_build_object(
                  'connection', '00000000-0000-4000-8000-0000000000c2', 'user', tests.get_supabase_uid('ada'),
                  'session', tests.get_session_id('ada'), 'device', '00000000-0000-4000-8000-00000000000a',
                  'name', 'Phone', 'platform', 'ios', 'opened_at', now())), 20) -> 'pending') p
           where p -> 'message' ->> 'id' = pg_temp.rid('r1')::text),
  'To pick you up at the station', 'a phone that says hello later gets the reason with the waiting ping');

-- ------------------------------------------------------------ gone once settled
select is(relay.settle(pg_temp.rid('r1'), tests.get_supabase_uid('ada'), null, 'denied', 'user', null, 'relay-r'), 'settled',
  'an answer settles the request');
select is(relay.finish(pg_temp.rid('r3'), 'relay-r', 'expired') ->> 'status', 'finished', 'the deadline ends another');
select is(relay.open_requests('relay-r', jsonb_build_array(jsonb_build_object('id', pg_temp.rid('r4'), 'owner', tests.get_supabase_uid('ada'),
  'client_id', 'agent', 'reply_key', encode(decode(repeat('ab', 32), 'hex'), 'base64'),
  'expires_at', extract(epoch from now() + interval '1 minute'))))  -> 0 ->> 'status', 'exists', 'an open again changes nothing');
reset role;
select is((select ask_reason from relay.pending_requests where id = pg_temp.rid('r1')), null, 'an answered request keeps no reason');
select is((select ask_reason from relay.pending_requests where id = pg_temp.rid('r3')), null, 'nor one that expired');
select throws_ok($$ insert into relay.pending_requests (id, owner_id, client_id, waiter_instance, reply_key, expires_at,
    settled_at, outcome, ask_reason)
  values (gen_random_uuid(), tests.get_supabase_uid('ada'), 'agent', 'relay-r', decode(repeat('ab', 32), 'hex'),
    now() + interval '1 minute', now(), 'expired', 'kept') $$, '23514', null,
  'no settled row can keep a reason');

select * from finish();
rollback;
