"""`make migrate` (scripts/migrate.sh) against real scratch databases: everything once,
nothing twice, and a broken migration stops with its file and line, leaving nothing of it."""
import os
import shutil
import subprocess
import urllib.parse
import uuid

import psycopg
import pytest

from conftest import ADMIN_URL, ROOT

MIGRATIONS = sorted((ROOT / "supabase" / "migrations").glob("*.sql"))


def url_for(database, url):
    base, _, _ = url.rpartition("/")
    return f"{base}/{database}"


@pytest.fixture
def scratch_db():
    """A fresh database with the local Supabase shim, dropped afterwards."""
    name = "scratch_" + uuid.uuid4().hex[:10]
    with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
        admin.execute(f"create database {name} owner postgres")
    try:
        for shim in sorted((ROOT / "supabase" / "local").glob("*.sql")):
            subprocess.run(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", url_for(name, ADMIN_URL), "-f", str(shim)],
                           check=True, capture_output=True, env={**os.environ, "PGOPTIONS": "-c client_min_messages=warning"})
        yield name
    finally:
        with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
            admin.execute(f"drop database if exists {name} with (force)")


def migrate(database, migrations_dir=None):
    env = {**os.environ, "DATABASE_URL": url_for(database, ADMIN_URL).replace("supabase_admin:", "postgres:")}
    if migrations_dir:
        env["MIGRATIONS_DIR"] = str(migrations_dir)
    return subprocess.run([str(ROOT / "scripts" / "migrate.sh")], env=env, capture_output=True, text=True)


def applied(database):
    with psycopg.connect(url_for(database, ADMIN_URL)) as conn:
        return [r[0] for r in conn.execute("select version from supabase_migrations.schema_migrations order by 1")]


def test_applies_everything_once_then_nothing(scratch_db):
    first = migrate(scratch_db)
    assert first.returncode == 0, first.stderr
    assert f"{len(MIGRATIONS)} applied" in first.stdout
    assert applied(scratch_db) == [m.name.split("_")[0] for m in MIGRATIONS]

    second = migrate(scratch_db)
    assert second.returncode == 0, second.stderr
    assert "0 applied" in second.stdout
    assert "applying" not in second.stdout


def test_records_each_file_as_the_supabase_cli_does(scratch_db):
    assert migrate(scratch_db).returncode == 0
    with psycopg.connect(url_for(scratch_db, ADMIN_URL)) as conn:
        name, statements = conn.execute(
            "select name, statements from supabase_migrations.schema_migrations order by version limit 1").fetchone()
    assert name == MIGRATIONS[0].stem.split("_", 1)[1]
    assert statements == [MIGRATIONS[0].read_text().rstrip("\n")]


def test_broken_migration_stops_with_file_and_line_and_leaves_nothing(scratch_db, tmp_path):
    for migration in MIGRATIONS:
        shutil.copy(migration, tmp_path)
    broken = tmp_path / "29990101000000_broken.sql"
    broken.write_text("create table public.half_applied (id int);\n\nselect no_such_function();\n")
    after = tmp_path / "29990101000001_after.sql"
    after.write_text("create table public.never_reached (id int);\n")

    result = migrate(scratch_db, tmp_path)
    assert result.returncode != 0
    assert "29990101000000_broken.sql:3:" in result.stderr, result.stderr
    assert "FAILED in" in result.stderr and "29990101000000_broken.sql" in result.stderr
    with psycopg.connect(url_for(scratch_db, ADMIN_URL)) as conn:
        assert conn.execute("select to_regclass('public.half_applied')").fetchone()[0] is None
        assert conn.execute("select to_regclass('public.never_reached')").fetchone()[0] is None
    assert applied(scratch_db) == [m.name.split("_")[0] for m in MIGRATIONS]


def test_refuses_transaction_control_and_bad_names(scratch_db, tmp_path):
    (tmp_path / "20990101000000_commits.sql").write_text("begin;\ncreate table x (id int);\ncommit;\n")
    result = migrate(scratch_db, tmp_path)
    assert result.returncode != 0
    assert "transaction control" in result.stderr

    shutil.rmtree(tmp_path)
    tmp_path.mkdir()
    (tmp_path / "initial.sql").write_text("select 1;\n")
    result = migrate(scratch_db, tmp_path)
    assert result.returncode != 0
    assert "YYYYMMDDHHMMSS_feature.sql" in result.stderr


def test_migrations_run_as_a_non_superuser_like_hosted_supabase(scratch_db):
    with psycopg.connect(url_for(scratch_db, ADMIN_URL)) as conn:
        superuser, bypassrls, createrole = conn.execute(
            "select rolsuper, rolbypassrls, rolcreaterole from pg_roles where rolname = 'postgres'").fetchone()
    assert (superuser, bypassrls, createrole) == (False, True, True)


def test_a_migration_waits_for_a_lock_only_briefly_and_tries_again(scratch_db, tmp_path):
    """A migration that adds a trigger to auth.users must not queue behind a busy sign-in
    (and hold every sign-in after it): it gives up at MIGRATE_LOCK_TIMEOUT, is rolled back,
    and is tried again, saying so."""
    assert migrate(scratch_db).returncode == 0
    for migration in MIGRATIONS:
        shutil.copy(migration, tmp_path)
    (tmp_path / "29990101000000_trigger_on_users.sql").write_text(
        "create function public.noop() returns trigger language plpgsql as $$ begin return new; end $$;\n"
        "create trigger whereabot_noop after insert on auth.users for each row execute function public.noop();\n")
    env = {**os.environ, "DATABASE_URL": url_for(scratch_db, ADMIN_URL).replace("supabase_admin:", "postgres:"),
           "MIGRATIONS_DIR": str(tmp_path), "MIGRATE_LOCK_TIMEOUT": "200ms"}
    with psycopg.connect(url_for(scratch_db, ADMIN_URL)) as signing_in:
        # A sign-in's transaction: its row lock on auth.users conflicts with CREATE TRIGGER's.
        signing_in.execute("lock table auth.users in row exclusive mode")

        once = subprocess.run([str(ROOT / "scripts" / "migrate.sh")], env={**env, "MIGRATE_ATTEMPTS": "1"},
                              capture_output=True, text=True, timeout=60)
        assert once.returncode != 0
        assert "a lock it needs was held by another session for 200ms in each of 1 attempts" in once.stderr, once.stderr
        assert "29990101000000_trigger_on_users.sql" in once.stderr

        retrying = subprocess.Popen([str(ROOT / "scripts" / "migrate.sh")], env={**env, "MIGRATE_ATTEMPTS": "3"},
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for line in retrying.stderr:
            if "trying again" in line:
                assert "waited 200ms for a lock (attempt 1 of 3); nothing of it was applied; trying again in 2 s" in line
                break
        signing_in.commit()  # the sign-in ends; the next attempt gets its lock
    out, err = retrying.communicate(timeout=60)
    assert retrying.returncode == 0, err
    assert "1 applied" in out
    assert applied(scratch_db)[-1] == "29990101000000"
    with psycopg.connect(url_for(scratch_db, ADMIN_URL)) as conn:
        assert conn.execute("select count(*) from pg_trigger where tgname = 'whereabot_noop'").fetchone()[0] == 1


def test_make_test_db_runs_the_pgtap_suite_on_any_database_it_is_given(scratch_db):
    """`make test-db DATABASE_URL=…` (a database admin's check of a Supabase branch project):
    the whole pgTAP suite on that database, pgTAP and the helpers installed there first, the
    password never printed."""
    assert migrate(scratch_db).returncode == 0
    url = url_for(scratch_db, ADMIN_URL).replace("supabase_admin:", "postgres:")
    result = subprocess.run(["make", "-s", "-C", str(ROOT), "test-db", f"DATABASE_URL={url}"],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "All tests successful." in result.stdout
    assert "pgTAP (supabase/tests) on postgresql://postgres@" in result.stdout
    assert f":{urllib.parse.urlsplit(url).password}@" not in result.stdout + result.stderr
    with psycopg.connect(url_for(scratch_db, ADMIN_URL)) as conn:
        assert conn.execute("select count(*) from auth.users").fetchone()[0] == 0, "every test file rolled back"
