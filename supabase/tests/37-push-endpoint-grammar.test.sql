-- The push endpoint allow-list parses one strict grammar (docs/security.md): hosts that only a
-- lenient parser reads as a push service's are refused, in the save function and the table.
begin;
select plan(4);

select is(array(select private.is_push_endpoint_allowed(e, '{}') from unnest(array[
    'https://fcm.googleapis.com/fcm/send/abc:DEF-123_x', 'https://updates.push.services.mozilla.com/wpush/v2/gAAA%3D',
    'https://web.push.apple.com/QGuQ?x=1', 'HTTPS://FCM.GoogleAPIs.com/fcm/send/a']) e),
  array[true, true, true, true], 'real push services'' endpoints are allowed');
select is(array(select private.is_push_endpoint_allowed(e, '{}') from unnest(array[
    'https://127.0.0.1%2f.googleapis.com/x', 'https://a@fcm.googleapis.com/x', 'https://fcm.googleapis.com:443/x',
    'https://fcm.googleapis.com/a b', 'https://fcm.googleapis.com/%zz', 'https://fcm.googleapis.com/x#y',
    'https://-x.googleapis.com/', 'https://fcm..googleapis.com/', 'https://fcm.googleapis.com.evil.com/',
    'https://evil.com\.googleapis.com/', 'http://fcm.googleapis.com/x']) e),
  array[false, false, false, false, false, false, false, false, false, false, false],
  'percent-encoded, credentialed, ported, spaced, fragment-carrying and lookalike hosts are refused');
select is(array(select private.is_push_endpoint_allowed(e, array['https://127.0.0.1:8443']) from unnest(array[
    'https://127.0.0.1:8443/push/1', 'https://127.0.0.1:8444/push/1', 'https://127.0.0.1:99999/x']) e),
  array[true, false, false], 'an extra origin matches exactly (tests and development)');

select tests.create_supabase_user('ada');
reset role;
insert into public.devices (id, user_id, name, platform) values ('00000000-0000-4000-8000-0000000007d1', tests.get_supabase_uid('ada'), 'Web', 'web');
select tests.authenticate_as_relay();
select is(relay.save_web_push_subscription(tests.get_supabase_uid('ada'), '00000000-0000-4000-8000-0000000007d1',
    'https://127.0.0.1%2f.googleapis.com/x', repeat('B', 87), repeat('A', 22)),
  'refused:endpoint_not_allowed', 'a browser phone cannot save such an endpoint');

select * from finish();
rollback;
