-- relay.open_request's common request in one statement (docs/benchmarks.md): the ping it builds in
-- place is private.locate_ping of the row it stored, field for field — for the owner's own
-- agent with and without an always-allow (an expired one gives none), a reason and a name
-- to be cleaned — and the requests it leaves to the longer path (on someone else's behalf,
-- an owner with quiet hours outside them) open as they did, with the same ping; the row is
-- stored once, and the cap still counts it.
begin;
select plan(9);

select tests.create_supabase_user('ada', 'ada@test.example', 'Ada');
select tests.create_supabase_user('bob', 'bob@test.example', 'Bob');
insert into public.devices (id, user_id, platform) values ('00000000-0000-4000-8000-00000000000a', tests.get_supabase_uid('ada'), 'ios');
insert into public.always_allowed_agents (user_id, client_id, precision) values
  (tests.get_supabase_uid('ada'), 'agent-always', 'approximate');
insert into public.always_allowed_agents (user_id, client_id, expires_at) values
  (tests.get_supabase_uid('ada'), 'agent-expired', now() - interval '1 minute');
insert into public.location_shares (owner_id, viewer_id) values (tests.get_supabase_uid('ada'), tests.get_supabase_uid('bob'));
create temp table opened (id uuid, v jsonb);
grant all on opened to public;
create function pg_temp.open(p_id uuid, p_client text, p_name text, p_reason text, p_requester text default null)
returns void language sql as $$
  insert into opened select p_id, relay.open_request(p_id, tests.get_supabase_uid('ada'), tests.get_supabase_uid(p_requester),
    p_client, p_name, 'relay-p', decode(repeat('cd', 32), 'hex'), now() + interval '90 seconds', 5, p_reason)
$$;
-- What private.locate_ping makes of the stored row, beside what open_request answered.
create function pg_temp.same_ping(p_id uuid) returns boolean language sql as $$
  select (select v -> 'ping' from opened where id = p_id)
         = (select private.locate_ping(r) from relay.pending_requests r where r.id = p_id)
$$;
grant execute on all functions in schema pg_temp to public;

select tests.authenticate_as_relay();
select relay.register_instance('relay-p');
select tests.device_hello('relay-p', '00000000-0000-4000-8000-0000000000c1', tests.get_supabase_uid('ada'),
  tests.get_session_id('ada'), '00000000-0000-4000-8000-00000000000a', 'Ada''s phone', 'ios', '2.1.0', now());

select pg_temp.open('00000000-0000-4000-8000-0000000000b1', 'agent-asks', E'My \u202Eagent\u200B ', 'to pick you up');
select pg_temp.open('00000000-0000-4000-8000-0000000000b2', 'agent-always', 'Always', null);
select pg_temp.open('00000000-0000-4000-8000-0000000000b3', 'agent-expired', null, null);
select pg_temp.open('00000000-0000-4000-8000-0000000000b4', 'agent-viewer', 'Bob''s agent', 'dinner', 'bob');
reset role;
select is((select array_agg(v ->> 'status' order by id) from opened), array['opened', 'opened', 'opened', 'opened'],
  'each request opens');
select ok(pg_temp.same_ping('00000000-0000-4000-8000-0000000000b1'),
  'the ping of the owner''s own agent is locate_ping''s (the name cleaned, the reason carried)');
select is((select v -> 'ping' ->> 'agent_name' from opened where id = '00000000-0000-4000-8000-0000000000b1'), 'My agent',
  'its name is cleaned of controls and spaces');
select ok(pg_temp.same_ping('00000000-0000-4000-8000-0000000000b2') and
          (select v -> 'ping' -> 'always_allow' from opened where id = '00000000-0000-4000-8000-0000000000b2')
            = '{"precision": "approximate"}'::jsonb,
  'an always-allowed agent''s ping carries the mark with its precision, as locate_ping''s');
select ok(pg_temp.same_ping('00000000-0000-4000-8000-0000000000b3') and
          (select v -> 'ping' -> 'always_allow' from opened where id = '00000000-0000-4000-8000-0000000000b3') = 'null'::jsonb,
  'an expired always-allow gives no mark');
select ok(pg_temp.same_ping('00000000-0000-4000-8000-0000000000b4') and
          (select v -> 'ping' -> 'requester' ->> 'name' from opened where id = '00000000-0000-4000-8000-0000000000b4') = 'Bob',
  'a request on someone else''s behalf (the longer path) has the same ping, naming the requester');

-- Quiet hours that are not now: the longer path opens it, with the same ping.
select relay.set_quiet_hours(tests.get_supabase_uid('ada'), jsonb_build_array(jsonb_build_object(
  'days', '[1,2,3,4,5,6,7]'::jsonb, 'start', to_char(now() at time zone 'UTC' + interval '2 hours', 'HH24:MI'),
  'end', to_char(now() at time zone 'UTC' + interval '3 hours', 'HH24:MI'), 'time_zone', 'UTC')));
select tests.authenticate_as_relay();
select pg_temp.open('00000000-0000-4000-8000-0000000000b5', 'agent-asks', 'Quiet', null);
reset role;
select ok((select v ->> 'status' from opened where id = '00000000-0000-4000-8000-0000000000b5') = 'opened'
          and pg_temp.same_ping('00000000-0000-4000-8000-0000000000b5'),
  'an owner with quiet hours outside them is asked, with the same ping');
select is((select count(*)::int from relay.pending_requests where id::text like '00000000-0000-4000-8000-0000000000b%'), 5,
  'each request is stored once');

-- The cap counts the rows the one statement stored: four of the owner's own agents' requests
-- wait (the viewer's counts apart), so a fifth opens and a sixth finds the cap full.
select tests.authenticate_as_relay();
select pg_temp.open('00000000-0000-4000-8000-0000000000b6', 'agent-asks', 'Fifth', null);
select pg_temp.open('00000000-0000-4000-8000-0000000000b7', 'agent-asks', 'Sixth', null);
reset role;
select is((select array_agg(v ->> 'status' order by id) from opened
           where id in ('00000000-0000-4000-8000-0000000000b6', '00000000-0000-4000-8000-0000000000b7')),
  array['opened', 'too_many'], 'a fifth request of the owner''s own agents opens, a sixth finds the cap full');

select * from finish();
rollback;
