-- =============================================================================
-- A pending request's rules in one trigger, not seventeen CHECK constraints (issue 43)
-- =============================================================================
-- PostgreSQL reads each CHECK constraint's expression from its stored text and plans it
-- again for every statement that inserts or updates the table (ExecRelCheck builds them per
-- executor run): with seventeen of them, an insert into relay.pending_requests cost 130 µs
-- and the settle's update 128 µs where the same statements without checks cost 30 and 26
-- (5,000 each, this machine). A locate makes one insert and one update. The same rules,
-- in a trigger function PL/pgSQL compiles once per session, cost 53 µs an insert.
--
-- The rules are unchanged: each is the negation of the check it replaces (a null passes, as
-- it did), raised as 23514 check_violation under the constraint's name. The two BEFORE
-- UPDATE triggers with WHEN clauses (whose clauses were read and planned per statement too)
-- are folded in: settling clears the agent's reason, and a call's resumable row is kept 30
-- seconds, before the rules are checked.

create or replace function private.pending_request_rules()
returns trigger
language plpgsql
set search_path = ''
as $$
begin
  -- What settling forgets, before the rules are checked: the agent's reason, and a call's
  -- resumable row is kept 30 seconds, not 10 minutes (a call answered in the call).
  if tg_op = 'UPDATE' and new.settled_at is not null then
    new.ask_reason := null;
    if old.settled_at is null and new.resumable and not new.durable then
      new.keep_until := least(new.keep_until, now() + interval '30 seconds');
    end if;
  end if;
  -- Each rule is the negation of the CHECK it replaces, so a null passes as it did.
  if not (char_length(new.client_id) between 1 and 255) then
    raise exception using errcode = 'check_violation', constraint = 'pending_requests_client_id_check',
      message = 'a request''s client_id is 1 to 255 characters';
  elsif not (char_length(new.client_name) <= 200) then
    raise exception using errcode = 'check_violation', constraint = 'pending_requests_client_name_check',
      message = 'a request''s client_name is at most 200 characters';
  elsif not (octet_length(new.reply_key) = 32) then
    raise exception using errcode = 'check_violation', constraint = 'pending_requests_reply_key_check',
      message = 'a request''s reply_key is 32 bytes';
  elsif not (new.outcome in ('location', 'denied', 'unavailable', 'expired', 'abandoned')) then
    raise exception using errcode = 'check_violation', constraint = 'pending_requests_outcome_check',
      message = 'a request''s outcome is location, denied, unavailable, expired or abandoned';
  elsif not (new.reason in ('user', 'no_answer', 'permission', 'no_fix', 'error')) then
    raise exception using errcode = 'check_violation', constraint = 'pending_requests_reason_check',
      message = 'a request''s reason is user, no_answer, permission, no_fix or error';
  elsif not (new.wake_kind in ('alert', 'silent', 'checking')) then
    raise exception using errcode = 'check_violation', constraint = 'pending_requests_wake_kind_check',
      message = 'a request''s wake_kind is alert, silent or checking';
  elsif not (new.watcher_instance ~ '^[A-Za-z0-9._:-]{1,64}$') then
    raise exception using errcode = 'check_violation', constraint = 'pending_requests_watcher_instance_check',
      message = 'a request''s watcher_instance is 1 to 64 letters, digits or ._:-';
  elsif not (char_length(new.ask_reason) between 1 and 120) then
    raise exception using errcode = 'check_violation', constraint = 'pending_requests_ask_reason_check',
      message = 'a request''s ask_reason is 1 to 120 characters';
  elsif not ((new.settled_at is null) = (new.outcome is null)) then
    raise exception using errcode = 'check_violation', constraint = 'pending_requests_settled_has_outcome',
      message = 'a request is settled exactly when it has an outcome';
  elsif not (new.requester_id is distinct from new.owner_id) then
    raise exception using errcode = 'check_violation', constraint = 'pending_requests_requester_is_someone_else',
      message = 'a request''s requester is someone else than its owner';
  elsif not ((new.wake_kind is null) = (new.wake_claimed_at is null)) then
    raise exception using errcode = 'check_violation', constraint = 'pending_requests_wake_kind_with_time',
      message = 'a request''s wake push has a kind exactly when it has a time';
  elsif not (new.checking_claimed_at is null or new.wake_kind = 'silent') then
    raise exception using errcode = 'check_violation', constraint = 'pending_requests_checking_after_silent_wake',
      message = 'a checking alert follows only a silent wake';
  elsif not (new.realert_claimed_at is null or new.wake_kind is not null) then
    raise exception using errcode = 'check_violation', constraint = 'pending_requests_realert_after_wake',
      message = 'a re-alert follows only a wake push';
  elsif not (new.resumable = (new.keep_until is not null)) then
    raise exception using errcode = 'check_violation', constraint = 'pending_requests_resumable_has_ttl',
      message = 'a request is resumable exactly when it has keep_until';
  elsif not (new.resumable or not new.durable) then
    raise exception using errcode = 'check_violation', constraint = 'pending_requests_durable_is_resumable',
      message = 'a durable request is resumable';
  elsif not (new.wrapped_secret is null or (new.resumable and octet_length(new.wrapped_secret) between 40 and 80)) then
    raise exception using errcode = 'check_violation', constraint = 'pending_requests_wrapped_secret_size',
      message = 'a wrapped secret is 40 to 80 bytes, of a resumable request';
  elsif not (new.settled_at is null or new.ask_reason is null) then
    raise exception using errcode = 'check_violation', constraint = 'pending_requests_reason_until_settled',
      message = 'a settled request keeps no reason';
  end if;
  return new;
end;
$$;
comment on function private.pending_request_rules() is
  'The rules of a relay.pending_requests row (what its CHECK constraints said), and what settling forgets (the reason; a call''s resumable row after 30 seconds).';
revoke execute on function private.pending_request_rules() from public, anon, authenticated;

create trigger pending_requests_keep_their_rules
  before insert or update on relay.pending_requests
  for each row execute function private.pending_request_rules();

drop trigger pending_requests_forget_reason_when_settled on relay.pending_requests;
drop trigger pending_requests_forget_answered_call on relay.pending_requests;
drop function private.forget_ask_reason();
drop function private.forget_answered_call();

alter table relay.pending_requests drop constraint pending_requests_client_id_check;
alter table relay.pending_requests drop constraint pending_requests_client_name_check;
alter table relay.pending_requests drop constraint pending_requests_reply_key_check;
alter table relay.pending_requests drop constraint pending_requests_outcome_check;
alter table relay.pending_requests drop constraint pending_requests_reason_check;
alter table relay.pending_requests drop constraint pending_requests_wake_kind_check;
alter table relay.pending_requests drop constraint pending_requests_watcher_instance_check;
alter table relay.pending_requests drop constraint pending_requests_ask_reason_check;
alter table relay.pending_requests drop constraint pending_requests_settled_has_outcome;
alter table relay.pending_requests drop constraint pending_requests_requester_is_someone_else;
alter table relay.pending_requests drop constraint pending_requests_wake_kind_with_time;
alter table relay.pending_requests drop constraint pending_requests_checking_after_silent_wake;
alter table relay.pending_requests drop constraint pending_requests_realert_after_wake;
alter table relay.pending_requests drop constraint pending_requests_resumable_has_ttl;
alter table relay.pending_requests drop constraint pending_requests_durable_is_resumable;
alter table relay.pending_requests drop constraint pending_requests_wrapped_secret_size;
alter table relay.pending_requests drop constraint pending_requests_reason_until_settled;
