-- One user with a phone on relay-one, for single-client pgbenches of a same-instance
-- locate's two calls (Benchmarks/locate_pgbench.sh): relay.open_request of one request,
-- then relay.settle of its fix kept on the waiter's instance (local_location). Bench
-- databases only.
insert into auth.users (id, aud, role, email, raw_user_meta_data, created_at, updated_at)
values ('00000000-0000-4000-8000-0000000000f1', 'authenticated', 'authenticated', 'f@example.com', '{}', now(), now());
insert into auth.sessions (id, user_id, created_at)
values ('00000000-0000-4000-8000-0000000000f2', '00000000-0000-4000-8000-0000000000f1', now());
select relay.register_instance('relay-one');
select relay.device_hellos('relay-one', jsonb_build_array(jsonb_build_object(
  'connection', '00000000-0000-4000-8000-0000000000f3', 'user', '00000000-0000-4000-8000-0000000000f1',
  'session', '00000000-0000-4000-8000-0000000000f2', 'device', '00000000-0000-4000-8000-0000000000f4',
  'name', 'Phone', 'platform', 'ios', 'app_version', '1', 'opened_at', now())));
