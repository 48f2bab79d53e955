-- relay.joinable_request: a repeated get_phone_location of one credential for one person
-- finds the request it already has waiting, on any instance (docs/agents.md, "Timeouts");
-- never another credential's or another person's, never a task, never one that has ended.
-- tasks/list names tasks only (`listed`), not a call's request, though both keep a wrapped secret.
begin;
select plan(12);

select tests.create_supabase_user('ada', 'ada@example.com', 'Ada');
select tests.create_supabase_user('bob', 'bob@example.com', 'Bob');
create temp table ids (k text primary key, v uuid);
insert into ids values ('ada', tests.get_supabase_uid('ada')), ('bob', tests.get_supabase_uid('bob'));
grant select on ids to public;

create function pg_temp.open(p_id uuid, p_owner text, p_client text, p_durable boolean) returns jsonb language sql as $$
  select relay.open_durable_request(p_id, (select v from ids where k = p_owner), null, p_client, 'Claude', null, 'relay-one',
    decode(repeat('A', 43) || '=', 'base64'), now() + interval '2 minutes', now() + interval '5 minutes', p_durable,
    decode(repeat('B', 64), 'base64'), 20)
$$;
create function pg_temp.joinable(p_owner text, p_client text, p_user text default 'ada') returns uuid language sql as $$
  select id from relay.joinable_request((select v from ids where k = p_user), p_client, null, (select v from ids where k = p_owner))
$$;
grant execute on all functions in schema pg_temp to public;

select tests.authenticate_as_relay();
select relay.register_instance('relay-one');
select is(pg_temp.open('00000000-0000-4000-8000-0000000000a1', 'ada', 'claude', false)->>'status', 'opened',
  'Claude''s call asks Ada''s phones');
select is(pg_temp.open('00000000-0000-4000-8000-0000000000a2', 'ada', 'gpt', true)->>'status', 'opened',
  'GPT''s task asks them too');

select is(pg_temp.joinable('ada', 'claude'), '00000000-0000-4000-8000-0000000000a1'::uuid,
  'Claude''s repeated ask for Ada finds its waiting call');
select is((select octet_length(wrapped_secret) from relay.joinable_request((select v from ids where k = 'ada'), 'claude', null,
  (select v from ids where k = 'ada'))), 48, 'with its wrapped secret');
select is(pg_temp.joinable('ada', 'gpt'), null, 'a task is never joined');
select is(pg_temp.joinable('ada', 'gemini'), null, 'another client finds nothing');
select is(pg_temp.joinable('bob', 'claude'), null, 'another person''s phone is another request');
select is(pg_temp.joinable('ada', 'claude', 'bob'), null, 'another user with the same client id finds nothing');

select is((select array_agg(view->>'id') from relay.durable_requests((select v from ids where k = 'ada'), 'gpt', null, null, null, 10)),
  array['00000000-0000-4000-8000-0000000000a2'], 'tasks/list names the task');
select relay.make_durable('00000000-0000-4000-8000-0000000000a1', 'relay-one');
select is((select count(*) from relay.durable_requests((select v from ids where k = 'ada'), 'claude', null, null, null, 10)),
  0::bigint, 'but not a call''s request, even once its caller hung up and it outlives the call');
select is(pg_temp.joinable('ada', 'claude'), '00000000-0000-4000-8000-0000000000a1'::uuid, 'which a repeated ask still joins');

reset role;
update relay.pending_requests set settled_at = now(), outcome = 'denied' where id = '00000000-0000-4000-8000-0000000000a1';
select tests.authenticate_as_relay();
select is(pg_temp.joinable('ada', 'claude'), null, 'an answered request is joined no more: the next ask is a new one');

select * from finish();
rollback;
