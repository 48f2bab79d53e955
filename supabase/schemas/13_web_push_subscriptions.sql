-- =============================================================================
-- Web Push subscriptions (RFC 8030 / 8291) of the browser app
-- =============================================================================
-- endpoint, p256dh and auth come from PushSubscription.toJSON(); p256dh is the
-- browser's P-256 public key (65 bytes) and auth its 16-byte secret, both base64url.
-- The relay POSTs only to known push services, so an endpoint must follow one strict
-- grammar (the same as the relay's, Sources/Push/PushEndpoint.swift) and name a known push
-- service: checked by relay.save_web_push_subscription (which also takes the relay's test
-- origins) and, for writes through the API, by a trigger. A subscription belongs to the
-- account that first saved it; at most 10 per account.

create table public.web_push_subscriptions (
  id uuid primary key default gen_random_uuid(),
  endpoint text not null unique
    check (endpoint ~ '^https://' and char_length(endpoint) <= 2048),
  p256dh text not null check (p256dh ~ '^[A-Za-z0-9_-]{87}=?$'),
  auth text not null check (auth ~ '^[A-Za-z0-9_-]{22}(==)?$'),
  user_id uuid not null references auth.users (id) on delete cascade,
  device_id uuid references public.devices (id) on delete cascade,
  created_at timestamptz not null default now(),
  language text not null default 'en' constraint web_push_subscriptions_language_check check (language ~ '^[a-z]{2}$')
);
comment on table public.web_push_subscriptions is
  'Browser push subscriptions per user; the relay drops one when its push service answers 404 or 410.';
comment on column public.web_push_subscriptions.language is
  'The language (ISO 639-1) the page subscribed in; the relay writes English for one it has no texts in.';

create index web_push_subscriptions_user_id_idx on public.web_push_subscriptions (user_id);
create index web_push_subscriptions_device_id_idx on public.web_push_subscriptions (device_id);
comment on index public.web_push_subscriptions_endpoint_key is
  'relay.drop_web_push_subscription and the save upsert, by endpoint; one row per endpoint.';
comment on index public.web_push_subscriptions_user_id_idx is
  'relay.web_push_subscriptions (relay.claim_push) by owner, the 10-subscriptions limit trigger.';
comment on index public.web_push_subscriptions_device_id_idx is
  'relay.delete_web_push_subscriptions, relay.remove_device and deleting a device (cascade).';

alter table public.web_push_subscriptions enable row level security;

revoke all on public.web_push_subscriptions from anon, authenticated;
grant select, insert, update, delete on public.web_push_subscriptions to authenticated;

create policy "Users can read own web push subscriptions from their session"
  on public.web_push_subscriptions for select to authenticated
  using (user_id = (select auth.uid()) and (select auth.jwt()) ->> 'client_id' is null);

create policy "Users can add web push subscriptions from their own session"
  on public.web_push_subscriptions for insert to authenticated
  with check (user_id = (select auth.uid()) and (select auth.jwt()) ->> 'client_id' is null
              and private.is_own_device(device_id));

create policy "Users can update own web push subscriptions from their session"
  on public.web_push_subscriptions for update to authenticated
  using (user_id = (select auth.uid()) and (select auth.jwt()) ->> 'client_id' is null)
  with check (user_id = (select auth.uid()) and (select auth.jwt()) ->> 'client_id' is null
              and private.is_own_device(device_id));

create policy "Users can delete own web push subscriptions from their session"
  on public.web_push_subscriptions for delete to authenticated
  using (user_id = (select auth.uid()) and (select auth.jwt()) ->> 'client_id' is null);

create trigger web_push_subscriptions_keep_owner
  before update of user_id on public.web_push_subscriptions
  for each row execute function private.forbid_owner_change();

-- One account's inserts wait for each other, so the cap holds under concurrency.
create trigger web_push_subscriptions_lock_user
  before insert on public.web_push_subscriptions
  for each row execute function private.lock_user_inserts();
create trigger web_push_subscriptions_per_user_limit
  before insert on public.web_push_subscriptions
  for each row execute function private.enforce_per_user_limit('user_id', '10');

-- -----------------------------------------------------------------------------
-- The endpoint grammar and the allow-list of push services
-- -----------------------------------------------------------------------------
-- An endpoint is `https://` + a DNS name (labels of letters, digits and inner hyphens, at
-- most 253 bytes) + an optional port (1 to 65535) + a path of RFC 3986 characters with
-- well-formed percent-escapes: nothing two URL parsers could read two ways. p_extra holds
-- the test origins of WEB_PUSH_ALLOWED_ORIGINS (PUSH.md §4).
create or replace function private.push_endpoint_origin(p_endpoint text)
returns text
language sql
immutable
set search_path = ''
as $$
  select case
    when char_length(p_endpoint) <= 2048
     and p_endpoint ~* '^https://[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*(:[1-9][0-9]{0,4})?([/?]([a-z0-9._~!$&''()*+,;=:@/?-]|%[0-9a-f]{2})*)?$'
     and char_length(substring(lower(p_endpoint) from '^https://([^/?:]+)')) <= 253
     and coalesce(substring(lower(p_endpoint) from '^https://[^/?:]+:([0-9]+)')::int, 1) <= 65535
    then substring(lower(p_endpoint) from '^(https://[^/?]+)')
  end
$$;
comment on function private.push_endpoint_origin(text) is
  'https://host[:port] of a push endpoint that follows the strict grammar, lowercased; null for anything else.';
revoke execute on function private.push_endpoint_origin(text) from public, anon, authenticated;

create or replace function private.is_push_endpoint_allowed(p_endpoint text, p_extra text[])
returns boolean
language sql
immutable
set search_path = ''
as $$
  select coalesce(
    o.origin = any (array(select lower(e) from unnest(coalesce(p_extra, '{}')) e))
    or (o.origin !~ ':[0-9]+$'
        and o.origin ~ '\.(google\.com|googleapis\.com|mozilla\.com|mozaws\.net|windows\.com|microsoft\.com|apple\.com)$'),
    false)
  from (select private.push_endpoint_origin(p_endpoint) as origin) o
$$;
comment on function private.is_push_endpoint_allowed(text, text[]) is
  'Whether ENDPOINT is a strictly formed https URL of a known push service (or of an EXTRA origin), with no port or credentials.';
revoke execute on function private.is_push_endpoint_allowed(text, text[]) from public, anon, authenticated;

-- -----------------------------------------------------------------------------
-- Writes through the API must name a known push service
-- -----------------------------------------------------------------------------
-- Writes made through Supabase's API (PostgREST switches the role to anon, authenticated or
-- service_role) must name a known push service, with no extra origins; otherwise 23514.
-- Writers that are not the API (the relay's security-definer functions, migrations, an
-- operator's or the test harness's direct connection) are not checked again: such a role
-- may equally disable a trigger. An update that keeps the endpoint is not checked, so older
-- rows stay editable. Security definer so that it may call private.is_push_endpoint_allowed
-- (closed to the API roles); the `role` setting still names the role the API switched to.
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

create trigger web_push_subscriptions_endpoint_allowed
  before insert or update of endpoint on public.web_push_subscriptions
  for each row execute function private.check_push_endpoint();
