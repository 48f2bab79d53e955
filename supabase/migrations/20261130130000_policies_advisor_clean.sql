-- =============================================================================
-- Policies as the Supabase advisor reads them: whole names, initplan-wrapped calls
-- =============================================================================
-- Every policy of schema public that was cut or flagged, again with the same meaning. Names
-- are whole sentences of at most 63 bytes (longer ones were silently cut), and each auth.uid() / auth.jwt() call stands
-- directly in its own `(select …)`, evaluated once per statement — the form Supabase's
-- `auth_rls_initplan` lint recognises. `(select auth.jwt() ->> 'client_id')` was already
-- evaluated once, but the lint flagged it.
-- Old names are dropped as Postgres stored them (cut at 63 bytes).

-- agent_keys -------------------------------------------------------------------
drop policy if exists "Users can read their own agent keys from their own session" on public.agent_keys;
create policy "Users can read their own agent keys from their own session"
  on public.agent_keys for select to authenticated
  using (user_id = (select auth.uid()) and (select auth.jwt()) ->> 'client_id' is null);

-- devices -----------------------------------------------------------------------
drop policy if exists "Users can register their own devices from their own session" on public.devices;
create policy "Users can register their own devices from their own session"
  on public.devices for insert to authenticated
  with check (user_id = (select auth.uid()) and (select auth.jwt()) ->> 'client_id' is null and revoked_at is null);

drop policy if exists "Users can rename and remove their own devices from their own se" on public.devices;
create policy "Users can rename and remove devices from their own session"
  on public.devices for update to authenticated
  using (user_id = (select auth.uid()) and (select auth.jwt()) ->> 'client_id' is null)
  with check (user_id = (select auth.uid()) and (select auth.jwt()) ->> 'client_id' is null);

-- always_allowed_agents -----------------------------------------------------------
drop policy if exists "Users and their agents can read the user's always-allowed agent" on public.always_allowed_agents;
create policy "Users and their agents can read the always-allowed agents"
  on public.always_allowed_agents for select to authenticated
  using (user_id = (select auth.uid()));

drop policy if exists "Users can always-allow agents from their own session" on public.always_allowed_agents;
create policy "Users can always-allow agents from their own session"
  on public.always_allowed_agents for insert to authenticated
  with check (user_id = (select auth.uid()) and (select auth.jwt()) ->> 'client_id' is null);

drop policy if exists "Users can change their always-allowed agents from their own ses" on public.always_allowed_agents;
create policy "Users can change always-allowed agents from their own session"
  on public.always_allowed_agents for update to authenticated
  using (user_id = (select auth.uid()) and (select auth.jwt()) ->> 'client_id' is null)
  with check (user_id = (select auth.uid()) and (select auth.jwt()) ->> 'client_id' is null);

drop policy if exists "Users can remove always-allowed agents from their own session" on public.always_allowed_agents;
create policy "Users can remove always-allowed agents from their own session"
  on public.always_allowed_agents for delete to authenticated
  using (user_id = (select auth.uid()) and (select auth.jwt()) ->> 'client_id' is null);

-- location_shares -----------------------------------------------------------------
drop policy if exists "Owners and viewers can read their shares" on public.location_shares;
create policy "Owners and viewers can read their shares"
  on public.location_shares for select to authenticated
  using (owner_id = (select auth.uid()) or viewer_id = (select auth.uid()));

drop policy if exists "Users can share their own location from their own session" on public.location_shares;
create policy "Users can share their own location from their own session"
  on public.location_shares for insert to authenticated
  with check (owner_id = (select auth.uid()) and (select auth.jwt()) ->> 'client_id' is null and revoked_at is null);

drop policy if exists "Owners can revoke and viewers can leave shares from their own s" on public.location_shares;
create policy "Owners can revoke, viewers leave shares from their own session"
  on public.location_shares for update to authenticated
  using ((owner_id = (select auth.uid()) or viewer_id = (select auth.uid())) and (select auth.jwt()) ->> 'client_id' is null)
  with check ((owner_id = (select auth.uid()) or viewer_id = (select auth.uid())) and (select auth.jwt()) ->> 'client_id' is null);

drop policy if exists "Owners can delete their shares from their own session" on public.location_shares;
create policy "Owners can delete their shares from their own session"
  on public.location_shares for delete to authenticated
  using (owner_id = (select auth.uid()) and (select auth.jwt()) ->> 'client_id' is null);

-- push_tokens ---------------------------------------------------------------------
drop policy if exists "Users can read their own push tokens from their own session" on public.push_tokens;
create policy "Users can read their own push tokens from their own session"
  on public.push_tokens for select to authenticated
  using (user_id = (select auth.uid()) and (select auth.jwt()) ->> 'client_id' is null);

drop policy if exists "Users can add push tokens for their own devices from their own " on public.push_tokens;
create policy "Users can add push tokens to own devices from their own session"
  on public.push_tokens for insert to authenticated
  with check (user_id = (select auth.uid()) and (select auth.jwt()) ->> 'client_id' is null
              and private.is_own_device(device_id));

drop policy if exists "Users can update their own push tokens from their own session" on public.push_tokens;
create policy "Users can update their own push tokens from their own session"
  on public.push_tokens for update to authenticated
  using (user_id = (select auth.uid()) and (select auth.jwt()) ->> 'client_id' is null)
  with check (user_id = (select auth.uid()) and (select auth.jwt()) ->> 'client_id' is null
              and private.is_own_device(device_id));

drop policy if exists "Users can delete their own push tokens from their own session" on public.push_tokens;
create policy "Users can delete their own push tokens from their own session"
  on public.push_tokens for delete to authenticated
  using (user_id = (select auth.uid()) and (select auth.jwt()) ->> 'client_id' is null);

-- web_push_subscriptions ------------------------------------------------------------
drop policy if exists "Users can read their own web push subscriptions from their own " on public.web_push_subscriptions;
create policy "Users can read own web push subscriptions from their session"
  on public.web_push_subscriptions for select to authenticated
  using (user_id = (select auth.uid()) and (select auth.jwt()) ->> 'client_id' is null);

drop policy if exists "Users can add web push subscriptions from their own session" on public.web_push_subscriptions;
create policy "Users can add web push subscriptions from their own session"
  on public.web_push_subscriptions for insert to authenticated
  with check (user_id = (select auth.uid()) and (select auth.jwt()) ->> 'client_id' is null
              and private.is_own_device(device_id));

drop policy if exists "Users can update their own web push subscriptions from their ow" on public.web_push_subscriptions;
create policy "Users can update own web push subscriptions from their session"
  on public.web_push_subscriptions for update to authenticated
  using (user_id = (select auth.uid()) and (select auth.jwt()) ->> 'client_id' is null)
  with check (user_id = (select auth.uid()) and (select auth.jwt()) ->> 'client_id' is null
              and private.is_own_device(device_id));

drop policy if exists "Users can delete their own web push subscriptions from their ow" on public.web_push_subscriptions;
create policy "Users can delete own web push subscriptions from their session"
  on public.web_push_subscriptions for delete to authenticated
  using (user_id = (select auth.uid()) and (select auth.jwt()) ->> 'client_id' is null);
