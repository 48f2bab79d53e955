-- `make audit`: who may do what, read from the live catalog, as one Markdown report a
-- database admin can read and diff. Deterministic (sorted, no OIDs or times).
with
tables as (
  select c.oid, n.nspname as schema, c.relname as name, c.relrowsecurity as rls, c.relforcerowsecurity as forced,
         c.relpersistence = 'u' as unlogged
  from pg_class c join pg_namespace n on n.oid = c.relnamespace
  where n.nspname in ('public', 'relay', 'private') and c.relkind in ('r', 'p')
),
roles(role) as (values ('anon'), ('authenticated'), ('service_role'), ('whereabot_relay')),
table_privileges as (
  select t.oid, r.role,
         coalesce(string_agg(distinct p.privilege_type, ', ' order by p.privilege_type), '') as privileges
  from tables t cross join roles r
  left join information_schema.role_table_grants p
    on p.table_schema = t.schema and p.table_name = t.name and p.grantee = r.role
  group by t.oid, r.role
),
column_privileges as (
  select t.oid, r.role,
         string_agg(p.privilege_type || ' (' || p.column_name || ')', ', ' order by p.privilege_type, p.column_name) as privileges
  from tables t cross join roles r
  join information_schema.column_privileges p
    on p.table_schema = t.schema and p.table_name = t.name and p.grantee = r.role
  where not exists (select from information_schema.role_table_grants g
                    where g.table_schema = t.schema and g.table_name = t.name and g.grantee = r.role
                      and g.privilege_type = p.privilege_type)
  group by t.oid, r.role
),
table_sections as (
  select t.schema, t.name,
    format(E'### %s.%s\n\n- row level security: %s%s%s\n', t.schema, t.name,
           case when t.rls then 'on' else 'OFF' end, case when t.forced then ', forced' else '' end,
           case when t.unlogged then ' · UNLOGGED' else '' end)
    || coalesce((select E'- privileges: ' || string_agg(
                   tp.role || ' ' || coalesce(nullif(tp.privileges, ''), '—')
                   || coalesce(' + ' || cp.privileges, ''), '; ' order by tp.role)
                 from table_privileges tp left join column_privileges cp on cp.oid = tp.oid and cp.role = tp.role
                 where tp.oid = t.oid) || E'\n', '')
    || coalesce((select string_agg(format(E'- policy "%s" — %s to %s%s%s\n', p.policyname, p.cmd,
                                          array_to_string(p.roles, ', '),
                                          coalesce(E'\n  - using: `' || p.qual || '`', ''),
                                          coalesce(E'\n  - with check: `' || p.with_check || '`', '')), '' order by p.policyname)
                 from pg_policies p where p.schemaname = t.schema and p.tablename = t.name), E'- no policy\n')
    as text
  from tables t
),
functions as (
  select n.nspname as schema, p.proname as name, pg_get_function_identity_arguments(p.oid) as arguments,
         p.prosecdef as definer, pg_get_userbyid(p.proowner) as owner,
         coalesce((select string_agg(c, ', ') from unnest(p.proconfig) c), '(none)') as config,
         coalesce((select string_agg(distinct case when a.grantee = 0 then 'PUBLIC' else pg_get_userbyid(a.grantee) end, ', ')
                   from aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) a
                   where a.privilege_type = 'EXECUTE'), '') as executors,
         coalesce((select string_agg(distinct found.channel, ', ')
                   from (select m[1] as channel from regexp_matches(p.prosrc, '''(whereabot_[a-z]+(_[a-z]+)*)''', 'g') m
                         union all  -- locates, answers and cancels go to the instances' own channels
                         select 'whereabot_i_<instance>'
                         where p.prosrc ~ 'private\.(instance_channel|notify_instances|notify_cancel)\(') found),
                  '') as channels
  from pg_proc p join pg_namespace n on n.oid = p.pronamespace
  where n.nspname in ('public', 'relay', 'private') and p.prokind in ('f', 'p')
),
indexes as (
  select n.nspname as schema, i.relname as name, pg_get_indexdef(i.oid) as definition,
         coalesce(obj_description(i.oid, 'pg_class'), '(no reason given)') as reason
  from pg_index x join pg_class i on i.oid = x.indexrelid join pg_namespace n on n.oid = i.relnamespace
  where n.nspname in ('public', 'relay', 'private') and not x.indisprimary
)
select E'## Tables\n\n'
  || (select string_agg(text, E'\n' order by schema, name) from table_sections)
  || E'\n## Functions\n\n| function | security | owner | settings | execute | notifies |\n|---|---|---|---|---|---|\n'
  || (select string_agg(format(E'| %s.%s(%s) | %s | %s | %s | %s | %s |', schema, name, arguments,
                               case when definer then 'definer' else 'invoker' end, owner, config,
                               executors, nullif(channels, '')), E'\n' order by schema, name, arguments)
      from functions)
  || E'\n\n## Indexes (besides primary keys)\n\n| index | definition | needed by |\n|---|---|---|\n'
  || (select string_agg(format('| %s.%s | `%s` | %s |', schema, name,
                               regexp_replace(definition, '^CREATE (UNIQUE )?INDEX \S+ ON ', '\1'), reason),
                        E'\n' order by schema, name) from indexes)
  || E'\n';
