-- relay.claim_push spends rolling-hour budgets per target and per account
-- (docs/protocol.md, "Budgets"): however often an agent asks and hangs up, a target gets at most 30 pushes an
-- hour and an account's phones at most its budget.
begin;
select plan(11);

select tests.create_supabase_user('flood');
select tests.create_supabase_user('quiet');

create function pg_temp.open(p_who text)
returns uuid language plpgsql as $$
declare v_id uuid := gen_random_uuid();
begin
  perform relay.open_request(v_id, tests.get_supabase_uid(p_who), null, 'c-1', 'Claude', 'relay-a',
    decode(repeat('ab', 32), 'hex'), now() + interval '60 seconds');
  return v_id;
end $$;
create function pg_temp.web_pushed(p_claim jsonb) returns int language sql as $$ select jsonb_array_length(p_claim -> 'web') $$;

reset role;
insert into public.devices (id, user_id, name, platform) values
  ('00000000-0000-4000-8000-0000000005d1', tests.get_supabase_uid('flood'), 'Web', 'web'),
  ('00000000-0000-4000-8000-0000000005d2', tests.get_supabase_uid('quiet'), 'Web', 'web');
insert into public.web_push_subscriptions (endpoint, p256dh, auth, user_id, device_id)
select 'https://fcm.googleapis.com/fcm/send/flood-' || n, repeat('B', 87), repeat('A', 22),
       tests.get_supabase_uid('flood'), '00000000-0000-4000-8000-0000000005d1'
from generate_series(1, 3) n;
insert into public.web_push_subscriptions (endpoint, p256dh, auth, user_id, device_id)
values ('https://fcm.googleapis.com/fcm/send/quiet-1', repeat('B', 87), repeat('A', 22),
        tests.get_supabase_uid('quiet'), '00000000-0000-4000-8000-0000000005d2');

select relay.register_instance('relay-a');
create temp table claims (n int, claim jsonb);

-- An agent that asks and hangs up at once, 40 times: each request is claimed once and then
-- ends (a user has few requests waiting at a time). 3 targets, 30 pushes per target an hour.
create function pg_temp.ask_and_hang_up(p_who text, p_per_account int default 100)
returns jsonb language plpgsql as $$
declare v_id uuid := pg_temp.open(p_who); v_claim jsonb;
begin
  v_claim := relay.claim_push(v_id, 'relay-a', 'wake', 30, p_per_account);
  delete from relay.pending_requests where id = v_id;
  return v_claim;
end $$;
insert into claims select n, pg_temp.ask_and_hang_up('flood') from generate_series(1, 40) n;
select is((select sum(pg_temp.web_pushed(claim))::int from claims), 90,
  'each of three targets gets 30 pushes in an hour and no more, however many requests');
select is((select pg_temp.web_pushed(claim) from claims where n = 31), 0, 'the 31st request pushes no target');
select is((select claim -> 'limited' ->> 'web' from claims where n = 31), '3', 'and says it held three back');
select is((select claim ->> 'status' from claims where n = 31), 'claimed', 'its stage is still claimed (never sent later)');
select is((select claim ->> 'owner' from claims where n = 1), tests.get_supabase_uid('flood')::text, 'a claim names the owner');

-- Another account's budget is its own.
select is(pg_temp.web_pushed(pg_temp.ask_and_hang_up('quiet')), 1,
  'the flooding account''s spent budget never holds back another account''s push');

-- The per-account budget: 5 pushes an hour across targets.
select is((select sum(pg_temp.web_pushed(pg_temp.ask_and_hang_up('quiet', 5)))::int
           from generate_series(1, 10)), 4, 'an account''s budget counts every push of the hour, across requests');

-- The window rolls: sends older than an hour no longer count.
update relay.push_budgets set sent_at = array(select t - interval '61 minutes' from unnest(sent_at) t),
                              last_at = last_at - interval '61 minutes';
select is(pg_temp.web_pushed(pg_temp.ask_and_hang_up('flood')), 3,
  'an hour later every target can be pushed again');
select is((select count(*)::int from relay.push_budgets where last_at < now() - interval '1 hour'), 0,
  'budget rows of targets not pushed for an hour are removed by later claims');
select ok(not exists (select from relay.push_budgets where key like '%fcm%' or key like '%googleapis%'),
  'no endpoint or token is stored in the budgets, only hashes');

select tests.authenticate_as_relay();
select throws_ok($$ select relay.claim_push(gen_random_uuid(), 'relay-a', 'wake', 0, 10) $$, '22023', null,
  'a budget of zero is refused');

select * from finish();
rollback;
