-- Tasks and async requests keep a cap of their own (docs/database.md, "Limits"): five durable
-- requests of the user's own agent no longer fill the cap of 5 that calls which wait have;
-- durable requests stop at their own cap, a viewer's at 5 across every owner.
begin;
select plan(5);

select tests.create_supabase_user('ada');
select tests.create_supabase_user('vic');
select tests.create_supabase_user('olga');
insert into public.location_shares (owner_id, viewer_id) values
  (tests.get_supabase_uid('ada'), tests.get_supabase_uid('vic')), (tests.get_supabase_uid('olga'), tests.get_supabase_uid('vic'));

create function pg_temp.durable(p_owner text, p_requester text, p_client text, p_max int) returns text language sql as $$
  select relay.open_durable_request(gen_random_uuid(), tests.get_supabase_uid(p_owner),
    case when p_requester is null then null else tests.get_supabase_uid(p_requester) end, p_client, null, null, 'relay-a',
    decode(repeat('ab', 32), 'hex'), now() + interval '300 seconds', now() + interval '310 seconds', true, null, p_max)->>'status'
$$;
create function pg_temp.call(p_owner text) returns text language sql as $$
  select relay.open_request(gen_random_uuid(), tests.get_supabase_uid(p_owner), null, 'client-call', null, 'relay-a',
    decode(repeat('ab', 32), 'hex'), now() + interval '60 seconds', 5)->>'status'
$$;

select is((select array_agg(pg_temp.durable('ada', null, 'client-' || i, 100)) from generate_series(1, 6) i),
  array['opened', 'opened', 'opened', 'opened', 'opened', 'opened'], 'the owner''s own agents open six tasks');
select is(pg_temp.call('ada'), 'opened', 'a call that waits still opens: the tasks have a cap of their own');
select is(pg_temp.durable('ada', null, 'client-x', 6), 'too_many', 'the tasks stop at their own cap');

select is((select array_agg(pg_temp.durable(case when i % 2 = 0 then 'ada' else 'olga' end, 'vic', 'client-v' || i, 5))
           from generate_series(1, 6) i),
  array['opened', 'opened', 'opened', 'opened', 'opened', 'too_many'], 'a viewer keeps at most 5 waiting across the owners');
select is(pg_temp.call('ada'), 'opened', 'and the owner''s own calls are never kept out by them');

select * from finish();
rollback;
