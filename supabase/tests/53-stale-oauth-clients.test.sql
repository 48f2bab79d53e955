-- Stale OAuth clients (docs/deploy.md, "Stale OAuth clients"): the admin lists dynamically registered clients with no
-- grant and no session for N days and retires them; hand-registered clients, clients in
-- use and recent ones stay; nobody but the admin may call either function. Written to pass
-- on a project that already has clients of its own (make test-db DATABASE_URL=…): it looks
-- only at its own (ids 00000000-0000-4000-8000-0000000000c*).
begin;
select plan(9);
create function pg_temp.ours(p_id uuid) returns boolean language sql as $$
  select p_id::text like '00000000-0000-4000-8000-0000000000c_'
$$;

select tests.create_supabase_user('ada');
select tests.create_oauth_client('00000000-0000-4000-8000-0000000000c1', 'Stale');
select tests.create_oauth_client('00000000-0000-4000-8000-0000000000c2', 'Granted');
select tests.create_oauth_client('00000000-0000-4000-8000-0000000000c3', 'Signed in');
select tests.create_oauth_client('00000000-0000-4000-8000-0000000000c4', 'New');
select tests.create_oauth_client('00000000-0000-4000-8000-0000000000c5', 'Revoked long ago');
select tests.create_oauth_client('00000000-0000-4000-8000-0000000000c6', 'By hand');
update auth.oauth_clients set created_at = now() - interval '90 days'
where pg_temp.ours(id) and id <> '00000000-0000-4000-8000-0000000000c4';
update auth.oauth_clients set registration_type = 'manual' where id = '00000000-0000-4000-8000-0000000000c6';
insert into auth.oauth_consents (id, user_id, client_id, scopes, granted_at, revoked_at) values
  (gen_random_uuid(), tests.get_supabase_uid('ada'), '00000000-0000-4000-8000-0000000000c2', 'openid', now() - interval '80 days', null),
  (gen_random_uuid(), tests.get_supabase_uid('ada'), '00000000-0000-4000-8000-0000000000c5', 'openid', now() - interval '80 days', now() - interval '60 days');
insert into auth.sessions (id, user_id, created_at, updated_at, oauth_client_id) values
  (gen_random_uuid(), tests.get_supabase_uid('ada'), now() - interval '40 days', now() - interval '2 days', '00000000-0000-4000-8000-0000000000c3');

create temp table others as
  select count(*)::int as stale from private.stale_oauth_clients(30) s where not pg_temp.ours(s.id);

select set_eq($$ select client_name from private.stale_oauth_clients(30) where pg_temp.ours(id) $$, array['Stale', 'Revoked long ago'],
  'stale: dynamic clients over 30 days old with no live grant and no session in 30 days');
select set_eq($$ select client_name from private.stale_oauth_clients(70) where pg_temp.ours(id) $$, array['Stale'],
  'a grant revoked within the window keeps its client');
select throws_ok($$ select * from private.stale_oauth_clients(0) $$, '22023', 'p_days must be from 1 to 3650, not 0',
  'a window of no days is refused');

select is(private.retire_stale_oauth_clients(30), 2 + (select stale from others), 'retiring returns how many');
select set_eq($$ select client_name from auth.oauth_clients where deleted_at is null and pg_temp.ours(id) $$,
  array['Granted', 'Signed in', 'New', 'By hand'], 'the two stale clients are retired, the rest stay');
select is(private.retire_stale_oauth_clients(30), 0, 'retiring again finds none');

select tests.authenticate_as('ada');
select throws_ok($$ select * from private.stale_oauth_clients(30) $$, '42501', null, 'a user cannot list them');
reset role;
select tests.authenticate_as_service_role();
select throws_ok($$ select private.retire_stale_oauth_clients(30) $$, '42501', null, 'nor can the service role retire them');
reset role;
select tests.authenticate_as_relay();
select throws_ok($$ select private.retire_stale_oauth_clients(30) $$, '42501', null, 'nor the relay');
reset role;

select * from finish();
rollback;
