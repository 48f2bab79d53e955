-- Account ownership (docs/security.md, "Sharing"): a share waiting for an email reaches only
-- an account that confirmed the address; a push subscription or token stays with the
-- account that first saved it; at most 10 of each per account; API writes of an endpoint
-- pass the push-service allow-list.
begin;
select plan(49);

create temp table stash (k text primary key, v text);
grant all on stash to public;

-- A user as Supabase Auth inserts one; confirmed_at null until the address is confirmed.
create function pg_temp.sign_up(p_identifier text, p_email text, p_confirmed_at timestamptz default null)
returns uuid language plpgsql as $$
declare
  v_user uuid := gen_random_uuid();
begin
  insert into auth.users (id, aud, role, email, email_confirmed_at, raw_app_meta_data, raw_user_meta_data,
                          created_at, updated_at)
  values (v_user, 'authenticated', 'authenticated', p_email, p_confirmed_at, '{"provider": "email"}',
          jsonb_build_object('test_identifier', p_identifier, 'full_name', initcap(p_identifier)), now(), now());
  insert into auth.sessions (id, user_id, created_at, updated_at, aal) values (gen_random_uuid(), v_user, now(), now(), 'aal1');
  return v_user;
end;
$$;
-- Who holds the share STASHED under K (null: it waits).
create function pg_temp.viewer(p_key text) returns uuid language sql as $$
  select viewer_id from public.location_shares where id = (select v from stash where k = p_key)::uuid
$$;
grant execute on all functions in schema pg_temp to public;

select pg_temp.sign_up('ada', 'ada@test.example', now());
select pg_temp.sign_up('bob', 'bob@test.example', now());
select pg_temp.sign_up('cy', 'cy@test.example', now());

-- ============================================================ finding 5: waiting shares
select tests.authenticate_as('ada');
insert into stash values
  ('later', public.share_location_with('Later@Signup.example')::text),
  ('ready', public.share_location_with('ready@signup.example')::text),
  ('moved', public.share_location_with('moved@signup.example')::text),
  ('early', public.share_location_with('early@signup.example')::text);
reset role;

-- Someone signs up with the address and never confirms it.
select pg_temp.sign_up('later', 'later@signup.example');
select is(pg_temp.viewer('later'), null, 'a share waiting for an email does not go to a new unconfirmed account');
select tests.authenticate_as('later');
select is_empty($$ select id from public.location_shares $$, 'the unconfirmed account reads no share');
select tests.authenticate_as_relay();
select is_empty($$ select name from relay.people_sharing_with(tests.get_supabase_uid('later')) $$,
  'and its agents may not ask for the owner''s location');
reset role;
update auth.users set raw_user_meta_data = raw_user_meta_data || '{"full_name": "Later"}', email = 'later@signup.example'
where id = tests.get_supabase_uid('later');
select is(pg_temp.viewer('later'), null, 'updating the unconfirmed account (even its email) hands nothing over');

-- The address is confirmed (Supabase Auth sets email_confirmed_at).
update auth.users set email_confirmed_at = now() where id = tests.get_supabase_uid('later');
select is(pg_temp.viewer('later'), tests.get_supabase_uid('later'), 'the share is handed over when the address is confirmed');
select tests.authenticate_as('later');
select results_eq($$ select id::text from public.location_shares $$, array[(select v from stash where k = 'later')],
  'the confirmed account reads the share');
reset role;

-- An account inserted already confirmed (an invite accepted, an OAuth sign-in).
select pg_temp.sign_up('ready', 'ready@signup.example', now());
select is(pg_temp.viewer('ready'), tests.get_supabase_uid('ready'), 'a new account inserted confirmed receives the share at once');

-- A confirmed account changes its email to the address (Auth writes it once the change is confirmed).
select pg_temp.sign_up('mover', 'mover@test.example', now() - interval '1 day');
select is(pg_temp.viewer('moved'), null, 'the share waits while no account has the address');
update auth.users set email = 'Moved@Signup.example' where id = tests.get_supabase_uid('mover');
select is(pg_temp.viewer('moved'), tests.get_supabase_uid('mover'), 'a confirmed account whose email changes to the address receives it');

-- The address already had an unconfirmed account when the owner shared with it.
select pg_temp.sign_up('squatter', 'taken@signup.example');
select tests.authenticate_as('ada');
insert into stash values ('taken', public.share_location_with('taken@signup.example')::text);
reset role;
select is(pg_temp.viewer('taken'), null, 'sharing with an address whose account is unconfirmed leaves the share waiting');
update auth.users set email_confirmed_at = now() where id = tests.get_supabase_uid('squatter');
select is(pg_temp.viewer('taken'), tests.get_supabase_uid('squatter'), 'and it is handed over at that account''s confirmation');
select tests.authenticate_as('ada');
select is(public.share_location_with('taken@signup.example')::text, (select v from stash where k = 'taken'),
  'sharing again with the confirmed address returns the same share');
reset role;

-- An account deleted (soft) before its address is confirmed receives nothing.
select pg_temp.sign_up('early', 'early@signup.example');
update auth.users set deleted_at = now(), email_confirmed_at = now() where id = tests.get_supabase_uid('early');
select is(pg_temp.viewer('early'), null, 'a deleted account receives no waiting share');

-- ============================================================ finding 6: push targets keep their owner
insert into public.devices (id, user_id, name, platform) values
  ('00000000-0000-4000-8000-0000000000a1', tests.get_supabase_uid('ada'), 'Firefox', 'web'),
  ('00000000-0000-4000-8000-0000000000a2', tests.get_supabase_uid('ada'), 'iPhone', 'ios'),
  ('00000000-0000-4000-8000-0000000000b1', tests.get_supabase_uid('bob'), 'Chrome', 'web'),
  ('00000000-0000-4000-8000-0000000000b2', tests.get_supabase_uid('bob'), 'iPhone', 'ios'),
  ('00000000-0000-4000-8000-0000000000c1', tests.get_supabase_uid('cy'), 'Chrome', 'web'),
  ('00000000-0000-4000-8000-0000000000c2', tests.get_supabase_uid('cy'), 'iPhone', 'ios');
create function pg_temp.save(p_user text, p_device uuid, p_endpoint text, p_p256dh text default repeat('A', 87),
                             p_auth text default repeat('A', 22))
returns text language sql as $$
  select relay.save_web_push_subscription(tests.get_supabase_uid(p_user), p_device, p_endpoint, p_p256dh, p_auth,
                                          array['https://127.0.0.1:8443'])
$$;
create function pg_temp.subscription(p_endpoint text) returns text language sql as $$
  select format('%s %s %s %s', u.raw_user_meta_data ->> 'test_identifier', s.device_id, left(s.p256dh, 1), left(s.auth, 1))
  from public.web_push_subscriptions s join auth.users u on u.id = s.user_id where s.endpoint = p_endpoint
$$;
create function pg_temp.token(p_token text) returns text language sql as $$
  select format('%s %s %s', u.raw_user_meta_data ->> 'test_identifier', t.device_id, t.environment)
  from public.push_tokens t join auth.users u on u.id = t.user_id where t.token = p_token
$$;
grant execute on all functions in schema pg_temp to public;

-- Web Push, through the relay's save function
select tests.authenticate_as_relay();
select is(pg_temp.save('ada', '00000000-0000-4000-8000-0000000000a1', 'https://fcm.googleapis.com/fcm/send/ada'), 'saved',
  'Ada saves her browser''s subscription');
select is(pg_temp.save('bob', '00000000-0000-4000-8000-0000000000b1', 'https://fcm.googleapis.com/fcm/send/ada',
  repeat('B', 87), repeat('B', 22)), 'refused:taken', 'another account saving the same endpoint is refused (refused:taken)');
reset role;
select is(pg_temp.subscription('https://fcm.googleapis.com/fcm/send/ada'), 'ada 00000000-0000-4000-8000-0000000000a1 A A',
  'the row is unchanged: still Ada''s, her device, her keys');
select tests.authenticate_as_relay();
select is(pg_temp.save('ada', '00000000-0000-4000-8000-0000000000a1', 'https://fcm.googleapis.com/fcm/send/ada',
  repeat('C', 87), repeat('C', 22)), 'saved', 'Ada saving it again with new keys updates her row');
reset role;
select is((select count(*)::int from public.web_push_subscriptions where endpoint = 'https://fcm.googleapis.com/fcm/send/ada'), 1,
  'one row per endpoint');
select tests.authenticate_as_relay();
select is(relay.delete_web_push_subscriptions(tests.get_supabase_uid('bob'), '00000000-0000-4000-8000-0000000000b1'), 0,
  'Bob''s sign-out deletes nothing of Ada''s');

-- Web Push, directly through the API as Bob (PostgREST with Bob's JWT)
select tests.authenticate_as('bob');
select throws_ok($$ insert into public.web_push_subscriptions (endpoint, p256dh, auth, user_id, device_id)
  values ('https://fcm.googleapis.com/fcm/send/ada', repeat('B', 87), repeat('B', 22), auth.uid(), '00000000-0000-4000-8000-0000000000b1') $$,
  '23505', null, 'Bob''s plain insert of Ada''s endpoint is refused');
select throws_ok($$ insert into public.web_push_subscriptions (endpoint, p256dh, auth, user_id, device_id)
  values ('https://fcm.googleapis.com/fcm/send/ada', repeat('B', 87), repeat('B', 22), auth.uid(), '00000000-0000-4000-8000-0000000000b1')
  on conflict (endpoint) do update set user_id = excluded.user_id, p256dh = excluded.p256dh, auth = excluded.auth,
    device_id = excluded.device_id $$,
  '42501', null, 'Bob''s upsert (Prefer: resolution=merge-duplicates) of Ada''s endpoint is refused');
select is_empty($$ insert into public.web_push_subscriptions (endpoint, p256dh, auth, user_id)
  values ('https://fcm.googleapis.com/fcm/send/ada', repeat('B', 87), repeat('B', 22), auth.uid())
  on conflict (endpoint) do nothing returning 1 $$, 'Bob''s insert ignoring duplicates changes nothing');
select is_empty($$ update public.web_push_subscriptions set user_id = auth.uid(), p256dh = repeat('B', 87)
  where endpoint = 'https://fcm.googleapis.com/fcm/send/ada' returning 1 $$, 'Bob cannot update Ada''s subscription to his');
select is_empty($$ delete from public.web_push_subscriptions where endpoint = 'https://fcm.googleapis.com/fcm/send/ada' returning 1 $$,
  'Bob cannot delete it');
select tests.authenticate_as('ada');
select throws_ok($$ update public.web_push_subscriptions set user_id = tests.get_supabase_uid('bob')
  where endpoint = 'https://fcm.googleapis.com/fcm/send/ada' $$, '42501', null, 'Ada cannot hand her subscription to Bob');
reset role;
select throws_ok($$ update public.web_push_subscriptions set user_id = tests.get_supabase_uid('bob')
  where endpoint = 'https://fcm.googleapis.com/fcm/send/ada' $$, '42501', null,
  'no writer, not even the table''s owner, moves a subscription to another account');
select is(pg_temp.subscription('https://fcm.googleapis.com/fcm/send/ada'), 'ada 00000000-0000-4000-8000-0000000000a1 C C',
  'after every attempt the row is Ada''s, with the keys she saved last');

-- APNs tokens (the app writes them through the API)
select tests.authenticate_as('ada');
select lives_ok(format($$ insert into public.push_tokens (token, user_id, device_id, environment)
  values (%L, auth.uid(), '00000000-0000-4000-8000-0000000000a2', 'sandbox') $$, repeat('a1', 32)),
  'Ada saves her phone''s APNs token');
select tests.authenticate_as('bob');
select throws_ok(format($$ insert into public.push_tokens (token, user_id, device_id)
  values (%L, auth.uid(), '00000000-0000-4000-8000-0000000000b2') $$, repeat('a1', 32)),
  '23505', null, 'Bob''s plain insert of Ada''s token is refused');
select throws_ok(format($$ insert into public.push_tokens (token, user_id, device_id, environment)
  values (%L, auth.uid(), '00000000-0000-4000-8000-0000000000b2', 'production')
  on conflict (token) do update set user_id = excluded.user_id, device_id = excluded.device_id,
    environment = excluded.environment $$, repeat('a1', 32)),
  '42501', null, 'Bob''s upsert of Ada''s token is refused');
select is_empty(format($$ insert into public.push_tokens (token, user_id, device_id)
  values (%L, auth.uid(), '00000000-0000-4000-8000-0000000000b2') on conflict (token) do nothing returning 1 $$, repeat('a1', 32)),
  'Bob''s insert ignoring duplicates (whereabot phone --apns-token) changes nothing');
select is_empty(format($$ update public.push_tokens set user_id = auth.uid() where token = %L returning 1 $$, repeat('a1', 32)),
  'Bob cannot update Ada''s token to his');
reset role;
select throws_ok(format($$ update public.push_tokens set user_id = tests.get_supabase_uid('bob') where token = %L $$, repeat('a1', 32)),
  '42501', null, 'no writer moves a token to another account');
select is(pg_temp.token(repeat('a1', 32)), 'ada 00000000-0000-4000-8000-0000000000a2 sandbox',
  'after every attempt the token is Ada''s, on her phone, sandbox');

-- ============================================================ caps: 10 per account
select tests.authenticate_as_relay();
select is((select array_agg(distinct pg_temp.save('cy', '00000000-0000-4000-8000-0000000000c1',
                                                  'https://fcm.googleapis.com/fcm/send/cy' || i)) from generate_series(1, 10) i),
  array['saved'], 'an account saves 10 subscriptions');
select is(pg_temp.save('cy', '00000000-0000-4000-8000-0000000000c1', 'https://fcm.googleapis.com/fcm/send/cy11'),
  'refused:limit', 'the 11th is refused (refused:limit)');
select is(pg_temp.save('cy', '00000000-0000-4000-8000-0000000000c1', 'https://fcm.googleapis.com/fcm/send/cy3', repeat('D', 87)),
  'saved', 'at the cap, saving one it holds again still works (no new row)');
select tests.authenticate_as('cy');
select throws_ok($$ insert into public.web_push_subscriptions (endpoint, p256dh, auth, user_id)
  values ('https://fcm.googleapis.com/fcm/send/cy12', repeat('A', 87), repeat('A', 22), auth.uid()) $$,
  '54000', null, 'an 11th subscription through the API is refused');
select lives_ok($$ insert into public.push_tokens (token, user_id, device_id)
  select md5('cy' || i) || md5('cy' || i || 'x'), auth.uid(), '00000000-0000-4000-8000-0000000000c2' from generate_series(1, 10) i $$,
  'an account saves 10 push tokens');
select throws_ok($$ insert into public.push_tokens (token, user_id, device_id)
  values (repeat('c1', 32), auth.uid(), '00000000-0000-4000-8000-0000000000c2') $$,
  '54000', null, 'the 11th push token is refused');
reset role;
select results_eq($$ select (select count(*)::int from public.web_push_subscriptions where user_id = tests.get_supabase_uid('cy')),
                            (select count(*)::int from public.push_tokens where user_id = tests.get_supabase_uid('cy')) $$,
  $$ values (10, 10) $$, 'the account holds 10 of each');
select tests.authenticate_as('bob');
select lives_ok($$ insert into public.push_tokens (token, user_id, device_id)
  values (repeat('b1', 32), auth.uid(), '00000000-0000-4000-8000-0000000000b2') $$,
  'another account''s cap is its own');

-- ============================================================ the allow-list in the table
select tests.authenticate_as('bob');
select throws_ok($$ insert into public.web_push_subscriptions (endpoint, p256dh, auth, user_id)
  values ('https://evil.example/push', repeat('A', 87), repeat('A', 22), auth.uid()) $$,
  '23514', null, 'an API insert of an endpoint outside the allow-list is refused');
select throws_ok($$ insert into public.web_push_subscriptions (endpoint, p256dh, auth, user_id)
  values ('https://127.0.0.1:8443/sub/bob', repeat('A', 87), repeat('A', 22), auth.uid()) $$,
  '23514', null, 'the relay''s extra (test) origins do not apply to API writes');
select lives_ok($$ insert into public.web_push_subscriptions (endpoint, p256dh, auth, user_id)
  values ('https://updates.push.services.mozilla.com/wpush/v2/bob', repeat('A', 87), repeat('A', 22), auth.uid()) $$,
  'an API insert of a known push service''s endpoint works');
select throws_ok($$ update public.web_push_subscriptions set endpoint = 'https://googleapis.com.evil.example/x'
  where endpoint = 'https://updates.push.services.mozilla.com/wpush/v2/bob' $$,
  '23514', null, 'an API update to an endpoint outside the allow-list is refused');
select lives_ok($$ update public.web_push_subscriptions set auth = repeat('E', 22), endpoint = endpoint
  where endpoint = 'https://updates.push.services.mozilla.com/wpush/v2/bob' $$,
  'an update that keeps the endpoint works');
select tests.authenticate_as_relay();
select is(pg_temp.save('bob', '00000000-0000-4000-8000-0000000000b1', 'https://127.0.0.1:8443/sub/bob'), 'saved',
  'the relay''s save function still allows its extra (test) origins');
reset role;
select lives_ok($$ insert into public.web_push_subscriptions (endpoint, p256dh, auth, user_id)
  values ('https://127.0.0.1:9443/sub/harness', repeat('A', 87), repeat('A', 22), tests.get_supabase_uid('bob')) $$,
  'a direct connection of the database owner (the test harness) may insert a fake push service''s endpoint');

select * from finish();
rollback;
