-- What the browser phone needs: agent names in pings, Web Push subscriptions saved over the
-- socket, the always-allowed list, and the device list.
begin;
select plan(31);

select tests.create_supabase_user('ada', 'ada@test.example', 'Ada');
select tests.create_supabase_user('bob', 'bob@test.example', 'Bob');
select tests.create_supabase_user('eve', 'eve@test.example', 'Eve');
insert into public.location_shares (owner_id, viewer_id) values (tests.get_supabase_uid('ada'), tests.get_supabase_uid('bob'));
insert into public.devices (id, user_id, name, platform) values
  ('00000000-0000-4000-8000-00000000000a', tests.get_supabase_uid('ada'), 'Firefox', 'web'),
  ('00000000-0000-4000-8000-00000000000b', tests.get_supabase_uid('ada'), 'Phone', 'ios'),
  ('00000000-0000-4000-8000-0000000000e1', tests.get_supabase_uid('eve'), 'Eve''s', 'web');
create function pg_temp.save(p_user text, p_device uuid, p_endpoint text, p_p256dh text default repeat('B', 87),
                             p_auth text default repeat('A', 22))
returns text language sql as $$
  select relay.save_web_push_subscription(tests.get_supabase_uid(p_user), p_device, p_endpoint, p_p256dh, p_auth,
                                          array['https://127.0.0.1:8443'])
$$;
grant execute on all functions in schema pg_temp to public;

select tests.authenticate_as_relay();

-- ---------------------------------------------------------------- pings name the agent
select relay.register_instance('relay-a');
select relay.open_request('11111111-0000-4000-8000-000000000001', tests.get_supabase_uid('ada'), null, 'claude',
  E'Claude\u202E\n', 'relay-a', decode(repeat('ab', 32), 'hex'), now() + interval '60 seconds', 5);
select relay.open_request('11111111-0000-4000-8000-000000000002', tests.get_supabase_uid('ada'), null, 'nameless',
  null, 'relay-a', decode(repeat('ab', 32), 'hex'), now() + interval '60 seconds', 5);
select results_eq($$ select p ->> 'agent_name' from jsonb_array_elements(tests.device_hello('relay-a', gen_random_uuid(),
  tests.get_supabase_uid('ada'), tests.get_session_id('ada'), '00000000-0000-4000-8000-00000000000a', '', 'web', null, now())
  -> 'pending') p $$,
  array['Claude', null], 'pings carry the agent''s cleaned name, or null when unknown');

-- ---------------------------------------------------------------- Web Push subscriptions
select is(pg_temp.save('ada', '00000000-0000-4000-8000-00000000000a', 'https://fcm.googleapis.com/fcm/send/abc'), 'saved',
  'a subscription to a known push service is saved');
select is(pg_temp.save('ada', '00000000-0000-4000-8000-00000000000a', 'https://fcm.googleapis.com/fcm/send/abc',
  repeat('C', 87)), 'saved', 'saving it again updates the one row');
select is(pg_temp.save('ada', '00000000-0000-4000-8000-00000000000a', 'https://127.0.0.1:8443/sub/1'), 'saved',
  'an extra (test) origin is allowed');
select is(pg_temp.save('ada', '00000000-0000-4000-8000-00000000000a', 'https://evil.example/push'),
  'refused:endpoint_not_allowed', 'an endpoint outside the allow-list is refused');
select is(pg_temp.save('ada', '00000000-0000-4000-8000-00000000000a', 'https://googleapis.com.evil.example/x'),
  'refused:endpoint_not_allowed', 'a lookalike host is refused');
select is(pg_temp.save('ada', '00000000-0000-4000-8000-00000000000a', 'https://fcm.googleapis.com:8443/x'),
  'refused:endpoint_not_allowed', 'a port on a push service host is refused');
select is(pg_temp.save('ada', '00000000-0000-4000-8000-00000000000a', 'https://user@fcm.googleapis.com/x'),
  'refused:endpoint_not_allowed', 'credentials in the endpoint are refused');
select is(pg_temp.save('ada', '00000000-0000-4000-8000-00000000000a', 'http://fcm.googleapis.com/x'),
  'refused:endpoint_not_allowed', 'plain http is refused');
select is(pg_temp.save('ada', '00000000-0000-4000-8000-00000000000a', 'https://fcm.googleapis.com/fcm/send/def', 'short'),
  'refused:invalid', 'a malformed key is refused');
select is(pg_temp.save('ada', '00000000-0000-4000-8000-0000000000e1', 'https://fcm.googleapis.com/fcm/send/x'),
  'refused:device', 'another user''s device cannot hold Ada''s subscription');
reset role;
select results_eq($$ select endpoint, p256dh from public.web_push_subscriptions where user_id = tests.get_supabase_uid('ada') order by endpoint $$,
  $$ values ('https://127.0.0.1:8443/sub/1', repeat('B', 87)), ('https://fcm.googleapis.com/fcm/send/abc', repeat('C', 87)) $$,
  'the saved subscriptions, one row per endpoint');
select tests.authenticate_as_relay();
select is(relay.delete_web_push_subscriptions(tests.get_supabase_uid('ada'), '00000000-0000-4000-8000-00000000000a'), 2,
  'delete_web_push_subscriptions removes the device''s subscriptions');
select throws_ok($$ select relay.delete_web_push_subscriptions(null, null) $$, '22004', null, 'it refuses nulls');

-- ---------------------------------------------------------------- always allowed
select is(relay.set_always_allowed(tests.get_supabase_uid('ada'), 'claude', E'Claude\n', null, true),
  jsonb_build_array(jsonb_build_object('client_id', 'claude', 'client_name', 'Claude', 'requester_id', null,
    'precision', 'precise', 'expires_ms', null, 'last_used_ms', null)),
  'set_always_allowed adds the agent (name cleaned) and returns the list');
select is(jsonb_array_length(relay.set_always_allowed(tests.get_supabase_uid('ada'), 'claude', 'Claude 2', null, true)), 1,
  'adding it again keeps one row');
select is(relay.set_always_allowed(tests.get_supabase_uid('ada'), 'claude', null, tests.get_supabase_uid('bob'), true) -> 1 ->> 'requester_id',
  tests.get_supabase_uid('bob')::text, 'always-allow for Bob''s requests is its own row');
select throws_ok($$ select relay.set_always_allowed(tests.get_supabase_uid('ada'), 'claude', null, tests.get_supabase_uid('eve'), true) $$,
  '42501', null, 'a requester without an active share is refused');
select throws_ok($$ select relay.set_always_allowed(tests.get_supabase_uid('ada'), 'agent-key', 'k', null, true) $$,
  '23514', null, 'the generic agent-key id can never be always allowed');
select throws_ok($$ select relay.set_always_allowed(tests.get_supabase_uid('ada'), 'unknown', 'u', null, true) $$,
  '23514', null, 'nor can unknown');
select is(relay.is_always_allowed(tests.get_supabase_uid('ada'), 'claude', null), true, 'the relay now sends the silent push');
select is(jsonb_array_length(relay.set_always_allowed(tests.get_supabase_uid('ada'), 'claude', null, null, false)), 1,
  'removing the own-agent row leaves Bob''s');
select is(relay.always_allowed_agents(tests.get_supabase_uid('ada')) -> 0 ->> 'client_id', 'claude', 'always_allowed_agents lists it');
select throws_ok($$ select relay.set_always_allowed(null, 'x', null, null, true) $$, '22004', null, 'set_always_allowed refuses nulls');

-- ---------------------------------------------------------------- devices
select is(jsonb_array_length(relay.user_devices(tests.get_supabase_uid('ada'))), 2, 'user_devices lists the user''s devices');
select ok(not (relay.user_devices(tests.get_supabase_uid('ada')) -> 0 ? 'last_seen_at'), 'the list reveals no presence');
select is(jsonb_path_query_first(relay.rename_device(tests.get_supabase_uid('ada'), '00000000-0000-4000-8000-00000000000b', E'Work\nphone'),
                                  '$[*] ? (@.id == "00000000-0000-4000-8000-00000000000b")') ->> 'name',
  'Workphone', 'rename_device cleans the name');
select is(jsonb_array_length(relay.rename_device(tests.get_supabase_uid('eve'), '00000000-0000-4000-8000-00000000000b', 'mine')), 1,
  'another user cannot rename Ada''s device (Eve''s own list comes back)');
select is(jsonb_array_length(relay.remove_device(tests.get_supabase_uid('ada'), '00000000-0000-4000-8000-00000000000b')), 1,
  'remove_device removes it from the list');
reset role;
select isnt((select revoked_at from public.devices where id = '00000000-0000-4000-8000-00000000000b'), null,
  'the removed device is marked revoked (its session is revoked by the trigger)');

select tests.authenticate_as('ada');
select throws_ok($$ select relay.set_always_allowed(tests.get_supabase_uid('ada'), 'x', null, null, true) $$, '42501', null,
  'a user session cannot call the relay''s functions (only a phone socket, through the relay)');

select * from finish();
rollback;
