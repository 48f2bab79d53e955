"""Shared fixtures for the acceptance tests: real PostgreSQL connections as each role.

The URLs come from scripts/test.sh (a fresh test database with the shim and every
migration): WHEREABOT_TEST_ADMIN_URL (bootstrap superuser), WHEREABOT_TEST_OWNER_URL
(the migration role `postgres`) and WHEREABOT_TEST_RELAY_URL (the relay's role).
"""
import contextlib
import json
import os
import pathlib
import uuid

import psycopg
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _own_database_per_worker():
    """Under pytest-xdist (scripts/test.sh runs the acceptance tests in several workers),
    each worker has a database of its own, `<test database>_<worker>`, copied from the test
    database before the run: LISTEN/NOTIFY, the relay's instance and request tables and
    every count a test reads are per database, so workers never see each other's. The URLs
    are rewritten in the environment, so relays and tools started by the tests use it too."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if not worker or os.environ.get("WHEREABOT_TEST_DATABASE_PER_WORKER") != "1":
        return
    for name in ("WHEREABOT_TEST_ADMIN_URL", "WHEREABOT_TEST_OWNER_URL", "WHEREABOT_TEST_RELAY_URL"):
        base, _, database = os.environ[name].rpartition("/")
        os.environ[name] = f"{base}/{database}_{worker}"


_own_database_per_worker()
ADMIN_URL = os.environ.get(
    "WHEREABOT_TEST_ADMIN_URL", "postgresql://supabase_admin:postgres@127.0.0.1:54322/whereabot_test")
OWNER_URL = os.environ.get(
    "WHEREABOT_TEST_OWNER_URL", "postgresql://postgres:postgres@127.0.0.1:54322/whereabot_test")
RELAY_URL = os.environ.get(
    "WHEREABOT_TEST_RELAY_URL", "postgresql://whereabot_relay:whereabot-relay-dev@127.0.0.1:54322/whereabot_test")


@pytest.fixture(scope="module", autouse=True)
def fresh_registration_budget():
    """Each module starts with the per-address budget of OAuth registrations (20 an hour,
    docs/agents.md) unspent: the files of one worker share a database and one address."""
    with psycopg.connect(ADMIN_URL, autocommit=True) as conn:
        conn.execute("update private.oauth_clients set created_at = created_at - interval '2 hours'"
                     " where created_at > now() - interval '2 hours'")


@pytest.fixture
def admin():
    """An autocommit connection as the bootstrap superuser, for test data."""
    with psycopg.connect(ADMIN_URL, autocommit=True) as conn:
        yield conn


@pytest.fixture
def relay_connect():
    """Opens connections as whereabot_relay; all are closed after the test."""
    opened = []

    def connect(autocommit=True):
        conn = psycopg.connect(RELAY_URL, autocommit=autocommit)
        opened.append(conn)
        return conn

    yield connect
    for conn in opened:
        conn.close()


@pytest.fixture
def make_user(admin):
    """Creates a user in auth.users (with a session) and returns their id."""

    def make(name="Test User", email=None, with_session=False):
        user_id = uuid.uuid4()
        email = email or f"{user_id.hex[:12]}@test.example"
        admin.execute(
            "insert into auth.users (id, aud, role, email, raw_user_meta_data, created_at, updated_at)"
            " values (%s, 'authenticated', 'authenticated', %s, %s, now(), now())",
            (user_id, email, json.dumps({"full_name": name})),
        )
        session_id = uuid.uuid4()
        admin.execute("insert into auth.sessions (id, user_id, created_at) values (%s, %s, now())",
                      (session_id, user_id))
        return (user_id, session_id, email) if with_session else user_id

    return make


def make_oauth_client(admin, client_id, name):
    """Registers an OAuth client as Supabase Auth does (a public client of dynamic
    registration): every column real Supabase requires, which has no default there."""
    admin.execute("insert into auth.oauth_clients (id, client_name, registration_type, client_type, redirect_uris,"
                  " grant_types, token_endpoint_auth_method)"
                  " values (%s, %s, 'dynamic', 'public', 'http://127.0.0.1:33418/callback',"
                  " 'authorization_code,refresh_token', 'none')", (client_id, name))


@contextlib.contextmanager
def through_the_api(admin, who):
    """A transaction on `admin` as Supabase's API runs a request of `who` = (user, session,
    email): role authenticated, the JWT's claims in request.jwt.claims, so RLS applies."""
    claims = json.dumps({"sub": str(who[0]), "role": "authenticated", "session_id": str(who[1]), "email": who[2]})
    with admin.transaction():
        admin.execute("set local role authenticated")
        admin.execute("select set_config('request.jwt.claims', %s, true)", (claims,))
        yield admin


# The files that take longest, longest first (seconds of one worker with four, at
# 451 tests: test_push_services 82, test_push 67, test_hostile 54, test_forwarded 47,
# test_browser_phone 45, test_mcp_tasks 42, test_auth_standin 38, test_migrate 37,
# test_hostile_push 37; the other 40 files take 21 s or less each). pytest-xdist's loadfile
# hands whole files to workers in collection order, so a long file collected late
# (test_push after 32 others) ran alone at the end; started first, the short files fill the
# workers around it. Only the order of files changes: within one, tests run as written.
# (test_push.py was one file of 153 s, longer than a quarter of the run: it is two now.)
# test_frameworks.py first of all: it makes a venv per framework from the registry before
# its tests (about three minutes in all on a clean clone).
LONGEST_FIRST = ["test_frameworks.py", "test_push_services.py", "test_push.py", "test_hostile.py", "test_forwarded.py", "test_browser_phone.py",
                 "test_mcp_tasks.py", "test_auth_standin.py", "test_migrate.py", "test_hostile_push.py"]


def pytest_collection_modifyitems(items):
    rank = {name: place for place, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(LONGEST_FIRST)))


def pytest_configure(config):
    """A helper thread that dies fails its test: pytest only warns by default, and a helper
    that stopped early leaves a test checking less than it says."""
    config.addinivalue_line("filterwarnings", "error::pytest.PytestUnhandledThreadExceptionWarning")
