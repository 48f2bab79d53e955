-- A pending request's rules: the seventeen CHECK constraints of
-- relay.pending_requests became one trigger (PostgreSQL planned each check again for every
-- statement). Each rule still refuses a row that breaks it, with 23514 and the name the
-- constraint had; a null passes as it did; settling still forgets the agent's reason and
-- cuts a call's resumable row to 30 seconds.
begin;
select plan(26);

select tests.create_supabase_user('ada');
create function pg_temp.row_with(p_set text) returns text language sql as $$
  select format($q$ insert into relay.pending_requests (id, owner_id, client_id, waiter_instance, reply_key, expires_at)
    values (gen_random_uuid(), %L, 'agent', 'relay-r', decode(repeat('ab', 32), 'hex'), now() + interval '1 minute') $q$,
    tests.get_supabase_uid('ada')) || p_set
$$;
create function pg_temp.refused(p_statement text, p_rule text) returns boolean language plpgsql as $$
begin
  execute p_statement;
  return false;
exception when check_violation then
  declare v_constraint text;
  begin
    get stacked diagnostics v_constraint = constraint_name;
    return v_constraint = p_rule;
  end;
end;
$$;

create function pg_temp.update_e1(p_set text) returns text language sql as $$
  select 'update relay.pending_requests set ' || p_set || ' where id = ''00000000-0000-4000-8000-0000000000e1'''
$$;

-- A row that keeps every rule goes in.
select lives_ok(pg_temp.row_with(''), 'a row that keeps the rules is stored');
insert into relay.pending_requests (id, owner_id, client_id, waiter_instance, reply_key, expires_at)
values ('00000000-0000-4000-8000-0000000000e1', tests.get_supabase_uid('ada'), 'agent', 'relay-r',
        decode(repeat('ab', 32), 'hex'), now() + interval '1 minute');

-- Each rule refuses what breaks it, under its constraint's name (SQLSTATE 23514).
select ok(pg_temp.refused($$ insert into relay.pending_requests (id, owner_id, client_id, waiter_instance, reply_key, expires_at)
  values (gen_random_uuid(), gen_random_uuid(), '', 'relay-r', decode(repeat('ab', 32), 'hex'), now()) $$,
  'pending_requests_client_id_check'), 'an empty client_id');
select ok(pg_temp.refused(replace(pg_temp.row_with(''), '''agent''', 'repeat(''a'', 256)'), 'pending_requests_client_id_check'),
  'a client_id of 256 characters');
select ok(pg_temp.refused(pg_temp.update_e1('client_name = repeat(''n'', 201)'), 'pending_requests_client_name_check'),
  'a client_name of 201 characters');
select ok(pg_temp.refused(replace(pg_temp.row_with(''), 'repeat(''ab'', 32)', 'repeat(''ab'', 31)'), 'pending_requests_reply_key_check'),
  'a reply_key of 31 bytes');
select ok(pg_temp.refused(pg_temp.update_e1('settled_at = now(), outcome = ''lost'''), 'pending_requests_outcome_check'),
  'an outcome outside the list');
select ok(pg_temp.refused(pg_temp.update_e1('reason = ''bored'''), 'pending_requests_reason_check'), 'a reason outside the list');
select ok(pg_temp.refused(pg_temp.update_e1('wake_kind = ''loud'', wake_claimed_at = now()'), 'pending_requests_wake_kind_check'),
  'a wake kind outside the list');
select ok(pg_temp.refused(pg_temp.update_e1('watcher_instance = ''relay r'''), 'pending_requests_watcher_instance_check'),
  'a watcher instance with a space');
select ok(pg_temp.refused(pg_temp.update_e1('ask_reason = '''''), 'pending_requests_ask_reason_check'), 'an empty ask reason');
select ok(pg_temp.refused(pg_temp.update_e1('ask_reason = repeat(''r'', 121)'), 'pending_requests_ask_reason_check'),
  'an ask reason of 121 characters');
select ok(pg_temp.refused(pg_temp.update_e1('outcome = ''denied'''), 'pending_requests_settled_has_outcome'),
  'an outcome without a settlement');
select ok(pg_temp.refused(pg_temp.update_e1('requester_id = owner_id'), 'pending_requests_requester_is_someone_else'),
  'the owner as their own requester');
select ok(pg_temp.refused(pg_temp.update_e1('wake_kind = ''alert'''), 'pending_requests_wake_kind_with_time'),
  'a wake kind without its time');
select ok(pg_temp.refused(pg_temp.update_e1('wake_kind = ''alert'', wake_claimed_at = now(), checking_claimed_at = now()'),
  'pending_requests_checking_after_silent_wake'), 'a checking alert after an alert wake');
select ok(pg_temp.refused(pg_temp.update_e1('realert_claimed_at = now()'), 'pending_requests_realert_after_wake'),
  'a re-alert without a wake');
select ok(pg_temp.refused(pg_temp.update_e1('resumable = true'), 'pending_requests_resumable_has_ttl'),
  'a resumable row without keep_until');
select ok(pg_temp.refused(pg_temp.update_e1('durable = true'), 'pending_requests_durable_is_resumable'),
  'a durable row that is not resumable');
select ok(pg_temp.refused(pg_temp.update_e1('wrapped_secret = ''\x00''::bytea'), 'pending_requests_wrapped_secret_size'),
  'a wrapped secret on a row that is not resumable');
select ok(pg_temp.refused(pg_temp.update_e1('resumable = true, keep_until = now() + interval ''1 minute'', wrapped_secret = ''\x00''::bytea'),
  'pending_requests_wrapped_secret_size'), 'a wrapped secret of one byte');
select ok(pg_temp.refused($$ insert into relay.pending_requests
  (id, owner_id, client_id, waiter_instance, reply_key, expires_at, settled_at, outcome, ask_reason)
  values (gen_random_uuid(), gen_random_uuid(), 'agent', 'relay-r', decode(repeat('ab', 32), 'hex'), now(), now(), 'expired', 'kept') $$,
  'pending_requests_reason_until_settled'), 'a settled row inserted with a reason');

-- A null passes, as it passed the checks.
select lives_ok(pg_temp.update_e1('client_name = null, reason = null, wake_kind = null, watcher_instance = null'),
  'nulls pass the rules');

-- What settling forgets.
update relay.pending_requests set ask_reason = 'To pick you up' where id = '00000000-0000-4000-8000-0000000000e1';
update relay.pending_requests set settled_at = now(), outcome = 'denied', reason = 'user'
where id = '00000000-0000-4000-8000-0000000000e1';
select is((select ask_reason from relay.pending_requests where id = '00000000-0000-4000-8000-0000000000e1'), null,
  'a request that settles forgets the agent''s reason');
insert into relay.pending_requests (id, owner_id, client_id, waiter_instance, reply_key, expires_at, resumable, keep_until)
values ('00000000-0000-4000-8000-0000000000e2', tests.get_supabase_uid('ada'), 'agent', 'relay-r',
        decode(repeat('ab', 32), 'hex'), now() + interval '1 minute', true, now() + interval '10 minutes');
update relay.pending_requests set settled_at = now(), outcome = 'denied', reason = 'user'
where id = '00000000-0000-4000-8000-0000000000e2';
select cmp_ok((select keep_until from relay.pending_requests where id = '00000000-0000-4000-8000-0000000000e2'), '<=',
  now() + interval '30 seconds', 'a call''s resumable row is kept 30 seconds once answered');

-- Neither the relay nor an API role can call the rules or write the table around them.
select ok(not has_function_privilege('whereabot_relay', 'private.pending_request_rules()', 'execute'),
  'the rules are not the relay''s to call');
select is((select count(*)::int from pg_constraint where conrelid = 'relay.pending_requests'::regclass and contype = 'c'), 0,
  'no CHECK constraint is left to plan per statement (the trigger holds the rules)');

select * from finish();
rollback;
