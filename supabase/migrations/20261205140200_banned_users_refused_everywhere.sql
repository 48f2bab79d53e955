-- A banned or deleted user is refused on every path (docs/agents.md, "Credentials").
-- relay.agent_key_owner, relay.oauth_decide, oauth_redeem_code and oauth_refresh refused a
-- user whose auth.users row is banned (banned_until not yet passed) or soft-deleted
-- (deleted_at), but the session check the relay makes for every agent token and phone
-- socket (relay.session_states, and through it every hello) did not, and nothing closed
-- such a user's sockets. Now session_states says signed_out for them, the heartbeat's
-- relay.revoked_connections closes their sockets, and an update of auth.users that bans or
-- deletes a user records their sessions as revoked, drops their agent keys from every
-- instance's cache and abandons the requests waiting for or by them.

create or replace function relay.session_states(p_sessions uuid[], p_users uuid[])
returns text[]
language plpgsql
stable
security definer
set search_path = ''
as $$
begin
  if p_sessions is null or p_users is null or cardinality(p_sessions) <> cardinality(p_users)
     or cardinality(p_sessions) > 1000 then
    raise exception 'session_states needs as many users as sessions, at most 1000' using errcode = '22023';
  end if;
  if array_position(p_sessions, null) is not null or array_position(p_users, null) is not null then
    raise exception 'session_states needs session and user ids' using errcode = '22004';
  end if;
  return array(
    select case
             when not exists (select from auth.users u
                              where u.id = x.user_id and u.deleted_at is null
                                and (u.banned_until is null or u.banned_until < now())) then 'signed_out'
             when exists (select from auth.sessions s
                          where s.id = x.session_id and s.user_id = x.user_id
                            and (s.not_after is null or s.not_after > now())) then
               case when exists (select from private.revoked_sessions r where r.session_id = x.session_id)
                    then 'device_removed' else 'alive' end
             when exists (select from private.oauth_families f join public.oauth_grants g on g.id = f.grant_id
                          where f.id = x.session_id and g.user_id = x.user_id
                            and f.revoked_at is null and f.expires_at > now()) then 'alive'
             else 'signed_out'
           end
    from unnest(p_sessions, p_users) with ordinality as x(session_id, user_id, n)
    order by x.n);
end;
$$;
comment on function relay.session_states(uuid[], uuid[]) is
  'The state of each (session, user) pair, in order: alive, signed_out (no auth.sessions row or live token family of the relay''s OAuth server, past not_after, or a banned or deleted user) or device_removed (revoked by removing its device).';

create or replace function relay.revoked_connections(p_instance text)
returns setof uuid
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_checked timestamptz;
  v_since timestamptz;
begin
  perform private.check_instance_id(p_instance);
  select revocations_checked_at into v_checked from relay.instances where id = p_instance for update;
  update relay.instances set revocations_checked_at = now() where id = p_instance;
  v_since := v_checked - interval '1 minute';
  return query
    with candidates as (
      select c.id from relay.connections c
      where v_checked is null and c.instance_id = p_instance
      union
      select c.id from private.revocations r join relay.connections c on c.session_id = r.session_id
      where r.revoked_at >= v_since and c.instance_id = p_instance
      union
      select c.id from private.revocations r join relay.connections c on c.device_id = r.device_id
      where r.revoked_at >= v_since and c.instance_id = p_instance
      union
      select c.id from auth.sessions s join relay.connections c on c.session_id = s.id
      where s.not_after >= v_since and s.not_after <= now() and c.instance_id = p_instance),
    doomed as (
      select c.id from relay.connections c join candidates k on k.id = c.id
      where c.session_id is null
         or not exists (select from auth.sessions s
                        where s.id = c.session_id and s.user_id = c.user_id
                          and (s.not_after is null or s.not_after > now()))
         or exists (select from private.revoked_sessions r where r.session_id = c.session_id)
         or exists (select from public.devices d where d.id = c.device_id and d.revoked_at is not null)
         or not exists (select from auth.users u
                        where u.id = c.user_id and u.deleted_at is null
                          and (u.banned_until is null or u.banned_until < now()))
      order by c.device_id, c.id
      for update of c)
    delete from relay.connections c using doomed where c.id = doomed.id
    returning c.id;
end;
$$;
comment on function relay.revoked_connections(text) is
  'Forgets and returns the sockets on INSTANCE whose session ended, whose device was removed or whose user was banned or deleted since its last check (row locks in (device, id) order).';

create or replace function private.end_refused_user()
returns trigger
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_request record;
begin
  if not ((new.deleted_at is not null or coalesce(new.banned_until >= now(), false))
          and old.deleted_at is null and (old.banned_until is null or old.banned_until < now())) then
    return null;
  end if;
  insert into private.revocations (session_id) select s.id from auth.sessions s where s.user_id = new.id;
  perform private.notify('whereabot_key', jsonb_build_object('key_id', k.id))
  from public.agent_keys k where k.user_id = new.id and k.revoked_at is null;
  for v_request in
    update relay.pending_requests set settled_at = now(), outcome = 'abandoned'
    where settled_at is null and (owner_id = new.id or requester_id = new.id)
    returning id, owner_id
  loop
    perform private.notify_cancel(v_request.id, v_request.owner_id);
  end loop;
  return null;
end;
$$;
comment on function private.end_refused_user() is
  'AFTER UPDATE trigger on auth.users (no column list: Auth''s own migrations must stay free to alter its columns): a user just banned or deleted has their sockets closed at the next heartbeat, their agent keys dropped from every cache and their waiting requests abandoned; returns at once for any other update.';
revoke execute on function private.end_refused_user() from public, anon, authenticated;

-- CREATE OR REPLACE: dropping a trigger needs to own auth.users (supabase_auth_admin);
-- replacing one needs only the TRIGGER privilege the migration role holds. No column list
-- and no WHEN clause (see whereabot_claim_waiting_shares in 15_location_shares.sql).
create or replace trigger whereabot_end_refused_user
  after update on auth.users
  for each row execute function private.end_refused_user();
