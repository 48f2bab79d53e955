-- relay.settle_many settles its common answers in one statement (docs/architecture.md, "One instance"): an unsealed
-- answer to a call waiting on the caller's instance, from a device of the owner, with no
-- other instance holding the owner's sockets and no always-allowed agent to note. Every
-- other answer still goes through relay.settle, so that what it would notify, keep, note
-- or refuse is notified, kept, noted or refused as before.
begin;
select plan(12);

select tests.create_supabase_user('ada', 'ada@example.com', 'Ada');
select tests.create_supabase_user('bob', 'bob@example.com', 'Bob');
select tests.create_supabase_user('cy', 'cy@example.com', 'Cy');
create temp table ids (k text primary key, v uuid);
insert into ids values ('ada', tests.get_supabase_uid('ada')), ('bob', tests.get_supabase_uid('bob')),
  ('cy', tests.get_supabase_uid('cy'));
grant select on ids to public;
insert into public.always_allowed_agents (user_id, client_id, client_name)
  values ((select v from ids where k = 'cy'), 'claude', 'Claude');

create function pg_temp.req(p_id text, p_owner text) returns jsonb language sql as $$
  select jsonb_build_object('id', p_id, 'owner', (select v from ids where k = p_owner), 'client_id', 'claude',
    'client_name', 'Claude', 'reply_key', repeat('A', 43) || '=', 'expires_at', extract(epoch from now() + interval '5 minutes'),
    'max_waiting', 20)
$$;
create function pg_temp.answer(p_id text, p_owner text, p_outcome text, p_reason text default null, p_device text default null)
returns jsonb language sql as $$
  select jsonb_strip_nulls(jsonb_build_object('id', p_id, 'user', (select v from ids where k = p_owner), 'device', p_device,
    'outcome', p_outcome, 'reason', p_reason))
$$;
grant execute on all functions in schema pg_temp to public;

-- Ada's and Cy's phones are on relay-one only; Bob has one there and one on relay-two.
select tests.authenticate_as_relay();
select relay.register_instance('relay-one');
select relay.register_instance('relay-two');
select tests.device_hello('relay-one', '00000000-0000-4000-8000-00000000c0a1', (select v from ids where k = 'ada'),
  tests.get_session_id('ada'), '00000000-0000-4000-8000-00000000d0a1', 'Ada phone', 'ios', '1', now());
select tests.device_hello('relay-one', '00000000-0000-4000-8000-00000000c0b1', (select v from ids where k = 'bob'),
  tests.get_session_id('bob'), '00000000-0000-4000-8000-00000000d0b1', 'Bob phone', 'ios', '1', now());
select tests.device_hello('relay-two', '00000000-0000-4000-8000-00000000c0b2', (select v from ids where k = 'bob'),
  tests.get_session_id('bob'), '00000000-0000-4000-8000-00000000d0b2', 'Bob tablet', 'android', '1', now());
select tests.device_hello('relay-one', '00000000-0000-4000-8000-00000000c0c1', (select v from ids where k = 'cy'),
  tests.get_session_id('cy'), '00000000-0000-4000-8000-00000000d0c1', 'Cy phone', 'ios', '1', now());
select relay.open_requests('relay-one', jsonb_build_array(
  pg_temp.req('00000000-0000-4000-8000-0000000000a1', 'ada'), pg_temp.req('00000000-0000-4000-8000-0000000000a2', 'ada'),
  pg_temp.req('00000000-0000-4000-8000-0000000000a3', 'ada'), pg_temp.req('00000000-0000-4000-8000-0000000000b1', 'bob'),
  pg_temp.req('00000000-0000-4000-8000-0000000000c1', 'cy')));
select relay.open_requests('relay-one', jsonb_build_array(
  pg_temp.req('00000000-0000-4000-8000-0000000000a7', 'ada'), pg_temp.req('00000000-0000-4000-8000-0000000000a8', 'ada'),
  pg_temp.req('00000000-0000-4000-8000-0000000000a9', 'ada'), pg_temp.req('00000000-0000-4000-8000-0000000000aa', 'ada'),
  pg_temp.req('00000000-0000-4000-8000-0000000000ab', 'ada')));
select relay.open_requests('relay-two', jsonb_build_array(pg_temp.req('00000000-0000-4000-8000-0000000000a4', 'ada'),
  pg_temp.req('00000000-0000-4000-8000-0000000000a5', 'ada')));
reset role;
-- A call that may be resumed (its answer is kept sealed), waiting on relay-one too.
insert into relay.pending_requests (id, owner_id, client_id, waiter_instance, reply_key, expires_at, resumable, keep_until)
values ('00000000-0000-4000-8000-0000000000a6', (select v from ids where k = 'ada'), 'claude', 'relay-one',
  decode(repeat('A', 43) || '=', 'base64'), now() + interval '5 minutes', true, now() + interval '10 minutes');
-- A call another instance watches (a durable request's poll there is told the answer).
insert into relay.pending_requests (id, owner_id, client_id, waiter_instance, reply_key, expires_at, watcher_instance)
values ('00000000-0000-4000-8000-0000000000ac', (select v from ids where k = 'ada'), 'claude', 'relay-one',
  decode(repeat('A', 43) || '=', 'base64'), now() + interval '5 minutes', 'relay-two');
select tests.device_hello('relay-one', '00000000-0000-4000-8000-00000000c0a2', (select v from ids where k = 'ada'),
  tests.get_session_id('ada'), '00000000-0000-4000-8000-00000000d0a2', 'Ada watch', 'ios', '1', now());
update public.devices set revoked_at = now() where id = '00000000-0000-4000-8000-00000000d0a1';

-- relay.settle's calls in this transaction, counted by a wrapper under its name, to tell
-- which answers took it (rolled back with the rest).
create temp sequence settle_calls;
alter function relay.settle(uuid, uuid, uuid, text, text, text, text, int) rename to settle_counted;
create function relay.settle(p_id uuid, p_user uuid, p_device uuid, p_outcome text, p_reason text, p_sealed text,
  p_instance text default null, p_remind_after_s int default null)
returns text language plpgsql security definer set search_path = '' as $$
begin
  perform nextval('pg_temp.settle_calls');
  return relay.settle_counted(p_id, p_user, p_device, p_outcome, p_reason, p_sealed, p_instance, p_remind_after_s);
end;
$$;
grant execute on function relay.settle(uuid, uuid, uuid, text, text, text, text, int) to whereabot_relay;
create function pg_temp.settle_calls() returns bigint language sql as $$
  select case when is_called then last_value else 0 end from pg_temp.settle_calls
$$;
grant execute on all functions in schema pg_temp to public;

-- A batch no answer of which is refused: the common ones settle in one statement.
select tests.authenticate_as_relay();
create temp table results as select relay.settle_many('relay-one', jsonb_build_array(
  pg_temp.answer('00000000-0000-4000-8000-0000000000a1', 'ada', 'location', null, '00000000-0000-4000-8000-00000000d0a2'),
  pg_temp.answer('00000000-0000-4000-8000-0000000000a2', 'ada', 'denied', 'user'),
  pg_temp.answer('00000000-0000-4000-8000-0000000000a3', 'ada', 'denied', 'user', '00000000-0000-4000-8000-00000000d0a1'),
  pg_temp.answer('00000000-0000-4000-8000-0000000000b1', 'bob', 'unavailable', 'no_fix', '00000000-0000-4000-8000-00000000d0b1'),
  pg_temp.answer('00000000-0000-4000-8000-0000000000c1', 'cy', 'location', null, '00000000-0000-4000-8000-00000000d0c1'),
  pg_temp.answer('00000000-0000-4000-8000-0000000000a5', 'ada', 'denied', 'no_answer'),
  pg_temp.answer('00000000-0000-4000-8000-0000000000a2', 'ada', 'unavailable', 'permission'),
  pg_temp.answer('00000000-0000-4000-8000-0000000000a7', 'bob', 'denied', 'user'),
  pg_temp.answer('00000000-0000-4000-8000-0000000000a8', 'ada', 'unavailable', 'permission'),
  pg_temp.answer('00000000-0000-4000-8000-0000000000ac', 'ada', 'denied', 'user')
)) as r;
reset role;

select is((select r from results), '[{"status": "settled"}, {"status": "settled"}, {"status": "forbidden"},
  {"status": "settled"}, {"status": "settled"}, {"status": "settled"}, {"status": "gone"}, {"status": "forbidden"},
  {"status": "settled"}, {"status": "settled"}]'::jsonb, 'a status per answer, in order');
select is(pg_temp.settle_calls(), 8::bigint,
  'the two common answers settled in one statement, the eight others by relay.settle');
select is((select outcome || '/' || coalesce(reason, '-') || '/' || answered_by::text || '/' || (settled_at = now())::text
             || '/' || (delivered_at is not null)::text
           from relay.pending_requests where id = '00000000-0000-4000-8000-0000000000a1'),
  'location/-/00000000-0000-4000-8000-00000000d0a2/true/true',
  'a common answer''s row as relay.settle leaves it: the outcome, the answering device, settled and delivered now');
select is((select outcome || '/' || reason || '/' || (answered_by is null)::text
           from relay.pending_requests where id = '00000000-0000-4000-8000-0000000000a8'),
  'unavailable/permission/true', 'and one without a device');
select is((select outcome || '/' || reason from relay.pending_requests where id = '00000000-0000-4000-8000-0000000000a2'),
  'denied/user', 'a request answered twice in the batch has the first answer (in the elements'' order)');
select is((select settled_at from relay.pending_requests where id = '00000000-0000-4000-8000-0000000000a3'), null,
  'a removed device''s answer settles nothing');
select isnt((select last_used_at from public.always_allowed_agents where user_id = (select v from ids where k = 'cy')), null,
  'a location for an always-allowed agent notes its use, as relay.settle does');
select is((select settled_at from relay.pending_requests where id = '00000000-0000-4000-8000-0000000000a7'), null,
  'another user''s answer settles nothing');

-- Answers relay.settle refuses are refused though the batch has common ones: the first
-- pass is undone and every answer goes alone.
select tests.authenticate_as_relay();
select is(relay.settle_many('relay-one', jsonb_build_array(
  pg_temp.answer('00000000-0000-4000-8000-0000000000a4', 'ada', 'location'),
  pg_temp.answer('00000000-0000-4000-8000-0000000000a6', 'ada', 'location'),
  pg_temp.answer('00000000-0000-4000-8000-0000000000a9', 'ada', 'denied', 'user'))),
  '[{"status": "error", "code": "22023"}, {"status": "error", "code": "22023"}, {"status": "settled"}]'::jsonb,
  'an unsealed location for another instance''s waiter, or for a call that may be resumed, is refused; the common answer settles');
select is(relay.settle_many('relay-one', jsonb_build_array(
  pg_temp.answer('00000000-0000-4000-8000-0000000000a6', 'ada', 'location'),
  pg_temp.answer('00000000-0000-4000-8000-0000000000aa', 'ada', 'denied', 'user'))),
  '[{"status": "error", "code": "22023"}, {"status": "settled"}]'::jsonb,
  'the resumable call''s location is refused beside a common answer alone');
select is(relay.settle_many('relay-one', jsonb_build_array(
  pg_temp.answer('00000000-0000-4000-8000-0000000000a4', 'ada', 'location'),
  pg_temp.answer('00000000-0000-4000-8000-0000000000ab', 'ada', 'denied', 'user'))),
  '[{"status": "error", "code": "22023"}, {"status": "settled"}]'::jsonb,
  'and so is the location for another instance''s waiter');
reset role;
select is((select count(*)::int from relay.pending_requests where settled_at is not null and id in (
  '00000000-0000-4000-8000-0000000000a4', '00000000-0000-4000-8000-0000000000a6')), 0, 'the refused ones still wait');

select * from finish();
rollback;
