-- =============================================================================
-- Web Push subscriptions (RFC 8030 / 8291) of the browser app
-- =============================================================================
-- endpoint, p256dh and auth come from PushSubscription.toJSON(); p256dh is the
-- browser's P-256 public key (65 bytes) and auth its 16-byte secret, both base64url.

create table if not exists public.web_push_subscriptions (
  id uuid primary key default gen_random_uuid(),
  endpoint text not null unique
    check (endpoint ~ '^https://' and char_length(endpoint) <= 2048),
  p256dh text not null check (p256dh ~ '^[A-Za-z0-9_-]{87}=?$'),
  auth text not null check (auth ~ '^[A-Za-z0-9_-]{22}(==)?$'),
  user_id uuid not null references auth.users (id) on delete cascade,
  device_id uuid references public.devices (id) on delete cascade,
  created_at timestamptz not null default now()
);
comment on table public.web_push_subscriptions is
  'Browser push subscriptions per user; the relay drops one when its push service answers 404 or 410.';

create index if not exists web_push_subscriptions_user_id_idx on public.web_push_subscriptions (user_id);
create index if not exists web_push_subscriptions_device_id_idx on public.web_push_subscriptions (device_id);

alter table public.web_push_subscriptions enable row level security;

revoke all on public.web_push_subscriptions from anon, authenticated;
grant select, insert, update, delete on public.web_push_subscriptions to authenticated;

drop policy if exists "Users can read their own web push subscriptions from their own session" on public.web_push_subscriptions;
create policy "Users can read their own web push subscriptions from their own session"
  on public.web_push_subscriptions for select to authenticated
  using (user_id = (select auth.uid()) and (select auth.jwt() ->> 'client_id') is null);

drop policy if exists "Users can add web push subscriptions from their own session" on public.web_push_subscriptions;
create policy "Users can add web push subscriptions from their own session"
  on public.web_push_subscriptions for insert to authenticated
  with check (
    user_id = (select auth.uid())
    and (select auth.jwt() ->> 'client_id') is null
    and private.is_own_device(device_id));

drop policy if exists "Users can update their own web push subscriptions from their own session" on public.web_push_subscriptions;
create policy "Users can update their own web push subscriptions from their own session"
  on public.web_push_subscriptions for update to authenticated
  using (user_id = (select auth.uid()) and (select auth.jwt() ->> 'client_id') is null)
  with check (
    user_id = (select auth.uid())
    and private.is_own_device(device_id));

drop policy if exists "Users can delete their own web push subscriptions from their own session" on public.web_push_subscriptions;
create policy "Users can delete their own web push subscriptions from their own session"
  on public.web_push_subscriptions for delete to authenticated
  using (user_id = (select auth.uid()) and (select auth.jwt() ->> 'client_id') is null);

drop trigger if exists web_push_subscriptions_per_user_limit on public.web_push_subscriptions;
create trigger web_push_subscriptions_per_user_limit
  before insert on public.web_push_subscriptions
  for each row execute function private.enforce_per_user_limit('user_id', '50');
