-- =============================================================================
-- Indexes: each kept for a named query, the unused ones dropped
-- =============================================================================
-- Supabase's performance advisor lists indexes the workload never used. Each index left
-- here says which query needs it (the comment shows in `make audit` and docs/rls.md).

-- Dropped: pending_requests.waiter_instance has as many distinct values as relay
-- instances (a handful); register_instance, reap and pending_locates_on read the few
-- rows of one instance with a sequential scan of this small UNLOGGED table anyway.
drop index if exists relay.pending_requests_waiter_idx;
-- Dropped: always_allowed_agents_once (user_id, client_id, requester_id) serves every
-- lookup by user_id.
drop index if exists public.always_allowed_agents_user_id_idx;

comment on index public.agent_keys_key_hash_key is 'relay.agent_key_owner: an agent key by its hash, on every request with a key.';
comment on index public.agent_keys_user_id_idx is 'The 25-keys-per-user limit trigger, and deleting a user (cascade).';
comment on index public.always_allowed_agents_once is
  'relay.is_always_allowed and relay.claim_push (user, client, requester), the browser phone''s list by user, one row per choice.';
comment on index public.always_allowed_agents_requester_id_idx is
  'Deleting a requester''s account (cascade on requester_id), and ending a share (private.end_share).';
comment on index public.devices_user_id_idx is 'relay.user_devices, the 50-devices limit trigger, deleting a user (cascade).';
comment on index public.location_shares_one_active_idx is
  'relay.open_request''s share check and relay.people_sharing_with (owner, viewer); one active share per pair.';
comment on index public.location_shares_one_pending_idx is 'share_location_with: one waiting share per owner and address.';
comment on index public.location_shares_owner_id_idx is 'The 100-shares limit trigger, an owner''s list, deleting an owner (cascade).';
comment on index public.location_shares_viewer_id_idx is 'relay.people_sharing_with and resolve_person by viewer, deleting a viewer (cascade).';
comment on index public.push_tokens_device_id_idx is 'relay.remove_device and deleting a device (cascade).';
comment on index public.push_tokens_user_id_idx is 'relay.apns_tokens (relay.claim_push) by owner, the 50-tokens limit trigger.';
comment on index public.web_push_subscriptions_device_id_idx is
  'relay.delete_web_push_subscriptions, relay.remove_device and deleting a device (cascade).';
comment on index public.web_push_subscriptions_endpoint_key is
  'relay.drop_web_push_subscription and the save upsert, by endpoint; one row per endpoint.';
comment on index public.web_push_subscriptions_user_id_idx is
  'relay.web_push_subscriptions (relay.claim_push) by owner, the 50-subscriptions limit trigger.';
comment on index relay.connections_device_id_idx is 'relay.device_hello (replaced sockets) and device revocation, by device.';
comment on index relay.connections_instance_id_idx is 'relay.reap and relay.register_instance: an instance''s sockets.';
comment on index relay.connections_session_id_idx is 'relay.revoked_connections: sockets of a revoked session.';
comment on index relay.connections_user_id_idx is 'relay.open_request (live sockets of the owner) and the 20-sockets cap in device_hello.';
comment on index relay.pending_requests_waiting_owner_idx is
  'relay.open_request''s caps and relay.pending_locates: the requests still waiting for an owner.';
