-- One account never degrades another through a batched call (docs/security.md): an
-- account at its device cap gets too_many_devices for its own new device, and every other
-- hello of the same batch registers; the lock order is proven by Tests/Acceptance/test_hostile_round2.py.
begin;
select plan(7);

select tests.create_supabase_user('mallory');
select tests.create_supabase_user('victim');

create function pg_temp.hello(p_socket int, p_who text, p_device uuid)
returns jsonb language sql as $$
  select jsonb_build_object(
    'connection', ('00000000-0000-4000-8000-0000000003' || lpad(p_socket::text, 2, '0'))::uuid,
    'user', tests.get_supabase_uid(p_who), 'session', tests.get_session_id(p_who),
    'device', p_device, 'name', 'Phone', 'platform', 'android', 'app_version', '1', 'opened_at', now())
$$;
create function pg_temp.statuses(p_result jsonb) returns text[] language sql as $$
  select array_agg(r ->> 'status' order by n) from jsonb_array_elements(p_result -> 'results') with ordinality x(r, n)
$$;

-- Mallory fills the device cap through the API, as RLS allows.
select tests.authenticate_as('mallory');
insert into public.devices (id, user_id, name, platform)
select gen_random_uuid(), tests.get_supabase_uid('mallory'), 'Filler ' || n, 'android' from generate_series(1, 50) n;
select throws_ok($$ insert into public.devices (id, user_id, name, platform)
  values (gen_random_uuid(), tests.get_supabase_uid('mallory'), 'One more', 'android') $$,
  '54000', null, 'the 51st device is refused by the table (the cap of private.max_devices_per_user)');
select tests.clear_authentication();

select tests.authenticate_as_relay();
select relay.register_instance('relay-a');
create temp table stash (v jsonb);
grant all on stash to public;
insert into stash select relay.device_hellos('relay-a', jsonb_build_array(
  pg_temp.hello(1, 'victim', gen_random_uuid()),
  pg_temp.hello(2, 'mallory', gen_random_uuid()),
  pg_temp.hello(3, 'victim', gen_random_uuid())));
select is(pg_temp.statuses((select v from stash)), array['ok', 'too_many_devices', 'ok'],
  'a new device past the cap is too_many_devices alone; the other users'' hellos of the batch register');
reset role;
select is((select count(*)::int from relay.connections where user_id = tests.get_supabase_uid('victim')), 2,
  'the victim''s sockets are registered');
select is((select count(*)::int from relay.connections where user_id = tests.get_supabase_uid('mallory')), 0,
  'mallory''s socket is not');
select is((select count(*)::int from public.devices where user_id = tests.get_supabase_uid('mallory')), 50,
  'and no device was added past the cap');

-- A device mallory already has still connects (the cap is on new devices).
reset role;
select id as known_device from public.devices where user_id = tests.get_supabase_uid('mallory') limit 1 \gset
select tests.authenticate_as_relay();
select is(pg_temp.statuses(relay.device_hellos('relay-a', jsonb_build_array(pg_temp.hello(4, 'mallory', :'known_device')))),
  array['ok'], 'a known device of an account at its cap says hello as always');

-- A removed device frees its place.
reset role;
update public.devices set revoked_at = now()
where id = (select id from public.devices where user_id = tests.get_supabase_uid('mallory') and name = 'Filler 2');
select tests.authenticate_as_relay();
select is(pg_temp.statuses(relay.device_hellos('relay-a', jsonb_build_array(pg_temp.hello(5, 'mallory', gen_random_uuid())))),
  array['ok'], 'a removed device frees a place under the cap');

select * from finish();
rollback;
