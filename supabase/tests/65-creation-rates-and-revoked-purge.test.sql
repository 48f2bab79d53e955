-- Creating and revoking is bounded (docs/agents.md, "Credentials"): every agent key and
-- location share created leaves a row in private.creations, and an account creates at most
-- private.max_agent_keys_per_hour() keys and private.max_location_shares_per_hour() shares
-- in any hour, revoked (or deleted) ones included, refused with 54000 as the caps are; the
-- hour slides. relay.sweep_oauth deletes keys and shares revoked longer ago than
-- private.revoked_kept_for() and the creations past their hour, and a revoked key it
-- deletes notifies no instance again.
begin;
select plan(21);

select tests.create_supabase_user('ada');
select tests.create_supabase_user('bob');
select tests.create_supabase_user('cyd');
select tests.create_supabase_user('dan');
create temp table made (n int, id uuid);
grant all on made to public;

select is(private.max_agent_keys_per_hour(), 25, '25 agent keys an hour');
select is(private.max_location_shares_per_hour(), 20, '20 location shares an hour');
select is(private.revoked_kept_for(), interval '30 days', 'revoked rows are kept 30 days');

-- ------------------------------------------------ agent keys: create and revoke, over the socket
select tests.authenticate_as_relay();
do $$
declare
  v_keys jsonb;
begin
  for i in 1..25 loop
    v_keys := relay.create_agent_key(tests.get_supabase_uid('ada'), 'key ' || i) -> 'keys';
    perform relay.revoke_agent_key(tests.get_supabase_uid('ada'), (v_keys -> 0 ->> 'id')::uuid);
  end loop;
end
$$;
select is(relay.agent_keys(tests.get_supabase_uid('ada')), '[]'::jsonb, 'ada created and revoked 25 keys: none is live');
select throws_ok($$ select relay.create_agent_key(tests.get_supabase_uid('ada'), 'one more') $$, '54000',
  'agent_keys allows at most 25 created per hour per user, revoked ones included; try again later',
  'the 26th key of the hour is refused though none is live');
reset role;
select is((select count(*)::int from private.creations where user_id = tests.get_supabase_uid('ada') and kind = 'agent_key'),
  25, 'a refused creation is not counted');
update private.creations set created_at = created_at - interval '61 minutes'
where id in (select id from private.creations where user_id = tests.get_supabase_uid('ada') order by id limit 1);
select tests.authenticate_as_relay();
select ok(relay.create_agent_key(tests.get_supabase_uid('ada'), 'an hour later') ->> 'key' ~ '^wb_',
  'once the oldest creation is an hour old, one more key may be made');
select throws_ok($$ select relay.create_agent_key(tests.get_supabase_uid('ada'), 'and another') $$, '54000', null,
  'but only one: the hour slides');
reset role;

-- The API's path counts the same, and the live cap still comes first.
select tests.authenticate_as('bob');
select lives_ok($$ select public.create_agent_key('k' || i) from generate_series(1, 25) i $$, 'bob makes 25 keys at once');
select throws_ok($$ select public.create_agent_key('one too many') $$, '54000', 'agent_keys allows at most 25 rows per user',
  'the 26th live key is refused by the cap');
reset role;

-- ------------------------------------------------ shares: create and revoke or delete, through the API
select tests.authenticate_as('cyd');
do $$
declare
  v_share uuid;
begin
  for i in 1..20 loop
    v_share := public.share_location_with('friend' || i || '@test.example');
    if i % 2 = 0 then
      perform public.revoke_location_share(v_share);
    else
      delete from public.location_shares where id = v_share;
    end if;
  end loop;
end
$$;
select throws_ok($$ select public.share_location_with('one.more@test.example') $$, '54000',
  'location_shares allows at most 20 created per hour per user, revoked ones included; try again later',
  'the 21st share of the hour is refused, though every earlier one was revoked or deleted');
select throws_ok($$ insert into public.location_shares (owner_id, viewer_id)
                    values (tests.get_supabase_uid('cyd'), tests.get_supabase_uid('dan')) $$, '54000', null,
  'a share inserted directly is counted the same');
reset role;
select is((select count(*)::int from public.location_shares where owner_id = tests.get_supabase_uid('cyd')), 10,
  'the revoked half stays until the sweep');

select is_empty($$ select 1 from private.creations where user_id = tests.get_supabase_uid('dan') $$,
  'another account''s creations are its own');
select tests.authenticate_as('dan');
select ok(public.share_location_with('someone@test.example') is not null, 'so dan still shares');
reset role;

-- ------------------------------------------------ the sweep
insert into public.agent_keys (user_id, name, key_hash, key_prefix, created_at, revoked_at)
select tests.get_supabase_uid('dan'), 'old ' || d, encode(sha256(convert_to('old' || d, 'UTF8')), 'hex'), 'wb_0000000' || (d % 10),
       now() - make_interval(days => d + 1), now() - make_interval(days => d)
from unnest(array[31, 29]) d;
insert into public.location_shares (owner_id, viewer_email, created_at, revoked_at)
select tests.get_supabase_uid('dan'), 'old' || d || '@test.example', now() - make_interval(days => d + 1),
       now() - make_interval(days => d)
from unnest(array[31, 29]) d;
update private.creations set created_at = now() - interval '2 hours' where user_id = tests.get_supabase_uid('dan');
select tests.authenticate_as_relay();
select ok(relay.sweep_oauth(30, 1000) >= 4, 'the sweep deletes what it should');
reset role;
select results_eq($$ select name from public.agent_keys where user_id = tests.get_supabase_uid('dan') order by name $$,
  array['old 29'], 'a key revoked 31 days ago is deleted, one revoked 29 days ago stays');
select results_eq($$ select viewer_email from public.location_shares
                     where owner_id = tests.get_supabase_uid('dan') order by viewer_email $$,
  array['old29@test.example', 'someone@test.example'], 'so is a share revoked 31 days ago; a live one stays');
select is((select count(*)::int from private.creations where user_id = tests.get_supabase_uid('dan')), 0,
  'creations past their hour are deleted');
select is((select count(*)::int from private.creations where user_id = tests.get_supabase_uid('cyd')), 20,
  'creations within the hour stay');

select ok((select pg_get_triggerdef(oid) from pg_trigger where tgname = 'agent_keys_notify_deleted')
          like '%WHEN ((old.revoked_at IS NULL))%',
  'deleting a key that was revoked (the sweep) sends no second whereabot_key');

select * from finish();
rollback;
