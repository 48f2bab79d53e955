-- private.notify and private.user_card: the bounds that keep every NOTIFY under 8000 bytes.
begin;
select plan(5);

select lives_ok($$ select private.notify('whereabot_test', jsonb_build_object('a', repeat('x', 7900))) $$,
  'a payload under 8000 bytes is sent');
select throws_ok($$ select private.notify('whereabot_test', jsonb_build_object('a', repeat('x', 8000))) $$,
  '54000', null, 'a payload of 8000 bytes or more is refused with 54000');
select throws_ok($$ select private.notify('whereabot_test', null) $$, '22004', null, 'a null payload is refused');

select tests.create_supabase_user('long', 'long@test.example', repeat('N', 9000));
select is(char_length(private.user_card(tests.get_supabase_uid('long')) ->> 'name'), 80,
  'a user''s shown name is cut to 80 characters (SPEC §6), so pings stay small');
select tests.create_supabase_user('plain', 'plain.person@test.example', '');
select is(private.user_card(tests.get_supabase_uid('plain')) ->> 'name', 'plain.person',
  'a user without a name is shown by the local part of their email');

select * from finish();
rollback;
