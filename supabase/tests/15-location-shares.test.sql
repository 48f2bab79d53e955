-- location_shares: the owner shares and revokes, the viewer sees and may leave, nobody
-- else sees anything; agents read but never write.
begin;
select plan(30);

select tests.create_supabase_user('ada', 'ada@test.example', 'Ada Lovelace');
select tests.create_supabase_user('bob', 'bob@test.example', 'Bob');
select tests.create_supabase_user('eve', 'eve@test.example', 'Eve');
-- Shares by email reach only accounts that confirmed their address (34-account-ownership).
update auth.users set email_confirmed_at = now() where email like '%@test.example';
create temp table stash (k text primary key, v text);
grant all on stash to public;

-- insert (through share_location_with, and directly)
select tests.authenticate_as('ada');
insert into stash values ('share', public.share_location_with('BOB@test.example')::text);
select ok((select v from stash where k = 'share') is not null, 'the owner shares with a user by email, any case');
select is(public.share_location_with('bob@test.example')::text, (select v from stash where k = 'share'),
  'sharing again returns the same active share');
select ok(public.share_location_with('nobody@test.example') is not null,
  'sharing with an email that has no account answers like any other (the share waits for it)');
select throws_ok($$ select public.share_location_with('ada@test.example') $$, '22023', null,
  'the owner cannot share with themself');
select throws_ok($$ select public.share_location_with('not an email') $$, '22023', null,
  'share_location_with refuses what is not an email address');
select throws_ok($$ select public.share_location_with(null) $$, '22023', null,
  'share_location_with refuses null');
select lives_ok($$ insert into public.location_shares (owner_id, viewer_id)
  values (auth.uid(), tests.get_supabase_uid('eve')) $$, 'the owner may insert a share row directly');
select tests.authenticate_as('eve');
select throws_ok($$ insert into public.location_shares (owner_id, viewer_id)
  values (tests.get_supabase_uid('bob'), auth.uid()) $$, '42501', null,
  'nobody can make someone else share with them');
select tests.authenticate_as_agent('ada');
select throws_ok($$ select public.share_location_with('eve@test.example') $$, '42501', null,
  'an agent token cannot share its user''s location');
select throws_ok($$ insert into public.location_shares (owner_id, viewer_id)
  values (auth.uid(), tests.get_supabase_uid('bob')) $$, '42501', null, 'an agent token cannot insert shares');
select tests.clear_authentication();
select throws_ok($$ insert into public.location_shares (owner_id, viewer_id)
  values (tests.get_supabase_uid('ada'), tests.get_supabase_uid('bob')) $$, '42501', null, 'anon cannot insert shares');
select throws_ok($$ select public.share_location_with('bob@test.example') $$, '42501', null,
  'anon cannot call share_location_with');

-- select
select tests.authenticate_as('ada');
select is((select count(*)::int from public.location_shares), 3, 'the owner reads the shares they made, waiting ones too');
select tests.authenticate_as('bob');
select results_eq($$ select id::text from public.location_shares $$, array[(select v from stash where k = 'share')],
  'the viewer reads the share made to them');
select tests.authenticate_as_agent('bob');
select results_eq($$ select id::text from public.location_shares $$, array[(select v from stash where k = 'share')],
  'the viewer''s agent reads the shares made to its user');
select tests.authenticate_as('eve');
select results_eq($$ select owner_id from public.location_shares $$, array[tests.get_supabase_uid('ada')],
  'another user reads only shares they are part of');
select tests.clear_authentication();
select throws_ok($$ select * from public.location_shares $$, '42501', null, 'anon cannot read shares');

-- update (revoke and leave)
select tests.authenticate_as_agent('ada');
select is_empty($$ update public.location_shares set revoked_at = now() returning 1 $$,
  'an agent token cannot revoke shares');
select tests.clear_authentication();
select throws_ok($$ update public.location_shares set revoked_at = now() $$, '42501', null, 'anon cannot revoke shares');
select tests.authenticate_as('eve');
select is_empty(format($$ update public.location_shares set revoked_at = now() where id = %L returning 1 $$,
  (select v from stash where k = 'share')), 'a third user cannot revoke someone else''s share');
select throws_ok(format('select public.revoke_location_share(%L)', (select v from stash where k = 'share')),
  'P0002', null, 'revoke_location_share reports a share that is not yours');
select tests.authenticate_as('ada');
select throws_ok($$ update public.location_shares set viewer_id = auth.uid() $$, '42501', null,
  'the owner cannot redirect a share to someone else');
select tests.authenticate_as('bob');
select lives_ok(format('select public.revoke_location_share(%L)', (select v from stash where k = 'share')),
  'the viewer leaves the share');
select throws_ok(format('select public.revoke_location_share(%L)', (select v from stash where k = 'share')),
  'P0002', null, 'leaving it twice is reported');
select tests.authenticate_as('ada');
select throws_ok(format($$ update public.location_shares set revoked_at = null where id = %L $$,
  (select v from stash where k = 'share')), '42501', null, 'a revoked share cannot be restored');
select isnt(public.share_location_with('bob@test.example')::text, (select v from stash where k = 'share'),
  'sharing again after a revoke makes a new share');

-- delete
select tests.authenticate_as('bob');
select is_empty($$ delete from public.location_shares returning 1 $$, 'the viewer cannot delete shares');
select tests.authenticate_as_agent('ada');
select is_empty($$ delete from public.location_shares returning 1 $$, 'an agent token cannot delete shares');
select tests.clear_authentication();
select throws_ok($$ delete from public.location_shares $$, '42501', null, 'anon cannot delete shares');
select tests.authenticate_as('ada');
select results_eq($$ with d as (delete from public.location_shares returning 1) select count(*)::int from d $$,
  array[4], 'the owner deletes their shares');

reset role;
select * from finish();
rollback;
