-- Our triggers on Supabase Auth's tables name no column (docs/database.md, "Writing SQL"): a column list
-- (UPDATE OF email) or a WHEN clause makes the column a dependency, and a later Supabase
-- Auth migration altering it would fail with "cannot alter type of a column used in a
-- trigger definition", stopping Auth's upgrades on the project.
begin;
select plan(5);

select is_empty($$
  select c.relname || ': ' || t.tgname
  from pg_trigger t
  join pg_class c on c.oid = t.tgrelid
  join pg_namespace n on n.oid = c.relnamespace
  join pg_proc f on f.oid = t.tgfoid
  join pg_namespace fn on fn.oid = f.pronamespace
  where n.nspname = 'auth' and not t.tgisinternal and fn.nspname <> 'auth'
    and (cardinality(t.tgattr::int2[]) > 0 or t.tgqual is not null)
$$, 'no trigger of ours on an auth table has a column list or a WHEN clause');

select ok((select count(*) from pg_depend d join pg_trigger t on t.oid = d.objid
           join pg_class c on c.oid = d.refobjid join pg_namespace n on n.oid = c.relnamespace
           where d.classid = 'pg_trigger'::regclass and n.nspname = 'auth' and d.refobjsubid > 0
             and t.tgname like 'whereabot%') = 0,
  'no auth column depends on a trigger of ours');

-- Still what the trigger is for: a share waiting for an address reaches the account that
-- confirms it, and any other update of the user leaves it waiting.
select tests.create_supabase_user('owner');
select tests.authenticate_as('owner');
select lives_ok($$ select public.share_location_with('later@test.example') $$, 'the owner shares with an address no account has');
reset role;
insert into auth.users (id, aud, role, email, raw_user_meta_data, created_at, updated_at)
values ('00000000-0000-4000-8000-0000000000aa', 'authenticated', 'authenticated', 'later@test.example',
        '{"test_identifier": "later"}', now(), now());
update auth.users set last_sign_in_at = now() where id = '00000000-0000-4000-8000-0000000000aa';
select is((select viewer_id from public.location_shares where viewer_email = 'later@test.example'), null,
  'an update that confirms nothing leaves the share waiting');
update auth.users set email_confirmed_at = now() where id = '00000000-0000-4000-8000-0000000000aa';
select is((select viewer_id from public.location_shares where viewer_email = 'later@test.example'),
  '00000000-0000-4000-8000-0000000000aa'::uuid,
  'the update that confirms the address claims the share');

select * from finish();
rollback;
