-- One user with a phone on relay-one and public.bench_cycle(): relay.open_requests of five
-- requests, then relay.settle_many of five denials — the batched calls of a loaded instance,
-- for a single-client pgbench (Benchmarks/batch_pgbench.sh). Bench databases only.
insert into auth.users (id, aud, role, email, raw_user_meta_data, created_at, updated_at)
values ('00000000-0000-4000-8000-0000000000e1', 'authenticated', 'authenticated', 'e@example.com', '{}', now(), now());
insert into auth.sessions (id, user_id, created_at)
values ('00000000-0000-4000-8000-0000000000e2', '00000000-0000-4000-8000-0000000000e1', now());
select relay.register_instance('relay-one');
select relay.device_hellos('relay-one', jsonb_build_array(jsonb_build_object(
  'connection', '00000000-0000-4000-8000-0000000000e3', 'user', '00000000-0000-4000-8000-0000000000e1',
  'session', '00000000-0000-4000-8000-0000000000e2', 'device', '00000000-0000-4000-8000-0000000000e4',
  'name', 'Phone', 'platform', 'ios', 'app_version', '1', 'opened_at', now())));
create function public.bench_cycle() returns void language plpgsql as $$
declare
  v_ids uuid[] := array[gen_random_uuid(), gen_random_uuid(), gen_random_uuid(), gen_random_uuid(), gen_random_uuid()];
begin
  perform relay.open_requests('relay-one', (select jsonb_agg(jsonb_build_object('id', i,
    'owner', '00000000-0000-4000-8000-0000000000e1', 'client_id', 'claude', 'client_name', 'Claude',
    'reply_key', repeat('A', 43) || '=', 'expires_at', extract(epoch from now() + interval '5 minutes'),
    'max_waiting', 20)) from unnest(v_ids) i));
  perform relay.settle_many('relay-one', (select jsonb_agg(jsonb_build_object('id', i,
    'user', '00000000-0000-4000-8000-0000000000e1', 'device', '00000000-0000-4000-8000-0000000000e4',
    'outcome', 'denied', 'reason', 'user')) from unnest(v_ids) i));
end;
$$;
