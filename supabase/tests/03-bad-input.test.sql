-- Every function refuses missing input with a clear SQLSTATE (class 22: data exception),
-- never a silent no-op. The check enumerates the functions, so new ones are covered too.
begin;
select plan(2);

select tests.create_supabase_user('ada');

-- Calls each function of the schema with every argument null (cast to its type), in a
-- subtransaction so nothing sticks; returns each signature with the SQLSTATE it raised
-- (null when it returned normally).
create function pg_temp.sqlstates_on_nulls(p_schema text)
returns table (signature text, code text)
language plpgsql
as $$
declare
  f record;
begin
  for f in
    select p.oid::regprocedure::text as sig, p.proname,
           (select string_agg(format('null::%s', format_type(t, null)), ', ' order by i)
            from unnest(p.proargtypes::oid[]) with ordinality a(t, i)) as args
    from pg_proc p join pg_namespace n on n.oid = p.pronamespace
    where n.nspname = p_schema and p.prokind = 'f'
      and p.prorettype not in ('trigger'::regtype, 'event_trigger'::regtype)
      and p.pronargs > 0  -- a function without arguments (public.online_devices) has none to refuse
      and p.proowner = 'postgres'::regrole
  loop
    signature := f.sig;
    begin
      execute format('select * from %I.%I(%s)', p_schema, f.proname, coalesce(f.args, ''));
      code := null;
    exception when others then
      get stacked diagnostics code = returned_sqlstate;
    end;
    return next;
  end loop;
end;
$$;
grant execute on function pg_temp.sqlstates_on_nulls(text) to public;

select tests.authenticate_as_relay();
select is_empty($$ select * from pg_temp.sqlstates_on_nulls('relay') where code is null or code !~ '^22' $$,
  'every relay function refuses all-null arguments with a data exception (22xxx)');

select tests.authenticate_as('ada');
select is_empty($$ select * from pg_temp.sqlstates_on_nulls('public') where code is null or code !~ '^22' $$,
  'every public function refuses all-null arguments with a data exception (22xxx)');

reset role;
select * from finish();
rollback;
