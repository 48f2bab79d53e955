-- A viewer's pushes spend budgets of their own (docs/protocol.md, "Budgets"): someone the owner
-- shares with, asking 40 times, spends their own 30 pushes per target an hour; the owner's
-- own agents still wake the phone, and another viewer still has a budget of theirs.
begin;
select plan(5);

select tests.create_supabase_user('owner');
select tests.create_supabase_user('viewer');
select tests.create_supabase_user('other');
insert into public.location_shares (owner_id, viewer_id) values
  (tests.get_supabase_uid('owner'), tests.get_supabase_uid('viewer')),
  (tests.get_supabase_uid('owner'), tests.get_supabase_uid('other'));
insert into public.devices (id, user_id, name, platform)
values ('00000000-0000-4000-8000-0000000006d1', tests.get_supabase_uid('owner'), 'Web', 'web');
insert into public.web_push_subscriptions (endpoint, p256dh, auth, user_id, device_id)
values ('https://fcm.googleapis.com/fcm/send/owner-1', repeat('B', 87), repeat('A', 22),
        tests.get_supabase_uid('owner'), '00000000-0000-4000-8000-0000000006d1');
select relay.register_instance('relay-a');

-- A request of REQUESTER (null: the owner's own agent) for the owner's phone, claimed and
-- ended at once: how many targets it paid for.
create function pg_temp.ask_and_hang_up(p_requester text)
returns int language plpgsql as $$
declare
  v_id uuid := gen_random_uuid();
  v_claim jsonb;
begin
  perform relay.open_request(v_id, tests.get_supabase_uid('owner'),
    case when p_requester is null then null else tests.get_supabase_uid(p_requester) end, 'c-1', 'Claude', 'relay-a',
    decode(repeat('ab', 32), 'hex'), now() + interval '60 seconds');
  v_claim := relay.claim_push(v_id, 'relay-a', 'wake', 30, 100);
  delete from relay.pending_requests where id = v_id;
  return jsonb_array_length(v_claim -> 'web');
end $$;

select is((select sum(pg_temp.ask_and_hang_up('viewer'))::int from generate_series(1, 40)), 30,
  'a viewer asking 40 times pushes the owner''s phone 30 times in the hour');
select is(pg_temp.ask_and_hang_up('viewer'), 0, 'then the viewer''s budget is spent');
select is(pg_temp.ask_and_hang_up(null), 1, 'the owner''s own agent still wakes the phone');
select is(pg_temp.ask_and_hang_up('other'), 1, 'another viewer has a budget of their own');
select is((select sum(pg_temp.ask_and_hang_up(null))::int from generate_series(1, 29)), 29,
  'the owner''s own agents keep their whole 30 of the hour');

select * from finish();
rollback;
