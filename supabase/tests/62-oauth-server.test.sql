-- The relay as the agents' OAuth 2.1 authorization server (35_relay_oauth_server.sql):
-- grants under RLS, bounded registration, consent once per request, codes redeemed once
-- (PKCE, redirect URI, resource), refresh rotation with reuse detection, revocation by the
-- owning client only, token families as sessions, a deleted grant ending its tokens and
-- its waiting requests, Stop all sharing, client names and the sweep.
begin;
select plan(94);

select tests.create_supabase_user('ada');
select tests.create_supabase_user('bob');
select tests.create_supabase_user('eve');
select tests.create_supabase_user('cy');
insert into public.location_shares (owner_id, viewer_id) values (tests.get_supabase_uid('ada'), tests.get_supabase_uid('bob'));

-- C1 registered the authorization_code grant only, C2 the refresh_token grant too; CR is
-- only for the RLS checks, CS a client nobody used for 40 days.
create temp table k (name text primary key, v text);
insert into k values
  ('C1', 'wbc_' || repeat('1', 32)), ('C2', 'wbc_' || repeat('2', 32)), ('CR', 'wbc_' || repeat('9', 32)),
  ('CS', 'wbc_' || repeat('5', 32)), ('RU', 'http://127.0.0.1:33418/callback'),
  ('RES', 'https://relay.test.example/mcp'), ('DOC', 'https://agent.test.example/client.json');
grant all on k to public;
create function pg_temp.k(text) returns text language sql as $$ select v from k where name = $1 $$;
-- Digests as the relay sends them (SHA-256), and the S256 challenge of a verifier.
create function pg_temp.d(text) returns bytea language sql as $$ select sha256(convert_to($1, 'UTF8')) $$;
create function pg_temp.ch(text) returns text language sql as $$
  select rtrim(translate(encode(sha256(convert_to($1, 'UTF8')), 'base64'), '+/', '-_'), '=')
$$;
create function pg_temp.uid(text) returns uuid language sql as $$ select tests.get_supabase_uid($1) $$;
-- An authorization request of CLIENT (its verifier: the request id; its state: state-ID).
create function pg_temp.begin(p_id uuid, p_client text, p_scope text default 'location', p_seconds int default 600)
returns text language sql as $$
  select relay.oauth_begin(p_id, pg_temp.k(p_client), p_client || ' agent', 'agent.test.example', pg_temp.k('RU'),
    pg_temp.ch(p_id::text), 'state-' || p_id, p_scope, pg_temp.k('RES'), p_seconds)
$$;
-- USER approves it; the code is code-ID.
create function pg_temp.approve(p_id uuid, p_user text) returns jsonb language sql as $$
  select relay.oauth_decide(p_id, pg_temp.uid(p_user), true, pg_temp.d('code-' || p_id), 60)
$$;
-- The token request with code-ID, as CLIENT, into FAMILY, with refresh token REFRESH.
create function pg_temp.redeem(p_id uuid, p_client text, p_family uuid, p_refresh text default null,
  p_redirect text default null, p_verifier text default null, p_resource text default null)
returns jsonb language sql as $$
  select relay.oauth_redeem_code(pg_temp.d('code-' || p_id), pg_temp.k(p_client), coalesce(p_redirect, pg_temp.k('RU')),
    pg_temp.ch(coalesce(p_verifier, p_id::text)), p_resource, p_family, pg_temp.d(p_refresh), 3600)
$$;
create function pg_temp.refresh(p_old text, p_client text, p_new text) returns jsonb language sql as $$
  select relay.oauth_refresh(pg_temp.d(p_old), pg_temp.k(p_client), pg_temp.d(p_new), 3600)
$$;
create function pg_temp.state(p_family uuid, p_user text) returns text language sql as $$
  select (relay.session_states(array[p_family], array[pg_temp.uid(p_user)]))[1]
$$;
-- Deletes as the calling role (RLS applies) and says how many rows went.
create function pg_temp.delete_grants() returns int language sql as $$
  with d as (delete from public.oauth_grants returning 1) select count(*)::int from d
$$;
create function pg_temp.grant_id(p_user text, p_client text) returns uuid language sql security definer as $$
  select id from public.oauth_grants where user_id = pg_temp.uid(p_user) and client_id = pg_temp.k(p_client)
$$;
grant execute on all functions in schema pg_temp to public;

-- ---------------------------------------------------------------- grants under RLS
insert into public.oauth_grants (user_id, client_id, client_name) values
  (pg_temp.uid('ada'), pg_temp.k('CR'), 'Ada''s agent'), (pg_temp.uid('bob'), pg_temp.k('CR'), 'Bob''s agent');

select tests.authenticate_as('ada');
select results_eq($$ select client_name from public.oauth_grants $$, array['Ada''s agent'],
  'a person reads the agents they connected, and only theirs');
select throws_ok($$ insert into public.oauth_grants (user_id, client_id) values (auth.uid(), 'wbc_' || repeat('8', 32)) $$,
  '42501', null, 'nobody connects an agent by writing the table (only the consent page does, through the relay)');
select throws_ok($$ update public.oauth_grants set scope = 'location offline_access' $$, '42501', null,
  'nor changes a grant');

select tests.authenticate_as('eve');
select is_empty($$ select * from public.oauth_grants $$, 'another person reads none of them');
select is(pg_temp.delete_grants(), 0, 'nor deletes any');

select tests.authenticate_as_agent('ada', pg_temp.k('CR'));
select is_empty($$ select * from public.oauth_grants $$, 'an agent''s token reads no grant, not even its own');
select is(pg_temp.delete_grants(), 0, 'nor deletes one');

select tests.clear_authentication();
select throws_ok($$ select * from public.oauth_grants $$, '42501', null, 'anon cannot read the table at all');
select throws_ok($$ delete from public.oauth_grants $$, '42501', null, 'nor delete from it');

select tests.authenticate_as_relay();
select throws_ok($$ select * from public.oauth_grants $$, '42501', null,
  'whereabot_relay cannot read public.oauth_grants (it goes through relay.oauth_*)');
select throws_ok($$ select * from private.oauth_clients $$, '42501', null, 'nor private.oauth_clients');
select throws_ok($$ select * from private.oauth_authorizations $$, '42501', null, 'nor private.oauth_authorizations');
select throws_ok($$ select * from private.oauth_families $$, '42501', null, 'nor private.oauth_families');
select throws_ok($$ select * from private.oauth_refresh_tokens $$, '42501', null, 'nor private.oauth_refresh_tokens');

select tests.authenticate_as('ada');
select is(pg_temp.delete_grants(), 1, 'a person disconnects the agent they connected');
reset role;
select is((select array_agg(client_name) from public.oauth_grants where client_id = pg_temp.k('CR')), array['Bob''s agent'],
  'only hers went');

-- ---------------------------------------------------------------- registration
select tests.authenticate_as_relay();
select throws_ok($$ select relay.oauth_register_client('wbc_' || repeat('G', 32), 'x', array['http://127.0.0.1/cb'],
  array['authorization_code'], 'none', null, '198.51.100.7') $$, '22023', null, 'a client id that is not wbc_ and 32 hex digits is refused');
select throws_ok($$ select relay.oauth_register_client('https://agent.test.example/client.json', 'x', array['http://127.0.0.1/cb'],
  array['authorization_code'], 'none', null, '198.51.100.7') $$, '22023', null, 'a document''s URL is not registered');
select is(relay.oauth_register_client(pg_temp.k('C1'), 'Claude Code', array[pg_temp.k('RU')], array['authorization_code'],
  'none', null, '198.51.100.7'), 'registered', 'a public client registers');
select is(relay.oauth_register_client(pg_temp.k('C2'), 'Other Agent', array[pg_temp.k('RU')],
  array['authorization_code', 'refresh_token'], 'client_secret_post', pg_temp.d('secret'), '198.51.100.7'), 'registered',
  'a confidential client registers with its secret''s digest');
select is((select array_agg(distinct r) from (
    select relay.oauth_register_client('wbc_' || lpad(to_hex(i), 32, '0'), 'n' || i, array[pg_temp.k('RU')],
      array['authorization_code'], 'none', null, '198.51.100.7') r from generate_series(1, 18) i) x), array['registered'],
  'an address registers 20 clients within an hour');
select is(relay.oauth_register_client('wbc_' || lpad('15', 32, '0'), 'n21', array[pg_temp.k('RU')], array['authorization_code'],
  'none', null, '198.51.100.7'), 'address_full', 'its 21st within the hour is refused');
select is(relay.oauth_register_client('wbc_' || lpad('15', 32, '0'), 'n21', array[pg_temp.k('RU')], array['authorization_code'],
  'none', null, '198.51.100.8'), 'registered', 'another address still registers');
select is(relay.oauth_client(pg_temp.k('C2')) - 'redirect_uris',
  jsonb_build_object('kind', 'registered', 'client_name', 'Other Agent', 'grant_types', array['authorization_code', 'refresh_token'],
                     'auth_method', 'client_secret_post', 'secret_digest', encode(pg_temp.d('secret'), 'hex')),
  'relay.oauth_client returns what the client registered');

-- ---------------------------------------------------------------- consent
select is(pg_temp.begin('00000000-0000-4000-8000-0000000a0001', 'C1'), 'ok', 'an authorization request waits for consent');
select is(relay.oauth_consent_request('00000000-0000-4000-8000-0000000a0001'),
  jsonb_build_object('client_id', pg_temp.k('C1'), 'client_name', 'C1 agent', 'client_host', 'agent.test.example', 'scope', 'location'),
  'the consent page reads its client and scope');
select is(pg_temp.approve('00000000-0000-4000-8000-0000000a0001', 'ada'),
  jsonb_build_object('redirect_uri', pg_temp.k('RU'), 'state', 'state-00000000-0000-4000-8000-0000000a0001'),
  'approving sends the browser back to the client with its state');
select is(pg_temp.grant_id('ada', 'C1') is not null, true, 'approving keeps the person''s grant for the client');
select is(relay.oauth_consent_request('00000000-0000-4000-8000-0000000a0001'), null, 'a decided request is no longer shown');
select is(relay.oauth_decide('00000000-0000-4000-8000-0000000a0001', pg_temp.uid('ada'), true, pg_temp.d('another code'), 60), null,
  'nor decided again');
select is(relay.oauth_decide('00000000-0000-4000-8000-0000000a0001', pg_temp.uid('ada'), false, null, null), null,
  'not even to deny it');

select from pg_temp.begin('00000000-0000-4000-8000-0000000a0002', 'C1', 'location offline_access');
select pg_temp.approve('00000000-0000-4000-8000-0000000a0002', 'ada');
select is((select count(*)::int from relay.oauth_grants(pg_temp.uid('ada')) g, jsonb_array_elements(g) e
           where e ->> 'client_id' = pg_temp.k('C1')), 1,
  'approving the same client again keeps one grant per person and client');

select from pg_temp.begin('00000000-0000-4000-8000-0000000a0003', 'C2');
select is(relay.oauth_decide('00000000-0000-4000-8000-0000000a0003', pg_temp.uid('ada'), false, null, null),
  jsonb_build_object('redirect_uri', pg_temp.k('RU'), 'state', 'state-00000000-0000-4000-8000-0000000a0003'),
  'denying also sends the browser back with its state');
select is(pg_temp.grant_id('ada', 'C2'), null, 'and keeps no grant');
select is(relay.oauth_consent_request('00000000-0000-4000-8000-0000000a0003'), null, 'a denied request is forgotten');

select from pg_temp.begin('00000000-0000-4000-8000-0000000a0004', 'C1', 'location', 10);
reset role;
update private.oauth_authorizations set expires_at = now() - interval '1 second' where id = '00000000-0000-4000-8000-0000000a0004';
select tests.authenticate_as_relay();
select is(relay.oauth_consent_request('00000000-0000-4000-8000-0000000a0004'), null, 'an expired request is not shown');
select is(pg_temp.approve('00000000-0000-4000-8000-0000000a0004', 'ada'), null, 'nor approved');

reset role;
update auth.users set banned_until = now() + interval '1 day' where id = pg_temp.uid('eve');
select tests.authenticate_as_relay();
select from pg_temp.begin('00000000-0000-4000-8000-0000000a0005', 'C1');
select is(pg_temp.approve('00000000-0000-4000-8000-0000000a0005', 'eve'), null, 'a banned person cannot approve');
select is(pg_temp.grant_id('eve', 'C1'), null, 'and gets no grant');

select throws_ok($$ select relay.oauth_decide('00000000-0000-4000-8000-0000000a0005', tests.get_supabase_uid('ada'), true, null, 60) $$,
  '22023', null, 'an approval without a code digest is refused');
select throws_ok($$ select pg_temp.begin(gen_random_uuid(), 'C1', 'location', 7200) $$, '22023', null,
  'a request living more than an hour is refused');

-- ---------------------------------------------------------------- codes
select is(pg_temp.redeem('00000000-0000-4000-8000-0000000a0001', 'C1', '00000000-0000-4000-8000-0000000f0001', 'r1',
  p_verifier => 'not the verifier'), '{"error": "invalid_grant"}'::jsonb, 'a code with the wrong PKCE verifier is refused');
select is(pg_temp.redeem('00000000-0000-4000-8000-0000000a0001', 'C1', '00000000-0000-4000-8000-0000000f0001', 'r1',
  p_redirect => 'http://127.0.0.1:33418/other'), '{"error": "invalid_grant"}'::jsonb, 'so is one with another redirect URI');
select is(pg_temp.redeem('00000000-0000-4000-8000-0000000a0001', 'C2', '00000000-0000-4000-8000-0000000f0001', 'r1'),
  '{"error": "invalid_grant"}'::jsonb, 'and one another client presents');
select is(pg_temp.redeem('00000000-0000-4000-8000-0000000a0001', 'C1', '00000000-0000-4000-8000-0000000f0001', 'r1',
  p_resource => 'https://elsewhere.test.example/mcp'), '{"error": "invalid_target"}'::jsonb,
  'a code asked for another resource is refused with invalid_target');
select is(pg_temp.redeem('00000000-0000-4000-8000-0000000a0001', 'C1', '00000000-0000-4000-8000-0000000f0001', 'r1',
  p_resource => pg_temp.k('RES')),
  jsonb_build_object('user_id', pg_temp.uid('ada'), 'email', 'ada@test.example', 'family_id', '00000000-0000-4000-8000-0000000f0001',
                     'client_id', pg_temp.k('C1'), 'scope', 'location', 'resource', pg_temp.k('RES'), 'refresh', false),
  'the right code, client, redirect URI, verifier and resource make a family (no refresh token: neither offline_access nor the grant registered)');
select is(pg_temp.state('00000000-0000-4000-8000-0000000f0001', 'ada'), 'alive', 'the family is a live session of the person');
select is(pg_temp.state('00000000-0000-4000-8000-0000000f0001', 'bob'), 'signed_out', 'and of nobody else');
select is(pg_temp.redeem('00000000-0000-4000-8000-0000000a0001', 'C1', '00000000-0000-4000-8000-0000000f0009', 'r9'),
  '{"error": "invalid_grant", "reused": true}'::jsonb, 'a code redeemed twice is refused as reused');
select is(pg_temp.state('00000000-0000-4000-8000-0000000f0001', 'ada'), 'signed_out',
  'and the family its first use made is revoked');
select is(pg_temp.state('00000000-0000-4000-8000-0000000f0009', 'ada'), 'signed_out', 'the second use made none');

select is(pg_temp.redeem('00000000-0000-4000-8000-0000000a0002', 'C1', '00000000-0000-4000-8000-0000000f0002', 'r2') ->> 'refresh',
  'true', 'a code with offline_access gets a refresh token');
select from pg_temp.begin('00000000-0000-4000-8000-0000000a0006', 'C2');
select pg_temp.approve('00000000-0000-4000-8000-0000000a0006', 'ada');
select is(pg_temp.redeem('00000000-0000-4000-8000-0000000a0006', 'C2', '00000000-0000-4000-8000-0000000f0006', 'r6') ->> 'refresh',
  'true', 'so does a client that registered the refresh_token grant');

select from pg_temp.begin('00000000-0000-4000-8000-0000000a0007', 'C1');
select pg_temp.approve('00000000-0000-4000-8000-0000000a0007', 'ada');
reset role;
update private.oauth_authorizations set expires_at = now() - interval '1 second' where id = '00000000-0000-4000-8000-0000000a0007';
select tests.authenticate_as_relay();
select is(pg_temp.redeem('00000000-0000-4000-8000-0000000a0007', 'C1', '00000000-0000-4000-8000-0000000f0007', 'r7'),
  '{"error": "invalid_grant"}'::jsonb, 'an expired code is refused');
select is(pg_temp.state('00000000-0000-4000-8000-0000000f0007', 'ada'), 'signed_out', 'and makes no family');

-- ---------------------------------------------------------------- refresh
select is(pg_temp.refresh('r6', 'C1', 'r6b'), '{"error": "invalid_grant"}'::jsonb,
  'another client''s refresh with the token is refused');
select is(pg_temp.state('00000000-0000-4000-8000-0000000f0006', 'ada'), 'alive', 'and ends nothing');
select is(pg_temp.refresh('r6', 'C2', 'r6b') - 'email',
  jsonb_build_object('user_id', pg_temp.uid('ada'), 'family_id', '00000000-0000-4000-8000-0000000f0006', 'client_id', pg_temp.k('C2'),
                     'scope', 'location', 'resource', pg_temp.k('RES'), 'refresh', true),
  'a refresh rotates the token and the family lives on');
select is(pg_temp.refresh('r6', 'C2', 'r6c'), '{"error": "invalid_grant", "reused": true}'::jsonb,
  'the old token used again is refused as reused');
select is(pg_temp.state('00000000-0000-4000-8000-0000000f0006', 'ada'), 'signed_out', 'and revokes its family');
select is(pg_temp.refresh('r6b', 'C2', 'r6d'), '{"error": "invalid_grant"}'::jsonb,
  'so the rotated token fails too');

-- ---------------------------------------------------------------- revocation
select is(relay.oauth_revoke(pg_temp.d('r2'), null, pg_temp.k('C2')), false, 'another client cannot revoke a refresh token');
select is(pg_temp.state('00000000-0000-4000-8000-0000000f0002', 'ada'), 'alive', 'its family lives on');
select is(relay.oauth_revoke(pg_temp.d('r2'), null, pg_temp.k('C1')), true, 'the client revokes its refresh token');
select is(pg_temp.state('00000000-0000-4000-8000-0000000f0002', 'ada'), 'signed_out', 'which ends its family');
select is(pg_temp.refresh('r2', 'C1', 'r2b'), '{"error": "invalid_grant"}'::jsonb, 'and the token no longer refreshes');

select from pg_temp.begin('00000000-0000-4000-8000-0000000a0008', 'C1');
select pg_temp.approve('00000000-0000-4000-8000-0000000a0008', 'ada');
select pg_temp.redeem('00000000-0000-4000-8000-0000000a0008', 'C1', '00000000-0000-4000-8000-0000000f0008');
select is(relay.oauth_revoke(null, '00000000-0000-4000-8000-0000000f0008', pg_temp.k('C2')), false,
  'another client cannot revoke an access token''s family');
select is(relay.oauth_revoke(null, '00000000-0000-4000-8000-0000000f0008', pg_temp.k('C1')), true,
  'the client revokes the family its access token names');
select is(pg_temp.state('00000000-0000-4000-8000-0000000f0008', 'ada'), 'signed_out', 'the family is over');
select is(relay.oauth_revoke(null, '00000000-0000-4000-8000-0000000f0008', pg_temp.k('C1')), false, 'and ends once');

-- ---------------------------------------------------------------- a deleted grant ends its tokens and requests
reset role;
-- Records every NOTIFY (rolled back with the test).
create temp table notified (channel text, payload jsonb);
grant all on notified to public;
create or replace function private.notify(p_channel text, p_payload jsonb)
returns void
language plpgsql
set search_path = ''
as $$
begin
  insert into pg_temp.notified values (p_channel, p_payload);
  perform pg_catalog.pg_notify(p_channel, p_payload::text);
end;
$$;
select tests.authenticate_as_relay();
select from pg_temp.begin('00000000-0000-4000-8000-0000000a0010', 'C1');
select pg_temp.approve('00000000-0000-4000-8000-0000000a0010', 'ada');
select pg_temp.redeem('00000000-0000-4000-8000-0000000a0010', 'C1', '00000000-0000-4000-8000-0000000f0010');
select from pg_temp.begin('00000000-0000-4000-8000-0000000a0011', 'C1');
select pg_temp.approve('00000000-0000-4000-8000-0000000a0011', 'bob');
select relay.register_instance('relay-a');
select relay.register_instance('relay-b');
select tests.device_hello('relay-b', gen_random_uuid(), pg_temp.uid('ada'), tests.get_session_id('ada'),
  '00000000-0000-4000-8000-00000000000a', 'Phone A', 'ios', '1', now());
-- Ada's own C1 agent, her C2 agent, bob's C1 agent asking for Ada, bob's own C1 agent.
select relay.open_request('00000000-0000-4000-8000-0000000b0001', pg_temp.uid('ada'), null, pg_temp.k('C1'), 'C1', 'relay-a',
  decode(repeat('ab', 32), 'hex'), now() + interval '60 seconds');
select relay.open_request('00000000-0000-4000-8000-0000000b0002', pg_temp.uid('ada'), null, pg_temp.k('C2'), 'C2', 'relay-a',
  decode(repeat('ab', 32), 'hex'), now() + interval '60 seconds');
select relay.open_request('00000000-0000-4000-8000-0000000b0003', pg_temp.uid('ada'), pg_temp.uid('bob'), pg_temp.k('C1'), 'C1',
  'relay-a', decode(repeat('ab', 32), 'hex'), now() + interval '60 seconds');
select relay.open_request('00000000-0000-4000-8000-0000000b0004', pg_temp.uid('bob'), null, pg_temp.k('C1'), 'C1', 'relay-a',
  decode(repeat('ab', 32), 'hex'), now() + interval '60 seconds');
reset role;
create function pg_temp.outcome(p_id uuid) returns text language sql as $$
  select coalesce(outcome, 'waiting') from relay.pending_requests where id = p_id
$$;
delete from notified;
select tests.authenticate_as_relay();

select is(pg_temp.state('00000000-0000-4000-8000-0000000f0010', 'ada'), 'alive', 'a family of Ada''s C1 grant is alive');
select is(relay.oauth_disconnect(pg_temp.uid('bob'), pg_temp.grant_id('ada', 'C1')), false,
  'nobody else disconnects her agent');
select is(relay.oauth_disconnect(pg_temp.uid('ada'), pg_temp.grant_id('ada', 'C1')), true, 'she disconnects it');
select is(pg_temp.state('00000000-0000-4000-8000-0000000f0010', 'ada'), 'signed_out', 'its tokens'' family is over');
reset role;
select is(pg_temp.outcome('00000000-0000-4000-8000-0000000b0001'), 'abandoned',
  'the request her C1 agent opened and that waits is abandoned');
select is((select array_agg(channel || ' ' || (payload - 'owner')::text) from notified where payload ->> 'kind' = 'cancel'),
  array[private.instance_channel('relay-b') || ' ' || '{"id": "00000000-0000-4000-8000-0000000b0001", "kind": "cancel"}'],
  'the instance holding her phone''s socket is told to cancel its ping, and only that one');
select is(array[pg_temp.outcome('00000000-0000-4000-8000-0000000b0002'), pg_temp.outcome('00000000-0000-4000-8000-0000000b0003'),
                pg_temp.outcome('00000000-0000-4000-8000-0000000b0004')], array['waiting', 'waiting', 'waiting'],
  'her other agent''s request and the ones bob''s agent opened wait on');
select tests.authenticate_as('bob');
select is(pg_temp.delete_grants(), 2, 'bob deletes his grants himself (the consent one and the RLS one)');
reset role;
select is(array[pg_temp.outcome('00000000-0000-4000-8000-0000000b0003'), pg_temp.outcome('00000000-0000-4000-8000-0000000b0004')],
  array['abandoned', 'abandoned'], 'which abandons what his C1 agent asked, of Ada and of himself');
select is(pg_temp.outcome('00000000-0000-4000-8000-0000000b0002'), 'waiting', 'Ada''s C2 agent''s request still waits');

-- ---------------------------------------------------------------- stop all sharing
insert into public.oauth_grants (user_id, client_id) values
  (pg_temp.uid('cy'), pg_temp.k('C1')), (pg_temp.uid('cy'), pg_temp.k('C2')), (pg_temp.uid('bob'), pg_temp.k('C2'));
insert into private.oauth_families (id, grant_id, resource, scope, expires_at)
values ('00000000-0000-4000-8000-0000000f0020', pg_temp.grant_id('cy', 'C2'), pg_temp.k('RES'), 'location', now() + interval '1 hour');
select tests.authenticate_as_relay();
select is(pg_temp.state('00000000-0000-4000-8000-0000000f0020', 'cy'), 'alive', 'Cy''s agent is signed in');
select is(relay.stop_all_sharing(pg_temp.uid('cy')),
  '{"always_allowed": 0, "shares": 0, "agent_keys": 0, "agents": 2, "requests": 0}'::jsonb,
  'Stop all sharing disconnects every agent she connected and says how many');
select is(relay.oauth_grants(pg_temp.uid('cy')), '[]'::jsonb, 'none is left');
select is(pg_temp.state('00000000-0000-4000-8000-0000000f0020', 'cy'), 'signed_out', 'and their tokens are over');
select is(jsonb_array_length(relay.oauth_grants(pg_temp.uid('bob'))), 1, 'bob''s agent stays connected');

-- ---------------------------------------------------------------- client names
select relay.oauth_remember_document(pg_temp.k('DOC'), 'Doc Agent', array[pg_temp.k('RU')], array['authorization_code'], 'none');
select is(relay.client_name(pg_temp.k('C1')), 'Claude Code', 'a registered client''s name');
select is(relay.client_name(pg_temp.k('DOC')), 'Doc Agent', 'a client metadata document''s name');
select is(relay.client_name('wbc_' || repeat('7', 32)), null, 'an unknown client has none');

-- ---------------------------------------------------------------- the sweep
select from pg_temp.begin('00000000-0000-4000-8000-0000000a0030', 'C1');
select from pg_temp.begin('00000000-0000-4000-8000-0000000a0031', 'C1');
select relay.oauth_register_client(pg_temp.k('CS'), 'Stale', array[pg_temp.k('RU')], array['authorization_code'], 'none', null,
  '198.51.100.9');
reset role;
update private.oauth_authorizations set expires_at = now() - interval '61 minutes' where id = '00000000-0000-4000-8000-0000000a0030';
update private.oauth_authorizations set expires_at = now() - interval '59 minutes' where id = '00000000-0000-4000-8000-0000000a0031';
update private.oauth_clients set last_used_at = now() - interval '40 days' where client_id in (pg_temp.k('CS'), pg_temp.k('C2'));
-- What the sweep counts (a family's refresh tokens go with it, uncounted); other rows of a
-- database that has its own (make test-db DATABASE_URL=…) may go too.
create function pg_temp.sweepable() returns int language sql as $$
  select ((select count(*) from private.oauth_authorizations) + (select count(*) from private.oauth_families)
          + (select count(*) from private.oauth_clients))::int
$$;
insert into k values ('before', pg_temp.sweepable()::text);
select tests.authenticate_as_relay();
insert into k values ('swept', relay.sweep_oauth(30, 100000)::text);
reset role;
select is(pg_temp.k('swept')::int, pg_temp.k('before')::int - pg_temp.sweepable(), 'the sweep says how many rows it removed');
select is(array(select id::text from private.oauth_authorizations
                where id in ('00000000-0000-4000-8000-0000000a0030', '00000000-0000-4000-8000-0000000a0031')),
  array['00000000-0000-4000-8000-0000000a0031'], 'it removes authorizations expired over an hour ago, not later ones');
select is(array(select client_id from private.oauth_clients where client_id in (pg_temp.k('CS'), pg_temp.k('C2'), pg_temp.k('C1'))
                order by client_id),
  array[pg_temp.k('C1'), pg_temp.k('C2')],
  'it removes a registered client unused for 30 days without a grant; one with a grant and a recent one stay');

-- Bounds on what an unauthenticated client can make the database keep.
select tests.authenticate_as_relay();
select is((select count(*) from generate_series(1, 50) n
           where pg_temp.begin(('00000000-0000-4000-8000-00000b' || lpad(n::text, 6, '0'))::uuid, 'CS') = 'ok'),
  50::bigint, 'one client may keep 50 undecided authorization requests');
select is(pg_temp.begin('00000000-0000-4000-8000-00000c000001', 'CS'), 'client_full',
  'its 51st waits for none of them to end: client_full');
reset role;
insert into private.oauth_clients (client_id, kind, redirect_uris)
  select 'https://flood.test.example/' || n || '.json', 'document', array['https://flood.test.example/cb']
  from generate_series(1, 10000 - (select count(*) from private.oauth_clients where kind = 'document')) n;
select tests.authenticate_as_relay();
select throws_ok($$ select relay.oauth_remember_document('https://flood.test.example/new.json', 'New',
                      array['https://flood.test.example/cb'], array['authorization_code'], 'none') $$,
  '53400', null, 'at most 10,000 client metadata documents are kept');
reset role;

select * from finish();
rollback;
