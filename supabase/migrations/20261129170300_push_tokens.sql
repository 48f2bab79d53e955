-- =============================================================================
-- Push tokens: APNs device tokens
-- =============================================================================
-- The app stores its APNs token after sign-in and deletes it at sign-out. The relay
-- reads them through relay.apns_tokens and drops those APNs calls dead.

create table if not exists public.push_tokens (
  token text primary key check (token ~ '^[0-9a-f]{64,200}$'),
  user_id uuid not null references auth.users (id) on delete cascade,
  device_id uuid references public.devices (id) on delete cascade,
  environment text not null default 'production' check (environment in ('sandbox', 'production')),
  created_at timestamptz not null default now()
);
comment on table public.push_tokens is
  'APNs device tokens (hex) per user and device; sandbox or production APNs environment.';

create index if not exists push_tokens_user_id_idx on public.push_tokens (user_id);
create index if not exists push_tokens_device_id_idx on public.push_tokens (device_id);

alter table public.push_tokens enable row level security;

revoke all on public.push_tokens from anon, authenticated;
grant select, insert, update, delete on public.push_tokens to authenticated;

drop policy if exists "Users can read their own push tokens from their own session" on public.push_tokens;
create policy "Users can read their own push tokens from their own session"
  on public.push_tokens for select to authenticated
  using (user_id = (select auth.uid()) and (select auth.jwt() ->> 'client_id') is null);

drop policy if exists "Users can add push tokens for their own devices from their own session" on public.push_tokens;
create policy "Users can add push tokens for their own devices from their own session"
  on public.push_tokens for insert to authenticated
  with check (
    user_id = (select auth.uid())
    and (select auth.jwt() ->> 'client_id') is null
    and private.is_own_device(device_id));

drop policy if exists "Users can update their own push tokens from their own session" on public.push_tokens;
create policy "Users can update their own push tokens from their own session"
  on public.push_tokens for update to authenticated
  using (user_id = (select auth.uid()) and (select auth.jwt() ->> 'client_id') is null)
  with check (
    user_id = (select auth.uid())
    and private.is_own_device(device_id));

drop policy if exists "Users can delete their own push tokens from their own session" on public.push_tokens;
create policy "Users can delete their own push tokens from their own session"
  on public.push_tokens for delete to authenticated
  using (user_id = (select auth.uid()) and (select auth.jwt() ->> 'client_id') is null);

drop trigger if exists push_tokens_per_user_limit on public.push_tokens;
create trigger push_tokens_per_user_limit
  before insert on public.push_tokens
  for each row execute function private.enforce_per_user_limit('user_id', '50');
