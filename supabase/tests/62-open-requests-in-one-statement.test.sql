-- relay.open_requests opens an owner's common requests in one statement (issue 43): each
-- request of the batch gets what relay.open_request would answer — its ping is
-- private.locate_ping of the stored row (a name and a reason cleaned, an always-allow's
-- precision) — and the requests it leaves to relay.open_request (counted by a wrapper under
-- its name) are an owner's whose sockets are also on another instance, with quiet hours,
-- with a request named twice or stored already, or without room for all of them.
begin;
select plan(20);

select tests.create_supabase_user('ada', 'ada@example.com', 'Ada');
select tests.create_supabase_user('bob', 'bob@example.com', 'Bob');
select tests.create_supabase_user('cy', 'cy@example.com', 'Cy');
select tests.create_supabase_user('di', 'di@example.com', 'Di');
create temp table ids (k text primary key, v uuid);
insert into ids values ('ada', tests.get_supabase_uid('ada')), ('bob', tests.get_supabase_uid('bob')),
  ('cy', tests.get_supabase_uid('cy')), ('di', tests.get_supabase_uid('di'));
grant select on ids to public;
insert into public.always_allowed_agents (user_id, client_id, precision)
  values ((select v from ids where k = 'ada'), 'always', 'approximate');
insert into public.always_allowed_agents (user_id, client_id, expires_at)
  values ((select v from ids where k = 'ada'), 'expired', now() - interval '1 minute');

create function pg_temp.req(p_id text, p_owner text, p_client text default 'claude', p_name text default 'Claude',
  p_reason text default null, p_max int default 5)
returns jsonb language sql as $$
  select jsonb_strip_nulls(jsonb_build_object('id', p_id, 'owner', (select v from ids where k = p_owner),
    'client_id', p_client, 'client_name', p_name, 'reply_key', repeat('A', 43) || '=',
    'expires_at', extract(epoch from now() + interval '5 minutes'), 'max_waiting', p_max, 'reason', p_reason))
$$;
-- What private.locate_ping makes of the stored row, beside what open_requests answered.
create function pg_temp.same_ping(p_result jsonb) returns boolean language sql as $$
  select p_result -> 'ping' = (select private.locate_ping(r) from relay.pending_requests r
                               where r.id = (p_result -> 'ping' ->> 'id')::uuid)
$$;
-- relay.open_request's calls in this transaction, counted by a wrapper under its name.
create temp sequence open_calls;
alter function relay.open_request(uuid, uuid, uuid, text, text, text, bytea, timestamptz, int, text) rename to open_request_counted;
create function relay.open_request(p_id uuid, p_owner uuid, p_requester uuid, p_client_id text, p_client_name text,
  p_instance text, p_reply_key bytea, p_expires_at timestamptz, p_max_waiting int default 5, p_reason text default null)
returns jsonb language plpgsql security definer set search_path = '' as $$
begin
  perform nextval('pg_temp.open_calls');
  return relay.open_request_counted(p_id, p_owner, p_requester, p_client_id, p_client_name, p_instance, p_reply_key,
    p_expires_at, p_max_waiting, p_reason);
end;
$$;
grant execute on function relay.open_request(uuid, uuid, uuid, text, text, text, bytea, timestamptz, int, text) to whereabot_relay;
create function pg_temp.open_calls() returns bigint language sql as $$
  select case when is_called then last_value else 0 end from pg_temp.open_calls
$$;
grant execute on all functions in schema pg_temp to public;

-- Ada's phone is on relay-one; Bob's on relay-one and relay-two; Cy has quiet hours (not
-- now); Di has no phone connected.
select relay.set_quiet_hours((select v from ids where k = 'cy'), jsonb_build_array(jsonb_build_object(
  'days', '[1,2,3,4,5,6,7]'::jsonb, 'start', to_char(now() at time zone 'UTC' + interval '2 hours', 'HH24:MI'),
  'end', to_char(now() at time zone 'UTC' + interval '3 hours', 'HH24:MI'), 'time_zone', 'UTC')));
select tests.authenticate_as_relay();
select relay.register_instance('relay-one');
select relay.register_instance('relay-two');
select tests.device_hello('relay-one', '00000000-0000-4000-8000-00000000c0a1', (select v from ids where k = 'ada'),
  tests.get_session_id('ada'), '00000000-0000-4000-8000-00000000d0a1', 'Ada phone', 'ios', '1', now());
select tests.device_hello('relay-one', '00000000-0000-4000-8000-00000000c0b1', (select v from ids where k = 'bob'),
  tests.get_session_id('bob'), '00000000-0000-4000-8000-00000000d0b1', 'Bob phone', 'ios', '1', now());
select tests.device_hello('relay-two', '00000000-0000-4000-8000-00000000c0b2', (select v from ids where k = 'bob'),
  tests.get_session_id('bob'), '00000000-0000-4000-8000-00000000d0b2', 'Bob tablet', 'android', '1', now());

create temp table results as select relay.open_requests('relay-one', jsonb_build_array(
  pg_temp.req('00000000-0000-4000-8000-0000000000a1', 'ada', 'claude', E'My \u202Eagent\u200B ', 'to pick you up'),
  pg_temp.req('00000000-0000-4000-8000-0000000000a2', 'ada', 'always', 'Always'),
  pg_temp.req('00000000-0000-4000-8000-0000000000b1', 'bob'),
  pg_temp.req('00000000-0000-4000-8000-0000000000c1', 'cy'),
  pg_temp.req('00000000-0000-4000-8000-0000000000d1', 'di'),
  pg_temp.req('00000000-0000-4000-8000-0000000000d2', 'di'),
  pg_temp.req('00000000-0000-4000-8000-0000000000a9', 'ada', 'expired', 'Expired')
)) as r;
reset role;

select is((select jsonb_agg(e ->> 'status') from results, jsonb_array_elements(r) e),
  '["opened", "opened", "opened", "opened", "opened", "opened", "opened"]'::jsonb, 'every request opens');
select is(pg_temp.open_calls(), 2::bigint,
  'Ada''s and Di''s five in one statement; Bob''s (a socket on another instance) and Cy''s (quiet hours) by open_request');
select ok(pg_temp.same_ping((select r -> 0 from results)), 'a ping made in the statement is locate_ping''s');
select is((select r -> 0 -> 'ping' ->> 'agent_name' || '/' || (r -> 0 -> 'ping' ->> 'reason') || '/' || (r -> 0 ->> 'connections')
           from results), 'My agent/to pick you up/1', 'its name cleaned, its reason carried, the owner''s sockets counted');
select ok(pg_temp.same_ping((select r -> 1 from results))
          and (select r -> 1 -> 'ping' -> 'always_allow' from results) = '{"precision": "approximate"}'::jsonb,
  'an always-allowed agent''s ping carries the mark with its precision');
select ok(pg_temp.same_ping((select r -> 6 from results))
          and (select r -> 6 -> 'ping' -> 'always_allow' from results) = 'null'::jsonb,
  'an expired always-allow gives no mark');
select ok(pg_temp.same_ping((select r -> 2 from results)), 'open_request''s ping for the owner with two instances');
select is((select r -> 4 from results), '{"status": "opened", "connections": 0, "ping": null}'::jsonb,
  'no ping where the owner has no socket');
select is((select count(*)::int from relay.pending_requests), 7, 'each stored once');
select is((select array_agg(waiter_instance || '/' || (requester_id is null)::text || '/' || coalesce(ask_reason, '-')
                            order by id)
           from relay.pending_requests where owner_id = (select v from ids where k = 'ada')),
  array['relay-one/true/to pick you up', 'relay-one/true/-', 'relay-one/true/-'], 'the rows as open_request stores them');

-- The cap: Di has two waiting; four more under a cap of 5 go to open_request, three fit.
grant usage, select on sequence pg_temp.open_calls to public;
select tests.authenticate_as_relay();
select is((select jsonb_agg(e ->> 'status') from jsonb_array_elements(relay.open_requests('relay-one', jsonb_build_array(
  pg_temp.req('00000000-0000-4000-8000-0000000000d3', 'di'), pg_temp.req('00000000-0000-4000-8000-0000000000d4', 'di'),
  pg_temp.req('00000000-0000-4000-8000-0000000000d5', 'di'), pg_temp.req('00000000-0000-4000-8000-0000000000d6', 'di')))) e),
  '["opened", "opened", "opened", "too_many"]'::jsonb,
  'requests of an owner without room for all of them are opened one by one, up to the cap');
select is(pg_temp.open_calls(), 6::bigint, 'by open_request');
select is((select jsonb_agg(e ->> 'status') from jsonb_array_elements(relay.open_requests('relay-one', jsonb_build_array(
  pg_temp.req('00000000-0000-4000-8000-0000000000a3', 'ada'), pg_temp.req('00000000-0000-4000-8000-0000000000a3', 'ada'),
  pg_temp.req('00000000-0000-4000-8000-0000000000a1', 'ada')))) e), '["opened", "exists", "exists"]'::jsonb,
  'a request named twice, or stored already, is told apart as open_request tells it');
select is(pg_temp.open_calls(), 9::bigint, 'by open_request');
select is(relay.open_requests('relay-one', jsonb_build_array(
  pg_temp.req('00000000-0000-4000-8000-0000000000b2', 'bob'), pg_temp.req('00000000-0000-4000-8000-0000000000a4', 'ada'))) -> 1
    -> 'ping' ->> 'id', '00000000-0000-4000-8000-0000000000a4', 'beside an owner open_request opens, another opens in the statement');
select is(pg_temp.open_calls(), 10::bigint, 'with one call of open_request, for the first owner');
select is(relay.open_requests('relay-one', jsonb_build_array(pg_temp.req('00000000-0000-4000-8000-0000000000e1', 'ada')
    || jsonb_build_object('owner', '00000000-0000-4000-8000-00000000dead'))),
  '[{"status": "error", "code": "P0002"}]'::jsonb, 'an unknown owner''s request is refused, as open_request refuses it');
select is(relay.open_requests('relay-one', jsonb_build_array(pg_temp.req('00000000-0000-4000-8000-0000000000e2', 'ada')
    || jsonb_build_object('expires_at', extract(epoch from now() - interval '1 second')))),
  '[{"status": "error", "code": "22023"}]'::jsonb, 'so is one that has expired');
select is(relay.open_requests('relay-one', jsonb_build_array(pg_temp.req('00000000-0000-4000-8000-0000000000e3', 'ada')
    || jsonb_build_object('reason', repeat('x', 121)))),
  '[{"status": "error", "code": "22023"}]'::jsonb, 'and one whose reason is too long');
reset role;
select is((select count(*)::int from relay.pending_requests where id::text like '00000000-0000-4000-8000-0000000000e%'), 0,
  'none of them is stored');

select * from finish();
rollback;
