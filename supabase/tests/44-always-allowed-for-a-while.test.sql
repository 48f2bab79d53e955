-- Consent for a while, and approximately (docs/protocol.md, "Consent"): always_allowed_agents'
-- precision and expires_at; an expired row counts as absent in every function; an agent
-- can never add or extend its own row.
begin;
select plan(18);

select tests.create_supabase_user('ada', 'ada@test.example', 'Ada');
create temp table t (k text primary key, v jsonb);
grant all on t to public;

select tests.authenticate_as_relay();
insert into t values ('hour', relay.set_always_allowed(tests.get_supabase_uid('ada'), 'agent-hour', 'Hourly', null, true,
  'approximate', 3600));
select is((select (v -> 0) - 'expires_ms' from t where k = 'hour'),
  '{"client_id": "agent-hour", "client_name": "Hourly", "requester_id": null, "precision": "approximate",
    "last_used_ms": null}'::jsonb,
  'the list carries the precision (and no use yet)');
select ok((select (v -> 0 ->> 'expires_ms')::bigint between (extract(epoch from now() + interval '3599 seconds') * 1000)::bigint
  and (extract(epoch from now() + interval '3601 seconds') * 1000)::bigint from t where k = 'hour'),
  'and when an hour from now it ends');
select is(relay.is_always_allowed(tests.get_supabase_uid('ada'), 'agent-hour', null), true, 'until then it is allowed');
select is(relay.set_always_allowed(tests.get_supabase_uid('ada'), 'agent-ever', 'Ever', null, true) -> 1 -> 'expires_ms',
  'null'::jsonb, 'a plain Always allow never ends');
select is(relay.set_always_allowed(tests.get_supabase_uid('ada'), 'agent-ever', 'Ever', null, true) -> 1 ->> 'precision',
  'precise', 'and is precise unless said');
select throws_ok($$ select relay.set_always_allowed(tests.get_supabase_uid('ada'), 'agent-x', '', null, true, 'fuzzy') $$,
  '22023', 'precision is precise or approximate', 'an unknown precision is refused');
select throws_ok($$ select relay.set_always_allowed(tests.get_supabase_uid('ada'), 'agent-x', '', null, true, 'precise', 0) $$,
  '22023', 'expires_in_s must be from 1 to 86400 seconds', 'no time at all is refused');
select throws_ok($$ select relay.set_always_allowed(tests.get_supabase_uid('ada'), 'agent-x', '', null, true, 'precise', 86401) $$,
  '22023', null, 'so is more than a day');
reset role;

-- ------------------------------------------------------------ the boundary
update public.always_allowed_agents set expires_at = now() + interval '1 millisecond' where client_id = 'agent-hour';
select tests.authenticate_as_relay();
select is(relay.is_always_allowed(tests.get_supabase_uid('ada'), 'agent-hour', null), true, 'a millisecond before its end it counts');
reset role;
update public.always_allowed_agents set expires_at = now() where client_id = 'agent-hour';
select tests.authenticate_as_relay();
select is(relay.is_always_allowed(tests.get_supabase_uid('ada'), 'agent-hour', null), false, 'at its end it does not: the push asks');
select is((select jsonb_agg(a ->> 'client_id') from jsonb_array_elements(relay.always_allowed_agents(tests.get_supabase_uid('ada'))) a),
  '["agent-ever"]'::jsonb, 'nor is it in the list the phone gets');
reset role;
select is((select count(*)::int from public.always_allowed_agents where client_id = 'agent-hour'), 1,
  'the expired row may still be read from the table');
select tests.authenticate_as_relay();
select relay.set_always_allowed(tests.get_supabase_uid('ada'), 'agent-other', 'Other', null, true);
reset role;
select is((select count(*)::int from public.always_allowed_agents where client_id = 'agent-hour'), 0,
  'until the user''s next change deletes it');

-- ------------------------------------------------------------ nobody but the user
select tests.authenticate_as_agent('ada', 'agent-ever');
select throws_ok($$ insert into public.always_allowed_agents (user_id, client_id, expires_at)
  values (tests.get_supabase_uid('ada'), 'agent-sneaky', now() + interval '1 day') $$, '42501', null,
  'an agent cannot add a row');
select is_empty($$ update public.always_allowed_agents set expires_at = null, precision = 'precise'
  where client_id = 'agent-ever' returning 1 $$, 'nor extend or sharpen one, its own included');
select tests.authenticate_as('ada');
select is((select count(*)::int from public.always_allowed_agents where client_id = 'agent-ever'), 1,
  'the user''s own session reads the list');
select lives_ok($$ update public.always_allowed_agents set precision = 'approximate' where client_id = 'agent-ever' $$,
  'and changes it');
select throws_ok($$ update public.always_allowed_agents set precision = 'blurry' where client_id = 'agent-ever' $$,
  '23514', null, 'within the table''s checks');
select tests.clear_authentication();

select * from finish();
rollback;
