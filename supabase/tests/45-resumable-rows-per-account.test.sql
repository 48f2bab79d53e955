-- Resumable rows are bounded per account first (docs/database.md, "Limits"): an account's rows,
-- settled ones included, stop at 500; a table past 10,000 refuses only accounts holding
-- their fair share; a call answered within the call keeps its row 30 seconds, not minutes.
begin;
select plan(11);

select tests.create_supabase_user('ada');
select tests.create_supabase_user('bob');
select tests.create_supabase_user('cy');
select tests.create_supabase_user('mallory');

-- Rows of USER, settled (cancelled tasks kept for their TTL), as many as N.
create function pg_temp.kept_rows(p_user uuid, p_n int) returns void language sql as $$
  insert into relay.pending_requests (id, owner_id, client_id, waiter_instance, reply_key, expires_at, settled_at,
                                      outcome, resumable, durable, keep_until)
  select gen_random_uuid(), p_user, 'client-' || (i % 7), 'relay-a', decode(repeat('ab', 32), 'hex'),
         now() + interval '5 minutes', now(), 'abandoned', true, true, now() + interval '10 minutes'
  from generate_series(1, p_n) i
$$;

create function pg_temp.open(p_user text, p_client text, p_durable boolean default true) returns text
language sql as $$
  select relay.open_durable_request(gen_random_uuid(), tests.get_supabase_uid(p_user), null, p_client, null, null,
    'relay-a', decode(repeat('ab', 32), 'hex'), now() + interval '60 seconds', now() + interval '70 seconds',
    p_durable, null)->>'status'
$$;
grant execute on function pg_temp.open(text, text, boolean) to whereabot_relay;

-- ---------------------------------------------------------------- per account, settled rows included
select pg_temp.kept_rows(tests.get_supabase_uid('ada'), 499);
select tests.authenticate_as_relay();
select is(pg_temp.open('ada', 'client-new'), 'opened', 'an account with 499 kept rows opens its 500th');
select is(pg_temp.open('ada', 'client-other'), 'too_many',
  'its 501st is refused, though 499 of its rows are settled and no credential has 20 open');
select is(pg_temp.open('bob', 'client-new'), 'opened', 'another account is not refused for it');
reset role;

-- ---------------------------------------------------------------- a full table refuses only those over their share
select pg_temp.kept_rows(tests.get_supabase_uid('mallory'), 10000);
select pg_temp.kept_rows(tests.get_supabase_uid('cy'), 50);
select tests.authenticate_as_relay();
select is(pg_temp.open('mallory', 'client-0'), 'too_many', 'the account that filled the table is over its own cap');
select is(pg_temp.open('cy', 'client-new'), 'full', 'past 10,000 rows an account holding its fair share (50) is refused');
select is(pg_temp.open('bob', 'client-new'), 'opened', 'an account holding fewer still opens');
reset role;

-- ---------------------------------------------------------------- a call answered in the call is forgotten soon
select tests.authenticate_as_relay();
select pg_temp.open('bob', 'client-call', false);
reset role;
create temporary table call_row as
  select id from relay.pending_requests where client_id = 'client-call' and owner_id = tests.get_supabase_uid('bob');
grant select on call_row to whereabot_relay;
select tests.authenticate_as_relay();
select is(relay.finish((select id from call_row), 'relay-a', 'abandoned')->>'status', 'finished', 'the call hangs up');
reset role;
select cmp_ok((select keep_until from relay.pending_requests where id = (select id from call_row)), '<=',
  now() + interval '30 seconds', 'a call''s row settled before it was made durable is kept at most 30 s');

select tests.authenticate_as_relay();
select pg_temp.open('bob', 'client-task', true);
reset role;
update relay.pending_requests set settled_at = now(), outcome = 'abandoned'
where client_id = 'client-task' and owner_id = tests.get_supabase_uid('bob');
select cmp_ok((select keep_until from relay.pending_requests
               where client_id = 'client-task' and owner_id = tests.get_supabase_uid('bob')), '>',
  now() + interval '60 seconds', 'a durable request keeps its result for its TTL');

-- ---------------------------------------------------------------- the bounds are the relay's, not the caller's
select is(private.max_resumable_requests_per_account(), 500, 'an account keeps at most 500 resumable rows');
select ok(not has_function_privilege('whereabot_relay', 'private.pending_request_rules()', 'execute'),
  'the trigger function is not the relay''s to call');

select * from finish();
rollback;
