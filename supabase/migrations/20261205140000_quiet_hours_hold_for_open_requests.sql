-- Quiet hours hold for a request already open (docs/agents.md, "Quiet hours"). They were
-- asked only when a request opened, so a durable request (up to 10 minutes) opened just
-- before a window still pinged the phones that connected during it and still got its
-- later push stages (the checking alert, the re-alert). Now the pings waiting on hello
-- (relay.device_hellos), the backstop poll (relay.pending_locates_on) and every push stage
-- (relay.claim_push) ask private.quiet_until again, the rule relay.open_request uses: an
-- agent the owner lets wake them still passes. The request stays open and reaches the
-- phone after the window.

comment on index public.quiet_hours_user_id_idx is
  'private.quiet_until (every request opened, and every later ping and push of one) and the person''s list: the windows of one user.';

create or replace function relay.device_hellos(p_instance text, p_hellos jsonb, p_max_sockets int default 20)
returns jsonb
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_hellos private.socket_hello[];
  v_hello private.socket_hello;
  v_status text[];
  v_ok uuid[] := '{}';
  v_results jsonb;
  v_pending jsonb;
begin
  perform private.check_instance_id(p_instance);
  if p_hellos is null or jsonb_typeof(p_hellos) <> 'array'
     or jsonb_array_length(p_hellos) not between 1 and 1000 then
    raise exception 'device_hellos needs an array of 1 to 1000 hellos' using errcode = '22023';
  end if;
  if p_max_sockets is null or p_max_sockets not between 1 and 1000 then
    raise exception 'max_sockets must be between 1 and 1000' using errcode = '22023';
  end if;
  if exists (select from jsonb_array_elements(p_hellos) e where jsonb_typeof(e) <> 'object') then
    raise exception 'every hello is an object' using errcode = '22023';
  end if;
  -- Oldest socket first: of two sockets of one device the later one wins, and the oldest
  -- sockets of a user keep their places under the cap.
  select array_agg(row(e.ord, h.connection, h."user", h.session, h.device, h.name, h.platform, h.app_version,
                       h.opened_at)::private.socket_hello order by h.opened_at, e.ord)
  into v_hellos
  from jsonb_array_elements(p_hellos) with ordinality as e(value, ord),
       jsonb_to_record(e.value) as h(connection uuid, "user" uuid, session uuid, device uuid, name text,
                                     platform text, app_version text, opened_at timestamptz);
  if exists (select from unnest(v_hellos) h where h.connection is null) then
    raise exception 'every hello names its connection' using errcode = '22004';
  end if;
  if (select count(distinct h.connection) from unnest(v_hellos) h) <> cardinality(v_hellos) then
    raise exception 'a connection says hello once per batch' using errcode = '22023';
  end if;
  v_status := array_fill('unregistered'::text, array[cardinality(v_hellos)]);
  -- A malformed element is refused alone and takes no lock.
  foreach v_hello in array v_hellos loop
    if v_hello.user_id is null or v_hello.session_id is null or v_hello.device_id is null
       or v_hello.opened_at is null or v_hello.platform is null
       or v_hello.platform not in ('ios', 'android', 'desktop', 'web') then
      v_status[v_hello.ord] := 'invalid';
    end if;
  end loop;

  -- The instance's row stays while the batch runs (the reaper skips a locked row).
  if exists (select from relay.instances where id = p_instance for key share) then
    perform pg_advisory_xact_lock(k)
    from (select distinct hashtextextended('whereabot_device_hello:' || h.device_id::text, 0) as k
          from unnest(v_hellos) h where v_status[h.ord] <> 'invalid' order by 1) devices;
    perform pg_advisory_xact_lock(k)
    from (select distinct hashtextextended('whereabot_open_request:' || h.user_id::text, 0) as k
          from unnest(v_hellos) h where v_status[h.ord] <> 'invalid' order by 1) owners;
    -- The rows this batch may replace, locked in the global order before any change.
    perform from relay.connections c
    where c.device_id in (select h.device_id from unnest(v_hellos) h where v_status[h.ord] <> 'invalid')
    order by c.device_id, c.id
    for update;

    foreach v_hello in array v_hellos loop
      continue when v_status[v_hello.ord] = 'invalid';
      if exists (select from auth.users where id = v_hello.user_id) then
        v_status[v_hello.ord] := private.register_socket(p_instance, v_hello.connection, v_hello.user_id,
          v_hello.session_id, v_hello.device_id, v_hello.name, v_hello.platform, v_hello.app_version,
          v_hello.opened_at, p_max_sockets);
      else
        v_status[v_hello.ord] := 'revoked';
      end if;
    end loop;
    -- A socket of the batch that a later one of the same device replaced is replaced.
    foreach v_hello in array v_hellos loop
      if v_status[v_hello.ord] = 'ok' then
        if exists (select from relay.connections where id = v_hello.connection) then
          v_ok := v_ok || v_hello.user_id;
        else
          v_status[v_hello.ord] := 'replaced';
        end if;
      end if;
    end loop;
  end if;

  select jsonb_agg(jsonb_build_object('connection', h.connection, 'status', v_status[h.ord]) order by h.ord)
  into v_results from unnest(v_hellos) h;
  -- The pings still waiting for the users of the ok sockets, oldest first; none of a
  -- request whose agent may not wake its owner in the quiet hours holding now
  -- (private.quiet_until, as relay.open_request asks it: docs/agents.md, "Quiet hours").
  select coalesce(jsonb_agg(jsonb_build_object('owner', r.owner_id, 'message', private.locate_ping(r))
                            order by r.created_at), '[]'::jsonb)
  into v_pending
  from relay.pending_requests r
  where r.owner_id = any (v_ok) and r.settled_at is null and r.expires_at > now()
    and (not exists (select from public.quiet_hours q where q.user_id = r.owner_id)
         or private.quiet_until(r.owner_id, r.client_id, r.requester_id, now()) is null);
  return jsonb_build_object('results', v_results, 'pending', v_pending);
end;
$$;
comment on function relay.device_hellos(text, jsonb, int) is
  'Registers up to 1000 sockets that said hello on INSTANCE; returns each one''s status (one element never fails another) and the pings waiting for their users (none that quiet hours hold back).';

create or replace function relay.pending_locates_on(p_instance text)
returns table (owner_id uuid, message jsonb)
language plpgsql
stable
security definer
set search_path = ''
set enable_seqscan = off
as $$
begin
  perform private.check_instance_id(p_instance);
  return query
    select r.owner_id, private.locate_ping(r)
    from relay.pending_requests r
    cross join lateral (select from relay.connections c
                        where c.user_id = r.owner_id and c.instance_id = p_instance limit 1) held
    where r.settled_at is null and r.expires_at > now()
      and (not exists (select from public.quiet_hours q where q.user_id = r.owner_id)
           or private.quiet_until(r.owner_id, r.client_id, r.requester_id, now()) is null)
    order by r.created_at;
end;
$$;
comment on function relay.pending_locates_on(text) is
  'Locate messages of every request still waiting for a user with a socket on INSTANCE, oldest first (none that quiet hours hold back).';

create or replace function relay.claim_push(p_id uuid, p_instance text, p_stage text,
  p_per_target int default 30, p_per_account int default 100)
returns jsonb
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_request relay.pending_requests;
  v_always boolean;
  v_kind text;
  v_apns jsonb;
  v_web jsonb;
  v_quiet jsonb;
begin
  perform private.check_instance_id(p_instance);
  if p_id is null or p_stage is null then
    raise exception 'claim_push needs a request id and a stage' using errcode = '22004';
  end if;
  if p_stage not in ('wake', 'checking', 'realert') then
    raise exception 'stage must be wake, checking or realert' using errcode = '22023';
  end if;
  perform private.check_push_budgets(p_per_target, p_per_account);

  select * into v_request from relay.pending_requests where id = p_id for update;
  if not found then
    return jsonb_build_object('status', 'gone');
  end if;
  if v_request.waiter_instance <> p_instance then
    raise exception 'only the waiting instance sends pushes for a request' using errcode = '42501';
  end if;
  if v_request.settled_at is not null then
    return jsonb_build_object('status', 'settled');
  end if;
  if v_request.expires_at <= now() then
    return jsonb_build_object('status', 'expired');
  end if;

  if p_stage = 'wake' then
    if v_request.wake_claimed_at is not null then
      return jsonb_build_object('status', 'already');
    end if;
    begin
      v_always := relay.is_always_allowed(v_request.owner_id, v_request.client_id, v_request.requester_id);
    exception when others then
      v_always := false;  -- a failed read counts as "not always allowed"
    end;
  elsif p_stage = 'checking' then
    if v_request.wake_kind is distinct from 'silent' then
      return jsonb_build_object('status', 'not_applicable');
    end if;
    if v_request.checking_claimed_at is not null then
      return jsonb_build_object('status', 'already');
    end if;
  else
    -- One re-alert (SPEC §14) after an alert that went unanswered, while at least 20 s of
    -- the request remain; never after a silent wake alone (the person was not asked).
    if v_request.wake_kind is null or (v_request.wake_kind = 'silent' and v_request.checking_claimed_at is null)
       or v_request.expires_at - now() < interval '20 seconds' then
      return jsonb_build_object('status', 'not_applicable');
    end if;
    if v_request.realert_claimed_at is not null then
      return jsonb_build_object('status', 'already');
    end if;
  end if;
  -- Quiet hours hold for a request opened before them (docs/agents.md, "Quiet hours"):
  -- every stage asks private.quiet_until again, as relay.open_request does, and nothing is
  -- pushed while the agent may not wake the owner. The stage stays unclaimed and the
  -- request open: the phone gets its ping after the window.
  v_quiet := private.quiet_until(v_request.owner_id, v_request.client_id, v_request.requester_id, now());
  if v_quiet is not null then
    return jsonb_build_object('status', 'not_applicable', 'quiet', v_quiet);
  end if;

  select coalesce(jsonb_agg(jsonb_build_object('token', t.token, 'environment', t.environment)), '[]')
    into v_apns from relay.apns_tokens(v_request.owner_id) t;
  select coalesce(jsonb_agg(jsonb_build_object('endpoint', s.endpoint, 'p256dh', s.p256dh, 'auth', s.auth)), '[]')
    into v_web from relay.web_push_subscriptions(v_request.owner_id) s;

  if p_stage = 'checking' then
    v_kind := 'checking';
    update relay.pending_requests set checking_claimed_at = now() where id = p_id;
  elsif p_stage = 'realert' then
    v_kind := 'alert';
    update relay.pending_requests set realert_claimed_at = now() where id = p_id;
  else
    if not v_always then
      v_kind := 'alert';
    elsif jsonb_array_length(v_apns) > 0 then
      v_kind := 'silent';
      v_web := '[]';  -- a service worker cannot answer silently: Web Push waits for checking
    else
      v_kind := 'checking';
    end if;
    update relay.pending_requests set wake_kind = v_kind, wake_claimed_at = now() where id = p_id;
  end if;

  -- The targets the budgets pay for (private.pay_for_pushes), and what the payloads need.
  return private.pay_for_pushes(v_apns, v_web, v_request.owner_id, v_request.requester_id, p_per_target, p_per_account)
    || jsonb_build_object(
      'status', 'claimed', 'kind', v_kind, 'owner', v_request.owner_id,
      'client_id', v_request.client_id, 'client_name', v_request.client_name, 'reason', v_request.ask_reason,
      'requester', case when v_request.requester_id is null then null
                        else private.user_card(v_request.requester_id) end,
      'expires_ms', (extract(epoch from v_request.expires_at) * 1000)::bigint);
end;
$$;
comment on function relay.claim_push(uuid, text, text, int, int) is
  'Claims one push stage of a request for its waiting instance, with the targets its per-target and per-account hourly budgets pay for (a shared request''s out of the requester''s own); nothing while quiet hours hold for its agent.';
