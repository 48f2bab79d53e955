-- Quiet hours' zone check reads private.time_zone_names, a copy of pg_timezone_names that
-- relay.refresh_time_zone_names renews at most daily — not the time-zone database itself,
-- which costs ~30 ms a query (docs/security.md, "Under floods").
begin;
select plan(9);

select tests.create_supabase_user('ada', 'ada@example.com', 'Ada');

select ok((select count(*) from private.time_zone_names) > 300, 'the migration copied the zone names');
select ok(exists (select from private.time_zone_names where name = 'Europe/Berlin'), 'Europe/Berlin among them');
select is((select count(*) from private.time_zone_names t
           where not exists (select from pg_catalog.pg_timezone_names z where z.name = t.name)), 0::bigint,
  'and nothing Postgres does not know');

select tests.authenticate_as_relay();
select is(relay.refresh_time_zone_names(), 0, 'a refresh within the day copies nothing');
select is(jsonb_array_length(relay.set_quiet_hours(tests.get_supabase_uid('ada'),
  '[{"days": [1, 2], "start": "22:00", "end": "07:00", "time_zone": "Europe/Berlin"}]')), 1, 'a known zone is saved');
select throws_ok($$select relay.set_quiet_hours(tests.get_supabase_uid('ada'),
  '[{"days": [1], "start": "22:00", "end": "07:00", "time_zone": "Mars/Olympus_Mons"}]')$$, '22023',
  'window 1: unknown time zone (use an IANA name such as Europe/Berlin)', 'an unknown one is refused');
select ok(position('pg_timezone_names' in (select prosrc from pg_proc where oid = 'relay.set_quiet_hours(uuid, jsonb)'::regprocedure)) = 0,
  'the check never reads pg_timezone_names');
reset role;

-- A day later the copy is renewed: a zone gone from Postgres goes, every known one is back.
update private.time_zone_names set refreshed_at = now() - interval '25 hours';
insert into private.time_zone_names (name, refreshed_at) values ('Atlantis/Capital', now() - interval '25 hours');
select tests.authenticate_as_relay();
select ok(relay.refresh_time_zone_names() > 300, 'a stale copy is renewed');
reset role;
select ok(not exists (select from private.time_zone_names where name = 'Atlantis/Capital'), 'without the zone Postgres dropped');

select * from finish();
rollback;
