-- =============================================================================
-- Push endpoints: one strict grammar, the same as the relay's (Sources/Push/PushEndpoint.swift)
-- =============================================================================
-- The allow-list read the host with a loose pattern ("everything up to / ? # : @"), so
-- `https://127.0.0.1%2f.googleapis.com/x` counted as a Google host and a path with a space
-- passed; only libcurl refused them later. Now an endpoint is allowed only if it is
-- `https://` + a DNS name (labels of letters, digits and inner hyphens, at most 253
-- bytes) + an optional port (1 to 65535) + a path of RFC 3986 characters with
-- well-formed percent-escapes: nothing two URL parsers could read two ways.

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
