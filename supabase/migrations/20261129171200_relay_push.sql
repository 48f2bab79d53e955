-- =============================================================================
-- Relay push: always-allowed check, push targets, dropping dead targets
-- =============================================================================

-- -----------------------------------------------------------------------------
-- relay.is_always_allowed(owner, client_id, requester) → boolean
-- -----------------------------------------------------------------------------
-- Decides only which push goes out (silent or alert); the phone checks its own list
-- again before it answers without asking.
create or replace function relay.is_always_allowed(p_owner uuid, p_client_id text, p_requester uuid)
returns boolean
language plpgsql
stable
security definer
set search_path = ''
as $$
begin
  if p_owner is null or p_client_id is null then
    raise exception 'is_always_allowed needs an owner and a client id' using errcode = '22004';
  end if;
  return exists (
    select from public.always_allowed_agents a
    where a.user_id = p_owner and a.client_id = p_client_id
      and a.requester_id is not distinct from nullif(p_requester, p_owner));
end;
$$;
comment on function relay.is_always_allowed(uuid, text, uuid) is
  'Whether OWNER always allows agent CLIENT_ID (for REQUESTER''s requests when shared).';

-- -----------------------------------------------------------------------------
-- Push targets of an owner (devices that were removed get no push)
-- -----------------------------------------------------------------------------
create or replace function relay.apns_tokens(p_owner uuid)
returns table (token text, environment text)
language plpgsql
stable
security definer
set search_path = ''
as $$
begin
  if p_owner is null then
    raise exception 'apns_tokens needs an owner' using errcode = '22004';
  end if;
  return query
    select t.token, t.environment
    from public.push_tokens t
    left join public.devices d on d.id = t.device_id
    where t.user_id = p_owner and d.revoked_at is null
    order by t.created_at;
end;
$$;
comment on function relay.apns_tokens(uuid) is 'APNs tokens of OWNER''s devices that were not removed.';

create or replace function relay.web_push_subscriptions(p_owner uuid)
returns table (endpoint text, p256dh text, auth text)
language plpgsql
stable
security definer
set search_path = ''
as $$
begin
  if p_owner is null then
    raise exception 'web_push_subscriptions needs an owner' using errcode = '22004';
  end if;
  return query
    select s.endpoint, s.p256dh, s.auth
    from public.web_push_subscriptions s
    left join public.devices d on d.id = s.device_id
    where s.user_id = p_owner and d.revoked_at is null
    order by s.created_at;
end;
$$;
comment on function relay.web_push_subscriptions(uuid) is
  'Web Push subscriptions of OWNER''s devices that were not removed.';

create or replace function relay.drop_apns_token(p_token text)
returns boolean
language plpgsql
security definer
set search_path = ''
as $$
begin
  if p_token is null then
    raise exception 'drop_apns_token needs a token' using errcode = '22004';
  end if;
  delete from public.push_tokens where token = p_token;
  return found;
end;
$$;
comment on function relay.drop_apns_token(text) is
  'Deletes an APNs token that APNs called dead (410, BadDeviceToken); false when already gone.';

create or replace function relay.drop_web_push_subscription(p_endpoint text)
returns boolean
language plpgsql
security definer
set search_path = ''
as $$
begin
  if p_endpoint is null then
    raise exception 'drop_web_push_subscription needs an endpoint' using errcode = '22004';
  end if;
  delete from public.web_push_subscriptions where endpoint = p_endpoint;
  return found;
end;
$$;
comment on function relay.drop_web_push_subscription(text) is
  'Deletes a Web Push subscription whose push service answered 404 or 410; false when already gone.';

revoke execute on all functions in schema relay from public, anon, authenticated, service_role;
grant execute on function relay.is_always_allowed(uuid, text, uuid), relay.apns_tokens(uuid),
  relay.web_push_subscriptions(uuid), relay.drop_apns_token(text),
  relay.drop_web_push_subscription(text) to whereabot_relay;
