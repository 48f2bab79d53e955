-- A share that ended ends (docs/security.md, "Sharing"): the sealed results of requests made
-- through it are deleted and their rows are unknown to the viewer's polls; the owner's
-- own requests and other viewers' are untouched.
begin;
select plan(6);

select tests.create_supabase_user('ada');
select tests.create_supabase_user('bob');
select tests.create_supabase_user('cy');

insert into public.location_shares (owner_id, viewer_id) values
  (tests.get_supabase_uid('ada'), tests.get_supabase_uid('bob')),
  (tests.get_supabase_uid('ada'), tests.get_supabase_uid('cy'));

-- Three settled durable requests for ada's phone, each with a sealed fix: through bob's
-- share, through cy's, and ada's own agent's.
insert into relay.pending_requests (id, owner_id, requester_id, client_id, waiter_instance, reply_key, expires_at,
                                    settled_at, outcome, resumable, durable, keep_until) values
  ('00000000-0000-4000-8000-0000000000e1', tests.get_supabase_uid('ada'), tests.get_supabase_uid('bob'), 'client-1',
   'relay-a', decode(repeat('ab', 32), 'hex'), now() + interval '5 minutes', now(), 'location', true, true,
   now() + interval '10 minutes'),
  ('00000000-0000-4000-8000-0000000000e2', tests.get_supabase_uid('ada'), tests.get_supabase_uid('cy'), 'client-1',
   'relay-a', decode(repeat('ab', 32), 'hex'), now() + interval '5 minutes', now(), 'location', true, true,
   now() + interval '10 minutes'),
  ('00000000-0000-4000-8000-0000000000e3', tests.get_supabase_uid('ada'), null, 'client-1',
   'relay-a', decode(repeat('ab', 32), 'hex'), now() + interval '5 minutes', now(), 'location', true, true,
   now() + interval '10 minutes');
insert into relay.sealed_results (request_id, sealed)
select id, 'sealed-' || id from relay.pending_requests where id::text like '00000000-0000-4000-8000-0000000000e_';

select tests.authenticate_as_relay();
select is(relay.durable_state('00000000-0000-4000-8000-0000000000e1', tests.get_supabase_uid('bob'), 'client-1', null,
  'relay-b')->>'sealed', 'sealed-00000000-0000-4000-8000-0000000000e1', 'while the share lasts, its viewer reads the result');
reset role;

update public.location_shares set revoked_at = now()
where owner_id = tests.get_supabase_uid('ada') and viewer_id = tests.get_supabase_uid('bob');

select is((select count(*)::int from relay.sealed_results where request_id = '00000000-0000-4000-8000-0000000000e1'), 0,
  'the ended share''s sealed result is deleted');
select tests.authenticate_as_relay();
select is(relay.durable_state('00000000-0000-4000-8000-0000000000e1', tests.get_supabase_uid('bob'), 'client-1', null,
  'relay-b')->>'status', 'unknown', 'the viewer''s poll finds nothing');
select is(relay.durable_state('00000000-0000-4000-8000-0000000000e2', tests.get_supabase_uid('cy'), 'client-1', null,
  'relay-b')->>'sealed', 'sealed-00000000-0000-4000-8000-0000000000e2', 'another viewer''s share goes on');
select is(relay.durable_state('00000000-0000-4000-8000-0000000000e3', tests.get_supabase_uid('ada'), 'client-1', null,
  'relay-b')->>'sealed', 'sealed-00000000-0000-4000-8000-0000000000e3', 'the owner''s own agent keeps its result');
reset role;

-- The owner deleting the share row ends it the same way.
delete from public.location_shares
where owner_id = tests.get_supabase_uid('ada') and viewer_id = tests.get_supabase_uid('cy');
select is((select count(*)::int from relay.sealed_results where request_id = '00000000-0000-4000-8000-0000000000e2'), 0,
  'a deleted share''s sealed result is deleted too');

select * from finish();
rollback;
