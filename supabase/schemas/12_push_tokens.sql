-- =============================================================================
-- Push tokens: APNs device tokens
-- =============================================================================
-- The app stores its APNs token after sign-in and deletes it at sign-out. The relay
-- reads them through relay.apns_tokens and drops those APNs calls dead. A token belongs to
-- the account that first saved it: another account's insert of the same token fails (23505;
-- an upsert fails the update policy, 42501) and no writer can change its user_id. At most
-- 10 per account: every one is pushed at each wake-up.

create table public.push_tokens (
  token text primary key check (token ~ '^[0-9a-f]{64,200}$'),
  user_id uuid not null references auth.users (id) on delete cascade,
  device_id uuid references public.devices (id) on delete cascade,
  environment text not null default 'production' check (environment in ('sandbox', 'production')),
  created_at timestamptz not null default now(),
  language text not null default 'en' constraint push_tokens_language_check check (language ~ '^[a-z]{2}$')
);
comment on table public.push_tokens is
  'APNs device tokens (hex) per user and device; sandbox or production APNs environment.';
comment on column public.push_tokens.language is
  'The language (ISO 639-1) the app asked its notifications in; the relay writes English for one it has no texts in.';

create index push_tokens_user_id_idx on public.push_tokens (user_id);
create index push_tokens_device_id_idx on public.push_tokens (device_id);
comment on index public.push_tokens_user_id_idx is
  'relay.apns_tokens (relay.claim_push) by owner, the 10-tokens limit trigger.';
comment on index public.push_tokens_device_id_idx is 'relay.remove_device and deleting a device (cascade).';

alter table public.push_tokens enable row level security;

revoke all on public.push_tokens from anon, authenticated;
grant select, insert, update, delete on public.push_tokens to authenticated;

create policy "Users can read their own push tokens from their own session"
  on public.push_tokens for select to authenticated
  using (user_id = (select auth.uid()) and (select auth.jwt()) ->> 'client_id' is null);

create policy "Users can add push tokens to own devices from their own session"
  on public.push_tokens for insert to authenticated
  with check (user_id = (select auth.uid()) and (select auth.jwt()) ->> 'client_id' is null
              and private.is_own_device(device_id));

create policy "Users can update their own push tokens from their own session"
  on public.push_tokens for update to authenticated
  using (user_id = (select auth.uid()) and (select auth.jwt()) ->> 'client_id' is null)
  with check (user_id = (select auth.uid()) and (select auth.jwt()) ->> 'client_id' is null
              and private.is_own_device(device_id));

create policy "Users can delete their own push tokens from their own session"
  on public.push_tokens for delete to authenticated
  using (user_id = (select auth.uid()) and (select auth.jwt()) ->> 'client_id' is null);

create trigger push_tokens_keep_owner
  before update of user_id on public.push_tokens
  for each row execute function private.forbid_owner_change();

-- One account's inserts wait for each other, so the cap holds under concurrency.
create trigger push_tokens_lock_user
  before insert on public.push_tokens
  for each row execute function private.lock_user_inserts();
create trigger push_tokens_per_user_limit
  before insert on public.push_tokens
  for each row execute function private.enforce_per_user_limit('user_id', '10');
