-- Creating and revoking is bounded (docs/agents.md, "Credentials"; README.md, Limits). The
-- caps on agent keys and location shares count live rows only and a revoked row was never
-- deleted, so one socket created and revoked thousands of keys in seconds (each revocation
-- a NOTIFY to every relay instance), and one session hundreds of shares. Now every
-- creation leaves a row in private.creations for an hour, whatever becomes of what it made,
-- and an account creates at most 25 agent keys and 20 shares in any hour (54000, as the
-- caps refuse); relay.sweep_oauth, called with the reap, deletes keys and shares revoked
-- more than 30 days ago and the creations past their hour. A revoked key deleted later
-- notifies no instance again.

create table private.creations (
  id bigint generated always as identity primary key,
  user_id uuid not null references auth.users (id) on delete cascade,
  kind text not null check (kind in ('agent_key', 'location_share')),
  created_at timestamptz not null default now()
);
comment on table private.creations is
  'One row per agent key or location share created, by account and time, kept an hour: what the hourly creation rates count.';
create index creations_user_id_kind_created_at_idx on private.creations (user_id, kind, created_at);
create index creations_created_at_idx on private.creations (created_at);
comment on index private.creations_user_id_kind_created_at_idx is
  'private.enforce_creation_rate: an account''s creations of a kind in the last hour; deleting a user (cascade).';
comment on index private.creations_created_at_idx is 'relay.sweep_oauth: the rows past the hour.';
alter table private.creations enable row level security;
revoke all on private.creations from public, anon, authenticated, service_role;

create or replace function private.max_agent_keys_per_hour()
returns int language sql immutable set search_path = '' as $$ select 25 $$;
comment on function private.max_agent_keys_per_hour() is
  'Agent keys one account may create in any hour, revoked ones included (a whole cap''s worth at once).';
revoke execute on function private.max_agent_keys_per_hour() from public, anon, authenticated;

create or replace function private.revoked_kept_for()
returns interval language sql immutable set search_path = '' as $$ select interval '30 days' $$;
comment on function private.revoked_kept_for() is
  'How long a revoked agent key or location share is kept before relay.sweep_oauth deletes it.';
revoke execute on function private.revoked_kept_for() from public, anon, authenticated;

create or replace function private.max_location_shares_per_hour()
returns int language sql immutable set search_path = '' as $$ select 20 $$;
comment on function private.max_location_shares_per_hour() is
  'Location shares one owner may create in any hour, revoked and deleted ones included.';
revoke execute on function private.max_location_shares_per_hour() from public, anon, authenticated;

create or replace function private.enforce_creation_rate()
returns trigger
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_kind text := tg_argv[0];
  v_user uuid := (to_jsonb(new) ->> tg_argv[1])::uuid;
  v_limit int := case tg_argv[0] when 'agent_key' then private.max_agent_keys_per_hour()
                                 when 'location_share' then private.max_location_shares_per_hour() end;
begin
  if v_user is null or v_limit is null then
    raise exception 'enforce_creation_rate needs a known kind and a user column' using errcode = '22004';
  end if;
  perform pg_catalog.pg_advisory_xact_lock(
    pg_catalog.hashtextextended('whereabot_creations:' || v_kind || ':' || v_user::text, 0));
  if (select count(*) from private.creations c
      where c.user_id = v_user and c.kind = v_kind and c.created_at > now() - interval '1 hour') >= v_limit then
    raise exception '% allows at most % created per hour per user, revoked ones included; try again later',
      tg_table_name, v_limit using errcode = '54000';
  end if;
  insert into private.creations (user_id, kind) values (v_user, v_kind);
  return new;
end;
$$;
comment on function private.enforce_creation_rate() is
  'BEFORE INSERT trigger: records a creation and refuses it (54000) past the account''s hourly rate for its kind, revoked rows included. Args: kind, user column.';
revoke execute on function private.enforce_creation_rate() from public, anon, authenticated;

create trigger agent_keys_per_user_rate
  before insert on public.agent_keys
  for each row execute function private.enforce_creation_rate('agent_key', 'user_id');
create trigger location_shares_per_owner_rate
  before insert on public.location_shares
  for each row execute function private.enforce_creation_rate('location_share', 'owner_id');

create index agent_keys_revoked_at_idx on public.agent_keys (revoked_at) where revoked_at is not null;
comment on index public.agent_keys_revoked_at_idx is 'relay.sweep_oauth: keys revoked longer ago than private.revoked_kept_for().';
create index location_shares_revoked_at_idx on public.location_shares (revoked_at) where revoked_at is not null;
comment on index public.location_shares_revoked_at_idx is 'relay.sweep_oauth: shares revoked longer ago than private.revoked_kept_for().';

drop trigger agent_keys_notify_deleted on public.agent_keys;
create trigger agent_keys_notify_deleted
  after delete on public.agent_keys
  for each row when (old.revoked_at is null)
  execute function private.notify_agent_key_revoked();

create or replace function relay.sweep_oauth(p_stale_days int, p_limit int)
returns int
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_total int := 0;
  v_count int;
begin
  if p_stale_days is null or p_stale_days not between 1 and 3650 or p_limit is null or p_limit not between 1 and 100000 then
    raise exception 'sweep_oauth needs 1 to 3650 days and a limit of 1 to 100000' using errcode = '22023';
  end if;
  delete from private.oauth_authorizations a
  where a.id in (select x.id from private.oauth_authorizations x where x.expires_at < now() - interval '1 hour'
                 limit p_limit);
  get diagnostics v_count = row_count;
  v_total := v_total + v_count;
  delete from private.oauth_families f
  where f.id in (select x.id from private.oauth_families x
                 where x.expires_at < now() or x.revoked_at < now() - interval '1 day' limit p_limit);
  get diagnostics v_count = row_count;
  v_total := v_total + v_count;
  delete from private.oauth_clients c
  where c.client_id in (
    select x.client_id from private.oauth_clients x
    where ((x.kind = 'registered' and x.last_used_at < now() - make_interval(days => p_stale_days))
           or (x.kind = 'document' and x.last_used_at < now() - interval '1 day'))
      and not exists (select from public.oauth_grants g where g.client_id = x.client_id)
    limit p_limit);
  get diagnostics v_count = row_count;
  v_total := v_total + v_count;
  delete from public.agent_keys k
  where k.id in (select x.id from public.agent_keys x where x.revoked_at < now() - private.revoked_kept_for()
                 limit p_limit);
  get diagnostics v_count = row_count;
  v_total := v_total + v_count;
  delete from public.location_shares s
  where s.id in (select x.id from public.location_shares x where x.revoked_at < now() - private.revoked_kept_for()
                 limit p_limit);
  get diagnostics v_count = row_count;
  v_total := v_total + v_count;
  delete from private.creations c
  where c.id in (select x.id from private.creations x where x.created_at < now() - interval '1 hour' limit p_limit);
  get diagnostics v_count = row_count;
  return v_total + v_count;
end;
$$;
comment on function relay.sweep_oauth(int, int) is
  'Deletes up to LIMIT each of expired authorizations, ended token families, unused clients, agent keys and location shares revoked over 30 days ago, and creations past their hour; returns how many.';

-- What was created in the last hour counts already.
insert into private.creations (user_id, kind, created_at)
select user_id, 'agent_key', created_at from public.agent_keys where created_at > now() - interval '1 hour'
union all
select owner_id, 'location_share', created_at from public.location_shares where created_at > now() - interval '1 hour';
