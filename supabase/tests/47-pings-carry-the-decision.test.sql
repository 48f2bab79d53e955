-- A ping carries the relay's decision (docs/protocol.md, "Messages"): always_allow is {precision}
-- when the owner always allows the agent (for that requester) when the ping is built, else
-- null — removed, expired, another agent or another requester's grant all say null.
begin;
select plan(7);

select tests.create_supabase_user('ada');
select tests.create_supabase_user('bob');
insert into public.location_shares (owner_id, viewer_id) values (tests.get_supabase_uid('ada'), tests.get_supabase_uid('bob'));

create function pg_temp.ping(p_client text, p_requester uuid default null) returns jsonb language sql as $$
  select relay.open_request(gen_random_uuid(), tests.get_supabase_uid('ada'), p_requester, p_client, 'Claude', 'relay-a',
    decode(repeat('ab', 32), 'hex'), now() + interval '1 minute', 50) -> 'ping'
$$;
grant execute on function pg_temp.ping(text, uuid) to whereabot_relay;

-- The owner's socket is on relay-a, so open_request returns the ping it sends there.
select tests.authenticate_as_relay();
select relay.register_instance('relay-a');
select tests.device_hello('relay-a', gen_random_uuid(), tests.get_supabase_uid('ada'), tests.get_session_id('ada'),
  '00000000-0000-4000-8000-0000000000a1', 'Ada''s phone', 'web', '1', now());
select is(pg_temp.ping('claude') -> 'always_allow', 'null'::jsonb, 'an agent the owner has not always allowed: ask');
reset role;

insert into public.always_allowed_agents (user_id, client_id, client_name) values (tests.get_supabase_uid('ada'), 'claude', 'Claude');
insert into public.always_allowed_agents (user_id, client_id, client_name, requester_id, precision)
values (tests.get_supabase_uid('ada'), 'shared-agent', 'Bob''s agent', tests.get_supabase_uid('bob'), 'approximate');
insert into public.always_allowed_agents (user_id, client_id, client_name, expires_at)
values (tests.get_supabase_uid('ada'), 'ended', 'Ended', now() - interval '1 second');

select tests.authenticate_as_relay();
select is(pg_temp.ping('claude') -> 'always_allow', '{"precision": "precise"}'::jsonb, 'an always-allowed agent: its precision');
select is(pg_temp.ping('shared-agent', tests.get_supabase_uid('bob')) -> 'always_allow', '{"precision": "approximate"}'::jsonb,
  'an always-allow for a requester, with its precision');
select is(pg_temp.ping('shared-agent') -> 'always_allow', 'null'::jsonb,
  'the same agent for the owner herself is not covered by the requester''s grant');
select is(pg_temp.ping('ended') -> 'always_allow', 'null'::jsonb, 'an always-allow that ended counts as absent');
reset role;

update public.always_allowed_agents set precision = 'approximate' where client_id = 'claude';
select tests.authenticate_as_relay();
select is(pg_temp.ping('claude') -> 'always_allow', '{"precision": "approximate"}'::jsonb, 'a narrowing holds from the next ping');
reset role;

delete from public.always_allowed_agents where client_id = 'claude';
select tests.authenticate_as_relay();
select is(pg_temp.ping('claude') -> 'always_allow', 'null'::jsonb, 'a removal holds from the next ping');
reset role;

select * from finish();
rollback;
