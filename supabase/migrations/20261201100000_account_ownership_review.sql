-- =============================================================================
-- Account ownership, after the second security review (issue 22, findings 5 and 6)
-- =============================================================================
-- 1. A share waiting for an email address goes only to an account that has confirmed that
--    address (SPEC §8). private.claim_waiting_shares used to hand it to any new auth.users
--    row with the address, email_confirmed_at null; share_location_with did the same for
--    an existing unconfirmed row. Now a share waits until the address is confirmed: on
--    INSERT of a row already confirmed, on UPDATE when email_confirmed_at is first set, and
--    on UPDATE of the email of a confirmed row (Supabase Auth writes the new address only
--    once its change is confirmed). This holds only while Supabase Auth's "Confirm email"
--    stays on: with it off, Auth confirms every address at sign-up (docs/deploy.md). Shares
--    already handed to a still unconfirmed account wait again.
-- 2. A push subscription or push token belongs to the account that first saved it (SPEC
--    §8). relay.save_web_push_subscription used to take over another account's row
--    (user_id = excluded.user_id); now another account's save of an existing endpoint
--    returns 'refused:taken' and changes nothing. No function saves APNs tokens (the app
--    writes public.push_tokens through the API); there, and for direct API writes to
--    web_push_subscriptions, the policies already refuse another account's row: an
--    INSERT ... ON CONFLICT DO UPDATE whose existing row fails the UPDATE policy raises
--    42501, a plain INSERT raises 23505. A trigger on both tables also refuses (42501) any
--    change of user_id, by any writer.
-- 3. At most 10 web push subscriptions and 10 push tokens per account (was 50): every one
--    is pushed at each wake-up, so the cap bounds what one account can make the relay send.
--    An account's inserts into each table take a per-account lock first, so concurrent
--    inserts cannot pass the cap together. The save function still answers
--    'refused:limit'; re-saving an endpoint the account already holds is an update and
--    never counts. Accounts above the cap keep their 10 newest rows.
-- 4. The endpoint allow-list is enforced by the table, not only at save time. Before, the
--    table checked only '^https://', so a direct API insert could plant any https URL.
--    Writes made through Supabase's API (PostgREST switches the role to anon,
--    authenticated or service_role) must name a known push service
--    (private.is_push_endpoint_allowed, no extra origins); otherwise 23514.
--    Extra origins (WEB_PUSH_ALLOWED_ORIGINS, for tests and development) exist only in the
--    relay's environment and reach the database only as relay.save_web_push_subscription's
--    p_extra_origins, checked by that function. Writers that are not the API (the relay's
--    security-definer functions, migrations, an operator's or the test harness's direct
--    connection inserting subscriptions to local fake push services) are not checked
--    again: such a role may equally disable a trigger, and a database setting or a table of
--    extra origins would let test origins apply to API writes too. An update that keeps the
--    endpoint is not checked, so older rows stay editable.

-- 1 ---------------------------------------------------------------------------------
create or replace function private.claim_waiting_shares()
returns trigger
language plpgsql
security definer
set search_path = ''
as $$
begin
  if new.email is null or new.email_confirmed_at is null or new.deleted_at is not null then
    return new;
  end if;
  -- Already confirmed for this very address: its shares were claimed when it was confirmed.
  if tg_op = 'UPDATE' and old.email_confirmed_at is not null
     and lower(old.email) is not distinct from lower(new.email) then
    return new;
  end if;
  update public.location_shares s set viewer_id = new.id
  where s.viewer_id is null and s.revoked_at is null and s.viewer_email = lower(new.email) and s.owner_id <> new.id
    and not exists (select from public.location_shares a
                    where a.owner_id = s.owner_id and a.viewer_id = new.id and a.revoked_at is null);
  return new;
end;
$$;
comment on function private.claim_waiting_shares() is
  'AFTER INSERT/UPDATE OF email, email_confirmed_at on auth.users: shares waiting for that email reach the account once it has confirmed the address.';
revoke execute on function private.claim_waiting_shares() from public, anon, authenticated;

-- CREATE OR REPLACE: dropping a trigger needs to own auth.users (supabase_auth_admin);
-- replacing one needs only the TRIGGER privilege the migration role holds.
create or replace trigger whereabot_claim_waiting_shares
  after insert or update of email, email_confirmed_at on auth.users
  for each row execute function private.claim_waiting_shares();

-- An address whose account has not confirmed it gets a waiting share (claimed at confirmation).
create or replace function private.share_location_with(p_email text)
returns uuid
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_owner uuid := auth.uid();
  v_email text := lower(btrim(p_email));
  v_viewer uuid;
  v_share uuid;
begin
  if v_owner is null or (auth.jwt() ->> 'client_id') is not null then
    raise exception 'sharing your location needs your own session' using errcode = '42501';
  end if;
  if p_email is null or v_email !~ '^[^@[:space:]]+@[^@[:space:]]+$' or char_length(v_email) > 320 then
    raise exception 'share_location_with needs an email address' using errcode = '22023';
  end if;
  if v_email = (select lower(email) from auth.users where id = v_owner) then
    raise exception 'you cannot share your location with yourself' using errcode = '22023';
  end if;
  select id into v_viewer from auth.users
  where lower(email) = v_email and deleted_at is null and email_confirmed_at is not null;
  -- The same answer whether or not the address has an account: the active share's id.
  select id into v_share from public.location_shares
  where owner_id = v_owner and revoked_at is null
    and (viewer_id = v_viewer or (viewer_id is null and viewer_email = v_email));
  if v_share is null then
    insert into public.location_shares (owner_id, viewer_id, viewer_email)
    values (v_owner, v_viewer, v_email) returning id into v_share;
  end if;
  return v_share;
end;
$$;
comment on function private.share_location_with(text) is
  'Shares the calling user''s location with EMAIL (now if an account has confirmed it, else when one does); returns the active share''s id.';

-- Shares handed to an account that never confirmed the address wait for a confirmation
-- again (one per owner and address, as location_shares_one_pending_idx allows).
with unconfirmed as (
  select distinct on (s.owner_id, s.viewer_email) s.id
  from public.location_shares s
  join auth.users u on u.id = s.viewer_id
  where s.revoked_at is null and u.email_confirmed_at is null and s.viewer_email = lower(u.email)
    and not exists (select from public.location_shares w
                    where w.owner_id = s.owner_id and w.viewer_email = s.viewer_email
                      and w.viewer_id is null and w.revoked_at is null)
  order by s.owner_id, s.viewer_email, s.created_at
)
update public.location_shares s set viewer_id = null from unconfirmed where s.id = unconfirmed.id;

-- 2 ---------------------------------------------------------------------------------
-- saved | refused:device | refused:endpoint_not_allowed | refused:invalid | refused:limit
-- | refused:taken (another account saved this endpoint first; nothing changed).
create or replace function relay.save_web_push_subscription(
  p_user uuid, p_device uuid, p_endpoint text, p_p256dh text, p_auth text, p_extra_origins text[] default '{}')
returns text
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_saved boolean;
begin
  if p_user is null or p_device is null then
    raise exception 'save_web_push_subscription needs a user and a device' using errcode = '22004';
  end if;
  if cardinality(p_extra_origins) > 20 then
    raise exception 'at most 20 extra origins' using errcode = '22023';
  end if;
  if not exists (select from public.devices where id = p_device and user_id = p_user and revoked_at is null) then
    return 'refused:device';
  end if;
  if p_endpoint is null or not private.is_push_endpoint_allowed(p_endpoint, p_extra_origins) then
    return 'refused:endpoint_not_allowed';
  end if;
  if p_p256dh is null or p_p256dh !~ '^[A-Za-z0-9_-]{87}=?$' or p_auth is null or p_auth !~ '^[A-Za-z0-9_-]{22}(==)?$' then
    return 'refused:invalid';
  end if;
  -- The account's own endpoint again (the browser subscribed again): new keys, no new row.
  update public.web_push_subscriptions set p256dh = p_p256dh, auth = p_auth, device_id = p_device
  where endpoint = p_endpoint and user_id = p_user;
  if found then
    return 'saved';
  end if;
  begin
    -- A row that appeared meanwhile is updated only if it is this account's.
    insert into public.web_push_subscriptions as s (endpoint, p256dh, auth, user_id, device_id)
    values (p_endpoint, p_p256dh, p_auth, p_user, p_device)
    on conflict (endpoint) do update
      set p256dh = excluded.p256dh, auth = excluded.auth, device_id = excluded.device_id
      where s.user_id = excluded.user_id
    returning true into v_saved;
  exception when sqlstate '54000' then
    return 'refused:limit';
  end;
  return case when v_saved then 'saved' else 'refused:taken' end;
end;
$$;
comment on function relay.save_web_push_subscription(uuid, uuid, text, text, text, text[]) is
  'Stores the Web Push subscription of USER''s DEVICE (its phone socket sent it); the endpoint must be a known push service and not another account''s.';
revoke execute on function relay.save_web_push_subscription(uuid, uuid, text, text, text, text[])
  from public, anon, authenticated, service_role;
grant execute on function relay.save_web_push_subscription(uuid, uuid, text, text, text, text[]) to whereabot_relay;

create or replace function private.forbid_owner_change()
returns trigger
language plpgsql
set search_path = ''
as $$
begin
  if new.user_id is distinct from old.user_id then
    raise exception '% rows belong to the account that first saved them', tg_table_name
      using errcode = '42501';
  end if;
  return new;
end;
$$;
comment on function private.forbid_owner_change() is
  'BEFORE UPDATE OF user_id trigger: a push target stays with the account that first saved it (42501).';
revoke execute on function private.forbid_owner_change() from public, anon, authenticated;

drop trigger if exists push_tokens_keep_owner on public.push_tokens;
create trigger push_tokens_keep_owner
  before update of user_id on public.push_tokens
  for each row execute function private.forbid_owner_change();
drop trigger if exists web_push_subscriptions_keep_owner on public.web_push_subscriptions;
create trigger web_push_subscriptions_keep_owner
  before update of user_id on public.web_push_subscriptions
  for each row execute function private.forbid_owner_change();

-- 3 ---------------------------------------------------------------------------------
-- Fires before the per-user limit trigger (triggers fire in name order: lock_user <
-- per_user_limit), so the count it makes sees every committed row of the account.
create or replace function private.lock_user_inserts()
returns trigger
language plpgsql
set search_path = ''
as $$
begin
  perform pg_catalog.pg_advisory_xact_lock(tg_relid::int, pg_catalog.hashtext(new.user_id::text));
  return new;
end;
$$;
comment on function private.lock_user_inserts() is
  'BEFORE INSERT trigger: serializes one account''s inserts into the table (transaction advisory lock), so a per-user cap holds under concurrency.';
revoke execute on function private.lock_user_inserts() from public, anon, authenticated;

drop trigger if exists push_tokens_lock_user on public.push_tokens;
create trigger push_tokens_lock_user
  before insert on public.push_tokens
  for each row execute function private.lock_user_inserts();
drop trigger if exists push_tokens_per_user_limit on public.push_tokens;
create trigger push_tokens_per_user_limit
  before insert on public.push_tokens
  for each row execute function private.enforce_per_user_limit('user_id', '10');

drop trigger if exists web_push_subscriptions_lock_user on public.web_push_subscriptions;
create trigger web_push_subscriptions_lock_user
  before insert on public.web_push_subscriptions
  for each row execute function private.lock_user_inserts();
drop trigger if exists web_push_subscriptions_per_user_limit on public.web_push_subscriptions;
create trigger web_push_subscriptions_per_user_limit
  before insert on public.web_push_subscriptions
  for each row execute function private.enforce_per_user_limit('user_id', '10');

delete from public.push_tokens t using (
  select token, row_number() over (partition by user_id order by created_at desc, token) as n
  from public.push_tokens) r
where r.token = t.token and r.n > 10;
delete from public.web_push_subscriptions w using (
  select id, row_number() over (partition by user_id order by created_at desc, id) as n
  from public.web_push_subscriptions) r
where r.id = w.id and r.n > 10;

comment on index public.push_tokens_user_id_idx is
  'relay.apns_tokens (relay.claim_push) by owner, the 10-tokens limit trigger.';
comment on index public.web_push_subscriptions_user_id_idx is
  'relay.web_push_subscriptions (relay.claim_push) by owner, the 10-subscriptions limit trigger.';

-- 4 ---------------------------------------------------------------------------------
-- Security definer so that it may call private.is_push_endpoint_allowed (closed to the API
-- roles); the `role` setting still names the role the API switched to.
create or replace function private.check_push_endpoint()
returns trigger
language plpgsql
security definer
set search_path = ''
as $$
begin
  if tg_op = 'UPDATE' and new.endpoint is not distinct from old.endpoint then
    return new;
  end if;
  if pg_catalog.current_setting('role') in ('anon', 'authenticated', 'service_role')
     and not private.is_push_endpoint_allowed(new.endpoint, '{}') then
    raise exception 'a web push endpoint must be a known push service'
      using errcode = '23514', constraint = 'web_push_subscriptions_endpoint_allowed';
  end if;
  return new;
end;
$$;
comment on function private.check_push_endpoint() is
  'BEFORE INSERT/UPDATE OF endpoint trigger: an endpoint written through the API must be a known push service (23514).';
revoke execute on function private.check_push_endpoint() from public, anon, authenticated;

drop trigger if exists web_push_subscriptions_endpoint_allowed on public.web_push_subscriptions;
create trigger web_push_subscriptions_endpoint_allowed
  before insert or update of endpoint on public.web_push_subscriptions
  for each row execute function private.check_push_endpoint();
