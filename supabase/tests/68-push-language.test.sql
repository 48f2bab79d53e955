-- Notifications in the person's language (docs/protocol.md, "What a notification says"): a subscription and an APNs
-- token keep the language their device registered in (two lowercase letters, English by
-- default), relay.save_web_push_subscription stores it (again on a new subscribe), and the
-- push claims hand it to the relay with each target.
begin;
select plan(8);

select tests.create_supabase_user('ada', 'ada@test.example', 'Ada');
insert into public.devices (id, user_id, name, platform) values
  ('00000000-0000-4000-8000-00000000000a', tests.get_supabase_uid('ada'), 'Firefox', 'web');

select tests.authenticate_as_relay();
select is(relay.save_web_push_subscription(tests.get_supabase_uid('ada'), '00000000-0000-4000-8000-00000000000a',
  'https://127.0.0.1:8443/sub/de', repeat('B', 87), repeat('A', 22), array['https://127.0.0.1:8443'], 'de'), 'saved',
  'a German subscription is saved');
select is(relay.save_web_push_subscription(tests.get_supabase_uid('ada'), '00000000-0000-4000-8000-00000000000a',
  'https://127.0.0.1:8443/sub/en', repeat('B', 87), repeat('A', 22), array['https://127.0.0.1:8443']), 'saved',
  'one without a language is English');
select throws_ok($$select relay.save_web_push_subscription(tests.get_supabase_uid('ada'), '00000000-0000-4000-8000-00000000000a',
  'https://127.0.0.1:8443/sub/x', repeat('B', 87), repeat('A', 22), array['https://127.0.0.1:8443'], 'de-DE')$$, '22023',
  'language must be two lowercase letters (ISO 639-1)', 'a tag that is not two letters is refused');
select is((select array_agg(language order by language) from relay.web_push_subscriptions(tests.get_supabase_uid('ada'))),
  array['de', 'en'], 'the targets carry their languages');
select is(relay.save_web_push_subscription(tests.get_supabase_uid('ada'), '00000000-0000-4000-8000-00000000000a',
  'https://127.0.0.1:8443/sub/de', repeat('C', 87), repeat('A', 22), array['https://127.0.0.1:8443'], 'fr'), 'saved',
  'subscribing again in another language');
select is((select language from relay.web_push_subscriptions(tests.get_supabase_uid('ada')) where endpoint like '%/sub/de'),
  'fr', 'changes it');
reset role;

select throws_ok($$insert into public.push_tokens (token, user_id, language) values (repeat('ab', 32),
  tests.get_supabase_uid('ada'), 'Deutsch')$$, '23514', null, 'an APNs token''s language is two letters too');
insert into public.push_tokens (token, user_id) values (repeat('cd', 32), tests.get_supabase_uid('ada'));
select tests.authenticate_as_relay();
select is((select language from relay.apns_tokens(tests.get_supabase_uid('ada'))), 'en', 'English when the app did not say');

select * from finish();
rollback;
