-- =============================================================================
-- The catalog of one database as text, for scripts/schema-check.sh
-- =============================================================================
-- One line per fact, each starting with the object it is about, so that two databases
-- built from the same SQL print the same lines and `diff` names what differs. OIDs never
-- appear; privileges are the effective ones (a NULL ACL is printed as its default), sorted.
-- Everything outside the system schemas is described except extension members (pgTAP,
-- pgcrypto); the check subtracts what the Supabase shim alone creates. Roles are
-- cluster-wide, the same for every database of the cluster, and are not described.
-- Multi-line definitions (functions, views) print one line each, numbered.

-- Names print schema-qualified whatever the database's search_path; JIT compiling this
-- one-off query would cost seconds.
set search_path = '';
set jit = off;

with
ns as (
  select n.oid, n.nspname
  from pg_namespace n
  where n.nspname not in ('pg_catalog', 'information_schema')
    and n.nspname !~ '^pg_(toast|temp_|toast_temp_)'
),
-- Objects that belong to an extension (CREATE EXTENSION made them).
ext_member as (
  select classid, objid from pg_depend where deptype = 'e'
),
rel as (
  select c.oid, c.relname, c.relkind, c.relnamespace, ns.nspname,
         format('%I.%I', ns.nspname, c.relname) as qname
  from pg_class c join ns on ns.oid = c.relnamespace
  where not exists (select from ext_member e where e.classid = 'pg_class'::regclass and e.objid = c.oid)
),
lines (line) as (
  -- Schemas ---------------------------------------------------------------------
  select format('schema %I: owner=%s acl=%s comment=%L', n.nspname, pg_get_userbyid(n.nspowner),
                array_to_string(array(select x::text from unnest(coalesce(n.nspacl, acldefault('n', n.nspowner))) x
                                      order by 1), ','),
                obj_description(n.oid, 'pg_namespace'))
  from pg_namespace n join ns on ns.oid = n.oid
  where not exists (select from ext_member e where e.classid = 'pg_namespace'::regclass and e.objid = n.oid)

  -- Extensions ------------------------------------------------------------------
  union all
  select format('extension %I: schema=%I version=%s', x.extname, n.nspname, x.extversion)
  from pg_extension x join pg_namespace n on n.oid = x.extnamespace

  -- This database's privileges --------------------------------------------------
  union all
  select format('database: acl=%s',
                array_to_string(array(select x::text from unnest(coalesce(d.datacl, acldefault('d', d.datdba))) x
                                      order by 1), ','))
  from pg_database d where d.datname = current_database()

  -- Default privileges ----------------------------------------------------------
  union all
  select format('default privileges for %s in %s on %s: %s', pg_get_userbyid(d.defaclrole),
                coalesce(quote_ident(n.nspname), 'every schema'), d.defaclobjtype,
                array_to_string(array(select x::text from unnest(d.defaclacl) x order by 1), ','))
  from pg_default_acl d left join pg_namespace n on n.oid = d.defaclnamespace

  -- Tables, views, sequences, composite types' relations ------------------------
  union all
  select format('relation %s: kind=%s persistence=%s rls=%s force_rls=%s replica_identity=%s options=%s of_type=%s owner=%s acl=%s comment=%L',
                r.qname, r.relkind, c.relpersistence, c.relrowsecurity, c.relforcerowsecurity, c.relreplident,
                coalesce(array_to_string(array(select o from unnest(c.reloptions) o order by 1), ','), ''),
                case when c.reloftype <> 0 then c.reloftype::regtype::text else '' end,
                pg_get_userbyid(c.relowner),
                case when r.relkind = 'c' then ''
                     else array_to_string(array(select x::text from unnest(coalesce(c.relacl,
                            acldefault(case when r.relkind = 'S' then 's' else 'r' end::"char", c.relowner))) x
                            order by 1), ',') end,
                obj_description(c.oid, 'pg_class'))
  from rel r join pg_class c on c.oid = r.oid
  where r.relkind in ('r', 'p', 'v', 'm', 'S', 'f', 'c')

  -- Partitioning and inheritance
  union all
  select format('relation %s: inherits %s', r.qname, i.inhparent::regclass::text)
  from rel r join pg_inherits i on i.inhrelid = r.oid
  union all
  select format('relation %s: partition key %s', r.qname, pg_get_partkeydef(r.oid))
  from rel r where r.relkind = 'p'
  union all
  select format('relation %s: partition bound %s', r.qname, pg_get_expr(c.relpartbound, c.oid))
  from rel r join pg_class c on c.oid = r.oid where c.relispartition

  -- Columns, numbered by their place among the live columns ----------------------
  union all
  select format('relation %s column %s %I: type=%s not_null=%s default=%L identity=%s generated=%s collation=%s acl=%s comment=%L',
                r.qname, lpad((row_number() over (partition by r.oid order by a.attnum))::text, 3, '0'),
                a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull,
                pg_get_expr(ad.adbin, ad.adrelid), a.attidentity, a.attgenerated,
                case when a.attcollation <> t.typcollation then (select collname from pg_collation where oid = a.attcollation)
                     else '' end,
                coalesce(array_to_string(array(select x::text from unnest(a.attacl) x order by 1), ','), ''),
                col_description(r.oid, a.attnum))
  from rel r
  join pg_attribute a on a.attrelid = r.oid and a.attnum > 0 and not a.attisdropped
  join pg_type t on t.oid = a.atttypid
  left join pg_attrdef ad on ad.adrelid = a.attrelid and ad.adnum = a.attnum
  where r.relkind in ('r', 'p', 'v', 'm', 'f', 'c')

  -- Constraints of tables and domains -------------------------------------------
  union all
  select format('constraint %s %I: %s comment=%L',
                coalesce((select qname from rel where oid = k.conrelid), k.contypid::regtype::text),
                k.conname, pg_get_constraintdef(k.oid), obj_description(k.oid, 'pg_constraint'))
  from pg_constraint k
  where (k.conrelid in (select oid from rel))
     or (k.contypid <> 0 and exists (select from pg_type t join ns on ns.oid = t.typnamespace where t.oid = k.contypid))

  -- Indexes ---------------------------------------------------------------------
  union all
  select format('index %s: %s clustered=%s comment=%L', r.qname, pg_get_indexdef(r.oid), i.indisclustered,
                obj_description(r.oid, 'pg_class'))
  from rel r join pg_index i on i.indexrelid = r.oid
  where r.relkind in ('i', 'I')

  -- Sequences -------------------------------------------------------------------
  union all
  select format('sequence %s: type=%s start=%s increment=%s min=%s max=%s cache=%s cycle=%s owned_by=%s',
                r.qname, s.seqtypid::regtype, s.seqstart, s.seqincrement, s.seqmin, s.seqmax, s.seqcache, s.seqcycle,
                coalesce((select format('%s.%I', d.refobjid::regclass, a.attname)
                          from pg_depend d join pg_attribute a on a.attrelid = d.refobjid and a.attnum = d.refobjsubid
                          where d.classid = 'pg_class'::regclass and d.objid = r.oid and d.deptype in ('a', 'i')
                            and d.refclassid = 'pg_class'::regclass), ''))
  from rel r join pg_sequence s on s.seqrelid = r.oid

  -- Views and materialized views, line by line ------------------------------------
  union all
  select format('relation %s definition %s: %s', r.qname, lpad(l.n::text, 4, '0'), l.line)
  from rel r, regexp_split_to_table(pg_get_viewdef(r.oid), E'\n') with ordinality as l(line, n)
  where r.relkind in ('v', 'm')

  -- Rules other than a view's own -------------------------------------------------
  union all
  select format('rule %s %I: %s', r.qname, w.rulename, pg_get_ruledef(w.oid))
  from rel r join pg_rewrite w on w.ev_class = r.oid
  where w.rulename <> '_RETURN'

  -- Triggers (on any table, the shim's included) ------------------------------------
  union all
  select format('trigger %s %I: %s enabled=%s comment=%L', r.qname, g.tgname, pg_get_triggerdef(g.oid),
                g.tgenabled, obj_description(g.oid, 'pg_trigger'))
  from rel r join pg_trigger g on g.tgrelid = r.oid
  where not g.tgisinternal

  -- Row-level security policies ---------------------------------------------------
  union all
  select format('policy %s %I: cmd=%s permissive=%s roles=%s using=%L with_check=%L comment=%L',
                r.qname, p.polname, p.polcmd, p.polpermissive,
                array_to_string(array(select case when x = 0 then 'public' else pg_get_userbyid(x) end
                                      from unnest(p.polroles) x order by 1), ','),
                pg_get_expr(p.polqual, p.polrelid), pg_get_expr(p.polwithcheck, p.polrelid),
                obj_description(p.oid, 'pg_policy'))
  from rel r join pg_policy p on p.polrelid = r.oid

  -- Functions and procedures: owner, privileges, comment, and the whole definition --
  -- (pg_get_functiondef has the arguments and their defaults, the result, language,
  -- volatility, strictness, security, parallel safety, cost, rows, every SET and the body
  -- exactly as stored).
  union all
  select format('function %s: kind=%s owner=%s acl=%s comment=%L', p.oid::regprocedure, p.prokind,
                pg_get_userbyid(p.proowner),
                array_to_string(array(select x::text from unnest(coalesce(p.proacl, acldefault('f', p.proowner))) x
                                      order by 1), ','),
                obj_description(p.oid, 'pg_proc'))
  from pg_proc p join ns on ns.oid = p.pronamespace
  where not exists (select from ext_member e where e.classid = 'pg_proc'::regclass and e.objid = p.oid)
  union all
  select format('function %s definition %s: %s', p.oid::regprocedure, lpad(l.n::text, 4, '0'), l.line)
  from pg_proc p join ns on ns.oid = p.pronamespace,
       regexp_split_to_table(pg_get_functiondef(p.oid), E'\n') with ordinality as l(line, n)
  where p.prokind in ('f', 'p')
    and not exists (select from ext_member e where e.classid = 'pg_proc'::regclass and e.objid = p.oid)

  -- Types: enums, domains, ranges, composites (their attributes are columns above) ----
  union all
  select format('type %s: kind=%s owner=%s acl=%s comment=%L%s', t.oid::regtype, t.typtype,
                pg_get_userbyid(t.typowner),
                array_to_string(array(select x::text from unnest(coalesce(t.typacl, acldefault('T', t.typowner))) x
                                      order by 1), ','),
                obj_description(t.oid, 'pg_type'),
                case t.typtype
                  when 'e' then ' labels=' || array_to_string(array(select enumlabel from pg_enum
                                                                   where enumtypid = t.oid order by enumsortorder), ',')
                  when 'd' then format(' base=%s not_null=%s default=%L', format_type(t.typbasetype, t.typtypmod),
                                       t.typnotnull, t.typdefault)
                  when 'r' then ' subtype=' || (select rngsubtype::regtype::text from pg_range where rngtypid = t.oid)
                  else '' end)
  from pg_type t join ns on ns.oid = t.typnamespace
  where (t.typtype in ('e', 'd', 'r', 'm', 'b')
         or (t.typtype = 'c' and (select relkind from pg_class where oid = t.typrelid) = 'c'))
    and not exists (select from ext_member e where e.classid = 'pg_type'::regclass and e.objid = t.oid)
    and t.typname !~ '^_'

  -- Operators, collations, statistics objects, event triggers, publications --------
  union all
  select format('operator %s: function=%s', o.oid::regoperator, o.oprcode::regproc)
  from pg_operator o join ns on ns.oid = o.oprnamespace
  where not exists (select from ext_member e where e.classid = 'pg_operator'::regclass and e.objid = o.oid)
  union all
  select format('collation %I.%I: provider=%s locale=%s', ns.nspname, c.collname, c.collprovider,
                coalesce(c.colliculocale, c.collcollate))
  from pg_collation c join ns on ns.oid = c.collnamespace
  union all
  select format('statistics %I.%I: %s', ns.nspname, s.stxname, pg_get_statisticsobjdef(s.oid))
  from pg_statistic_ext s join ns on ns.oid = s.stxnamespace
  union all
  select format('event trigger %I: event=%s function=%s enabled=%s tags=%s', e.evtname, e.evtevent,
                e.evtfoid::regproc, e.evtenabled, coalesce(array_to_string(e.evttags, ','), ''))
  from pg_event_trigger e
  union all
  select format('publication %I: all_tables=%s insert=%s update=%s delete=%s truncate=%s', p.pubname,
                p.puballtables, p.pubinsert, p.pubupdate, p.pubdelete, p.pubtruncate)
  from pg_publication p
)
select line from lines order by line collate "C";
