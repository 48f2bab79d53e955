-- Quiet hours (docs/protocol.md, "Quiet hours"): private.quiet_until's windows (same day, across
-- midnight, days, zones, the end excluded), relay.set_quiet_hours refusing each bad window
-- with a sentence and storing nothing, "may wake me" per agent, relay.open_request opening
-- nothing in quiet hours, and nobody but the person's own session reading or writing
-- either table.
begin;
select plan(37);

select tests.create_supabase_user('ada', 'ada@test.example', 'Ada');
select tests.create_supabase_user('bob');
insert into public.location_shares (owner_id, viewer_id)
values (tests.get_supabase_uid('ada'), tests.get_supabase_uid('bob'));
create function pg_temp.quiet(p_at timestamptz, p_client text default 'agent-a', p_requester text default null)
returns jsonb language sql as $$
  select private.quiet_until(tests.get_supabase_uid('ada'), p_client, tests.get_supabase_uid(p_requester), p_at)
$$;
create function pg_temp.windows(p_windows jsonb) returns jsonb language sql as $$
  select relay.set_quiet_hours(tests.get_supabase_uid('ada'), p_windows)
$$;
grant execute on all functions in schema pg_temp to public;

-- ------------------------------------------------------------ setting windows
select tests.authenticate_as_relay();
select is(pg_temp.windows('[{"days":[7,1,2,3,4,5,6],"start":"22:00","end":"07:00","time_zone":"Europe/Berlin"}]'),
  '[{"days": [1, 2, 3, 4, 5, 6, 7], "start": "22:00", "end": "07:00", "time_zone": "Europe/Berlin"}]'::jsonb,
  'a window is stored with its days sorted, and returned as the phone sends it');
select throws_ok($$ select pg_temp.windows('[{"days":[1],"start":"22:00","end":"07:00","time_zone":"Mars/Olympus"}]') $$,
  '22023', 'window 1: unknown time zone (use an IANA name such as Europe/Berlin)', 'an unknown time zone is refused');
select throws_ok($$ select pg_temp.windows('[{"days":[1],"start":"01:00","end":"02:00","time_zone":"UTC"},
                                             {"days":[1],"start":"22:00","end":"22:00","time_zone":"UTC"}]') $$,
  '22023', 'window 2: the end must differ from the start', 'an end equal to its start is refused, naming the window');
select throws_ok($$ select pg_temp.windows('[{"days":[0,8],"start":"22:00","end":"07:00","time_zone":"UTC"}]') $$,
  '22023', 'window 1: days must be 1 to 7 ISO weekdays (1 = Monday)', 'a day outside 1-7 is refused');
select throws_ok($$ select pg_temp.windows('[{"days":["1"],"start":"22:00","end":"07:00","time_zone":"UTC"}]') $$,
  '22023', null, 'a day that is not a number is refused');
select throws_ok($$ select pg_temp.windows('[{"days":[1],"start":"24:00","end":"07:00","time_zone":"UTC"}]') $$,
  '22023', 'window 1: start and end must be times as HH:MM', 'a malformed time is refused');
select throws_ok($$ select pg_temp.windows('[{"days":[1],"start":"7:00","end":"07:00:30","time_zone":"UTC"}]') $$,
  '22023', 'window 1: start and end must be times as HH:MM', 'so are times without two digits or with seconds');
select throws_ok($$ select pg_temp.windows((select jsonb_agg('{"days":[1],"start":"01:00","end":"02:00","time_zone":"UTC"}'::jsonb)
                                            from generate_series(1, 9))) $$,
  '22023', 'quiet hours are a list of at most 8 windows', 'nine windows are refused');
select throws_ok($$ select pg_temp.windows('{"days":[1]}') $$, '22023', null, 'an object instead of a list is refused');
select is(relay.quiet_hours(tests.get_supabase_uid('ada')) -> 0 ->> 'time_zone', 'Europe/Berlin',
  'after every refusal the stored window is the one before');
reset role;
select is((select count(*)::int from public.quiet_hours), 1, 'and nothing else was stored');

-- ------------------------------------------------------------ when a window holds
-- 22:00-07:00 Berlin (UTC+1 in December), every day.
select is(pg_temp.quiet('2026-12-02 23:30+01'),
  jsonb_build_object('until', '2026-12-03 07:00+01'::timestamptz, 'local', '07:00', 'time_zone', 'Europe/Berlin'),
  'at 23:30 it holds until 07:00 the next morning');
select is(pg_temp.quiet('2026-12-03 06:59:59+01') ->> 'local', '07:00', 'at 06:59:59 it still holds');
select is(pg_temp.quiet('2026-12-03 07:00+01'), null, 'at 07:00 it has ended');
select is(pg_temp.quiet('2026-12-02 21:59+01'), null, 'at 21:59 it has not begun');
select is(pg_temp.quiet('2026-12-02 22:00+01') ->> 'local', '07:00', 'at 22:00 it begins');

select tests.authenticate_as_relay();
select pg_temp.windows('[{"days":[6],"start":"22:00","end":"07:00","time_zone":"Europe/Berlin"},
                         {"days":[1,2,3,4,5],"start":"09:00","end":"17:00","time_zone":"America/New_York"}]');
reset role;
select is(pg_temp.quiet('2026-12-06 01:00+01') ->> 'local', '07:00',
  'a window of Saturdays holds on Sunday at 01:00 (it started on Saturday)');
select is(pg_temp.quiet('2026-12-05 01:00+01'), null, 'but not on Saturday at 01:00 (that night started on Friday)');
select is(pg_temp.quiet('2026-12-02 17:00Z'),
  jsonb_build_object('until', '2026-12-02 22:00Z'::timestamptz, 'local', '17:00', 'time_zone', 'America/New_York'),
  'a working-day window in New York: Wednesday 12:00 there holds until 17:00 there');
select is(pg_temp.quiet('2026-12-05 17:00Z'), null, 'and not on a Saturday');

-- ------------------------------------------------------------ may wake me
select tests.authenticate_as_relay();
select is(relay.set_may_wake(tests.get_supabase_uid('ada'), 'agent-a', null, true),
  '[{"client_id": "agent-a", "client_name": "", "requester_id": null}]'::jsonb, 'an agent is marked; the list comes back');
select is(relay.set_may_wake(tests.get_supabase_uid('ada'), 'agent-a', null, true) -> 1, null, 'marking again adds nothing');
reset role;
select is(pg_temp.quiet('2026-12-02 17:00Z', 'agent-a'), null, 'a marked agent is let through');
select isnt(pg_temp.quiet('2026-12-02 17:00Z', 'agent-b'), null, 'another agent is not');
select isnt(pg_temp.quiet('2026-12-02 17:00Z', 'agent-a', 'bob'), null,
  'nor is the same agent asking for bob: the mark is per agent and requester');
select tests.authenticate_as_relay();
select throws_ok($$ select relay.set_may_wake(tests.get_supabase_uid('bob'), 'agent-a', tests.get_supabase_uid('ada'), true) $$,
  '42501', 'the requester does not see your location', 'only for a requester who is shared with');
select is(relay.set_may_wake(tests.get_supabase_uid('ada'), 'agent-a', null, false), '[]'::jsonb, 'the mark is cleared');

-- ------------------------------------------------------------ open_request in quiet hours
select pg_temp.windows(jsonb_build_array(jsonb_build_object('days', '[1,2,3,4,5,6,7]'::jsonb,
  'start', to_char(now() at time zone 'UTC' - interval '1 hour', 'HH24:MI'),
  'end', to_char(now() at time zone 'UTC' + interval '1 hour', 'HH24:MI'), 'time_zone', 'UTC')));
select relay.register_instance('relay-q');
select is((relay.open_request('00000000-0000-4000-8000-0000000000a1', tests.get_supabase_uid('ada'), null, 'agent-b', 'B',
  'relay-q', decode(repeat('ab', 32), 'hex'), now() + interval '60 seconds') - 'quiet'),
  '{"status": "quiet", "connections": null, "ping": null}'::jsonb, 'a request in quiet hours opens nothing');
select is((relay.open_request('00000000-0000-4000-8000-0000000000a2', tests.get_supabase_uid('ada'), null, 'agent-b', 'B',
  'relay-q', decode(repeat('ab', 32), 'hex'), now() + interval '60 seconds') -> 'quiet') - 'until' - 'until_ms',
  jsonb_build_object('local', to_char(now() at time zone 'UTC' + interval '1 hour', 'HH24:MI'), 'time_zone', 'UTC', 'name', 'Ada'),
  'and says until when, in the owner''s time, and whose quiet hours they are');
select relay.set_may_wake(tests.get_supabase_uid('ada'), 'agent-b', null, true);
select is(relay.open_request('00000000-0000-4000-8000-0000000000a3', tests.get_supabase_uid('ada'), null, 'agent-b', 'B',
  'relay-q', decode(repeat('ab', 32), 'hex'), now() + interval '60 seconds') ->> 'status', 'opened',
  'an agent that may wake the owner is asked as usual');
reset role;
select is((select array_agg(id::text order by id) from relay.pending_requests where owner_id = tests.get_supabase_uid('ada')),
  array['00000000-0000-4000-8000-0000000000a3'], 'only that request has a row');

-- ------------------------------------------------------------ nobody but the person
select tests.authenticate_as_agent('ada', 'agent-b');
select is_empty($$ select 1 from public.quiet_hours $$, 'an agent token reads no quiet hours');
select throws_ok($$ insert into public.quiet_hours (user_id, days, start_time, end_time, time_zone)
  values (tests.get_supabase_uid('ada'), '{1}', '01:00', '02:00', 'UTC') $$, '42501', null, 'nor writes any');
select is_empty($$ select 1 from public.may_wake_agents $$, 'nor reads who may wake the person');
select throws_ok($$ insert into public.may_wake_agents (user_id, client_id) values (tests.get_supabase_uid('ada'), 'agent-c') $$,
  '42501', null, 'nor can it mark itself');
select tests.authenticate_as('bob');
select is_empty($$ select 1 from public.quiet_hours $$, 'another person reads none of them');
select tests.authenticate_as('ada');
select is((select count(*)::int from public.quiet_hours), 1, 'the person reads their own');

select * from finish();
rollback;
