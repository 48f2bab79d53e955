-- What a database admin's advisor and a security review of the SQL check: whole policy
-- names, initplan-wrapped auth calls, and the sharing and presence findings.
begin;
select plan(21);

-- ---------------------------------------------------------------- policies
-- Postgres cuts names at 63 bytes without an error: the names must be exactly the sentences
-- the migrations wrote.
select results_eq($$ select policyname::text collate "C" from pg_policies where schemaname = 'public' order by 1 $$,
  array['Owners and viewers can read their shares' collate "C",
        'Owners can delete their shares from their own session',
        'Owners can revoke, viewers leave shares from their own session',
        'People disconnect the agents they connected',
        'People see the agents they connected',
        'Users and their agents can read the always-allowed agents',
        'Users can add push tokens to own devices from their own session',
        'Users can add web push subscriptions from their own session',
        'Users can always-allow agents from their own session',
        'Users can change always-allowed agents from their own session',
        'Users can change their quiet hours from their own session',
        'Users can change who may wake them from their own session',
        'Users can delete own web push subscriptions from their session',
        'Users can delete their own push tokens from their own session',
        'Users can let agents wake them from their own session',
        'Users can read own web push subscriptions from their session',
        'Users can read their own agent keys from their own session',
        'Users can read their own devices from their own session',
        'Users can read their own push tokens from their own session',
        'Users can read their quiet hours from their own session',
        'Users can read who may wake them from their own session',
        'Users can register their own devices from their own session',
        'Users can remove always-allowed agents from their own session',
        'Users can remove their quiet hours from their own session',
        'Users can rename and remove devices from their own session',
        'Users can set quiet hours from their own session',
        'Users can share their own location from their own session',
        'Users can stop agents waking them from their own session',
        'Users can update own web push subscriptions from their session',
        'Users can update their own push tokens from their own session'],
  'every policy name is the whole sentence written in its migration');
select ok((select bool_and(octet_length(policyname) <= 63) from pg_policies where schemaname = 'public'),
  'no policy name is longer than Postgres keeps');
-- Supabase's auth_rls_initplan lint: each auth.uid(), auth.jwt(), auth.role() and
-- current_setting() call must be the whole body of a (select ...), evaluated once per statement.
select is_empty($$
  select policyname, expression from pg_policies p,
    lateral (values (p.qual), (p.with_check)) e(expression)
  where p.schemaname = 'public' and expression is not null
    and (select count(*) from regexp_matches(expression, '(auth\.(uid|jwt|role)\(\)|current_setting\()', 'g'))
        <> (select count(*) from regexp_matches(expression, 'SELECT (auth\.(uid|jwt|role)\(\)|current_setting\()', 'g')) $$,
  'no policy calls auth.uid(), auth.jwt(), auth.role() or current_setting() outside its own (select ...)');
select is((select count(*)::int from pg_policies where schemaname = 'public'), 30, 'public has its 30 policies');

-- ---------------------------------------------------------------- indexes
select is_empty($$ select i.relname from pg_index x join pg_class i on i.oid = x.indexrelid
                   join pg_namespace n on n.oid = i.relnamespace
                   where n.nspname in ('public', 'relay', 'private') and not x.indisprimary
                     and obj_description(i.oid, 'pg_class') is null $$,
  'every index besides primary keys names the query that needs it');
select hasnt_index('relay', 'pending_requests', 'pending_requests_waiter_idx',
  'the unused index on pending_requests.waiter_instance is gone');

-- ---------------------------------------------------------------- presence
select tests.create_supabase_user('ada', 'ada@test.example', 'Ada');
select tests.create_supabase_user('bob', 'bob@test.example', 'Bob');
update auth.users set email_confirmed_at = now() where email in ('ada@test.example', 'bob@test.example');
insert into public.devices (id, user_id, name, platform) values ('00000000-0000-4000-8000-00000000000a', tests.get_supabase_uid('ada'), 'Phone', 'ios');
select tests.authenticate_as_agent('ada');
select is_empty($$ select last_seen_at from public.devices $$, 'an agent token reads no device of its user, so no last_seen_at');
select tests.authenticate_as('ada');
select isnt_empty($$ select last_seen_at from public.devices $$, 'the user''s own session still reads them');

-- ---------------------------------------------------------------- no oracle in sharing
select tests.authenticate_as('ada');
create temp table stash (k text primary key, v uuid);
grant all on stash to public;
insert into stash values ('known', public.share_location_with('bob@test.example')),
                         ('unknown', public.share_location_with('Carol@Later.example'));
select ok((select count(*) from stash where v is not null) = 2,
  'share_location_with answers the same for an address with and without an account');
select throws_ok($$ select viewer_id from public.location_shares $$, '42501', null,
  'the owner cannot read whether the address matched an account');
select results_eq($$ select viewer_email from public.location_shares order by viewer_email $$,
  array['bob@test.example', 'carol@later.example'], 'the owner reads the addresses they shared with');
reset role;
select tests.create_supabase_user('carol', 'carol@later.example', 'Carol');
select tests.authenticate_as_relay();
select is_empty($$ select name from relay.people_sharing_with(tests.get_supabase_uid('carol')) $$,
  'the waiting share does not reach Carol''s account before she confirms the address');
reset role;
update auth.users set email_confirmed_at = now() where id = tests.get_supabase_uid('carol');
select tests.authenticate_as_relay();
select results_eq($$ select name from relay.people_sharing_with(tests.get_supabase_uid('carol')) $$, array['Ada'],
  'the waiting share reaches Carol when she confirms that address');
select tests.authenticate_as('carol');
select results_eq($$ select id from public.location_shares $$, array[(select v from stash where k = 'unknown')],
  'Carol reads the share made to her address');

-- ---------------------------------------------------------------- revocation ends what the share allowed
reset role;
insert into public.always_allowed_agents (user_id, client_id, requester_id) values
  (tests.get_supabase_uid('ada'), 'claude', tests.get_supabase_uid('bob')),
  (tests.get_supabase_uid('ada'), 'claude', null);
select tests.authenticate_as_relay();
select relay.register_instance('relay-a');
select relay.open_request('22222222-0000-4000-8000-000000000001', tests.get_supabase_uid('ada'), tests.get_supabase_uid('bob'),
  'claude', 'Claude', 'relay-a', decode(repeat('ab', 32), 'hex'), now() + interval '60 seconds', 5);
select relay.open_request('22222222-0000-4000-8000-000000000002', tests.get_supabase_uid('ada'), null,
  'claude', 'Claude', 'relay-a', decode(repeat('ab', 32), 'hex'), now() + interval '60 seconds', 5);
select tests.authenticate_as('ada');
select public.revoke_location_share((select v from stash where k = 'known'));
reset role;
select results_eq($$ select outcome from relay.pending_requests where id = '22222222-0000-4000-8000-000000000001' $$,
  array['abandoned'], 'revoking the share settles Bob''s waiting request as abandoned (its phones get cancel)');
select results_eq($$ select settled_at is null from relay.pending_requests where id = '22222222-0000-4000-8000-000000000002' $$,
  array[true], 'Ada''s own agent''s request waits on');
select results_eq($$ select count(*)::int from public.always_allowed_agents where user_id = tests.get_supabase_uid('ada')
                      and requester_id = tests.get_supabase_uid('bob') $$, array[0],
  'the always-allow Ada granted for Bob''s requests is gone');
select results_eq($$ select count(*)::int from public.always_allowed_agents where user_id = tests.get_supabase_uid('ada')
                      and requester_id is null $$, array[1], 'her own always-allow stays');
select tests.authenticate_as_relay();
select is(relay.settle('22222222-0000-4000-8000-000000000001', tests.get_supabase_uid('ada'),
  '00000000-0000-4000-8000-00000000000a', 'location', null, 'c2VhbGVk'), 'gone', 'a late answer finds the request gone');
select tests.authenticate_as('ada');
select lives_ok($$ delete from public.location_shares $$, 'deleting the waiting share works');
reset role;
select is((select count(*)::int from public.location_shares where owner_id = tests.get_supabase_uid('ada')), 0,
  'the owner''s shares are gone');

select * from finish();
rollback;
