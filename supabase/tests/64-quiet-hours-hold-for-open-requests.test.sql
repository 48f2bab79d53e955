-- Quiet hours hold for a request already open (docs/agents.md, "Quiet hours"): a window
-- that begins while a request waits keeps its ping out of the pings a hello gets
-- (relay.device_hellos) and of the backstop poll (relay.pending_locates_on), and every
-- push stage (relay.claim_push: wake, checking, realert) is refused as not_applicable,
-- unclaimed, by the rule relay.open_request uses (private.quiet_until): an agent the
-- owner lets wake them, for the owner or for one requester, still passes. The request
-- stays open, and reaches the phone once the window is gone.
begin;
select plan(18);

select tests.create_supabase_user('ada', 'ada@test.example', 'Ada');
select tests.create_supabase_user('bob');
insert into public.location_shares (owner_id, viewer_id)
values (tests.get_supabase_uid('ada'), tests.get_supabase_uid('bob'));
insert into public.devices (id, user_id, platform) values
  ('00000000-0000-4000-8000-00000000000a', tests.get_supabase_uid('ada'), 'ios');
insert into public.push_tokens (token, user_id, device_id, environment) values
  (repeat('a1', 32), tests.get_supabase_uid('ada'), '00000000-0000-4000-8000-00000000000a', 'production');
insert into public.always_allowed_agents (user_id, client_id) values (tests.get_supabase_uid('ada'), 'agent-always');

-- Requests for ada's phones: e1 by agent-asks, e2 by agent-always (a silent wake), e3 by
-- agent-wakes (ada lets it wake her), e4 by bob's agent-wakes (let through for bob), e5
-- by bob's agent-asks.
create function pg_temp.open(p_n int, p_client text, p_requester text default null) returns jsonb language sql as $$
  select relay.open_request(('00000000-0000-4000-8000-0000000000e' || p_n)::uuid, tests.get_supabase_uid('ada'),
    tests.get_supabase_uid(p_requester), p_client, 'A', 'relay-r', decode(repeat('ab', 32), 'hex'),
    now() + interval '5 minutes')
$$;
create function pg_temp.id(p_n int) returns uuid language sql as $$
  select ('00000000-0000-4000-8000-0000000000e' || p_n)::uuid
$$;
create function pg_temp.claim(p_n int, p_stage text) returns jsonb language sql as $$
  select relay.claim_push(pg_temp.id(p_n), 'relay-r', p_stage)
$$;
create function pg_temp.ids(p_pings jsonb) returns text language sql as $$
  select string_agg(right(p ->> 'id', 2), ',' order by p ->> 'id') from jsonb_array_elements(p_pings) p
$$;
create function pg_temp.hello() returns jsonb language sql as $$
  select relay.device_hellos('relay-r', jsonb_build_array(jsonb_build_object(
    'connection', gen_random_uuid(), 'user', tests.get_supabase_uid('ada'), 'session', tests.get_session_id('ada'),
    'device', '00000000-0000-4000-8000-00000000000a', 'name', 'Phone', 'platform', 'ios', 'app_version', '1',
    'opened_at', clock_timestamp())))
$$;
create function pg_temp.polled() returns text language sql as $$
  select pg_temp.ids(coalesce(jsonb_agg(message), '[]')) from relay.pending_locates_on('relay-r')
$$;
grant execute on all functions in schema pg_temp to public;

select tests.authenticate_as_relay();
select relay.register_instance('relay-r');
select pg_temp.open(1, 'agent-asks'), pg_temp.open(2, 'agent-always'), pg_temp.open(3, 'agent-wakes'),
       pg_temp.open(4, 'agent-wakes', 'bob'), pg_temp.open(5, 'agent-asks', 'bob');
select relay.set_may_wake(tests.get_supabase_uid('ada'), 'agent-wakes', null, true);
select relay.set_may_wake(tests.get_supabase_uid('ada'), 'agent-wakes', tests.get_supabase_uid('bob'), true);
-- Before quiet hours: e1 and e5 are alerted, e2 wakes silently (nobody connected).
select is(pg_temp.claim(1, 'wake') ->> 'kind', 'alert', 'before the window: e1''s wake alert');
select is(pg_temp.claim(2, 'wake') ->> 'kind', 'silent', 'e2''s silent wake');
select is(pg_temp.claim(5, 'wake') ->> 'kind', 'alert', 'e5''s wake alert');

-- Quiet hours begin: a window (UTC, every day) from an hour ago to an hour ahead; near
-- midnight its end is earlier than its start, and it crosses midnight.
reset role;
insert into public.quiet_hours (user_id, days, start_time, end_time, time_zone)
values (tests.get_supabase_uid('ada'), '{1,2,3,4,5,6,7}',
        date_trunc('minute', (now() at time zone 'UTC')::time - interval '1 hour'),
        date_trunc('minute', (now() at time zone 'UTC')::time + interval '1 hour'), 'UTC');
select isnt(private.quiet_until(tests.get_supabase_uid('ada'), 'agent-asks', null, now()), null,
  'the window holds now for agent-asks');
select tests.authenticate_as_relay();

select is(pg_temp.ids((select jsonb_agg(p -> 'message') from jsonb_array_elements(pg_temp.hello() -> 'pending') p)),
  'e3,e4', 'a phone saying hello in quiet hours gets only the pings of agents that may wake its owner');
select is(pg_temp.polled(), 'e3,e4', 'and so does the backstop poll');

select is(pg_temp.claim(1, 'realert') ->> 'status', 'not_applicable', 'e1''s re-alert is not sent in quiet hours');
select is(pg_temp.claim(1, 'realert') -> 'quiet' ->> 'time_zone', 'UTC', 'the claim says quiet hours hold');
select is(pg_temp.claim(2, 'checking') ->> 'status', 'not_applicable', 'nor e2''s checking alert');
select is(pg_temp.claim(5, 'realert') ->> 'status', 'not_applicable', 'nor the re-alert of bob''s agent');
select is(pg_temp.claim(3, 'wake') ->> 'status', 'claimed', 'an agent ada lets wake her is pushed');
select is(pg_temp.claim(4, 'wake') ->> 'status', 'claimed', 'and so is the one she lets wake her for bob');
reset role;
select is((select count(*)::int from relay.pending_requests
           where id in (pg_temp.id(1), pg_temp.id(2), pg_temp.id(5))
             and settled_at is null and realert_claimed_at is null and checking_claimed_at is null), 3,
  'the requests held back stay open, their stages unclaimed');

-- The window is gone: the requests reach the phone, and their stages are claimed.
delete from public.quiet_hours where user_id = tests.get_supabase_uid('ada');
select tests.authenticate_as_relay();
select is(pg_temp.polled(), 'e1,e2,e3,e4,e5', 'after the window the backstop poll sends every waiting ping');
select is(pg_temp.ids((select jsonb_agg(p -> 'message') from jsonb_array_elements(pg_temp.hello() -> 'pending') p)),
  'e1,e2,e3,e4,e5', 'and so does a hello');
select is(pg_temp.claim(1, 'realert') ->> 'status', 'claimed', 'e1 is re-alerted');
select is(pg_temp.claim(2, 'checking') ->> 'status', 'claimed', 'e2 gets its checking alert');
select is(pg_temp.claim(5, 'realert') ->> 'status', 'claimed', 'bob''s agent''s request is re-alerted');

select * from finish();
rollback;
