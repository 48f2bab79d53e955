"""Hostile input, round 3: every per-user cap holds under concurrency.

Forty connections of one account, released together by a barrier, each insert one row in
its own transaction, as forty browser tabs or API calls would. Before the fix each
trigger counted the same committed rows and 40 agent keys (cap 25) or 56-60 devices (cap
50) got in; now one account's inserts wait for each other and the cap holds exactly.
"""
import json
import threading
import time
import uuid

import psycopg

from conftest import ADMIN_URL

WORKERS = 40


def race(statement, args_for, who=None):
    """Runs `statement` once per worker on its own connection, all released at once; each
    transaction stays open a tenth of a second after its insert, so that the triggers'
    counts run beside each other's uncommitted rows. Returns how many succeeded."""
    barrier = threading.Barrier(WORKERS)
    ok = []
    errors = []

    def work(index):
        with psycopg.connect(ADMIN_URL) as conn:
            try:
                if who is not None:
                    claims = json.dumps({"sub": str(who[0]), "role": "authenticated", "session_id": str(who[1]),
                                         "email": who[2]})
                    conn.execute("set local role authenticated")
                    conn.execute("select set_config('request.jwt.claims', %s, true)", (claims,))
                barrier.wait()
                conn.execute(statement, args_for(index))
                time.sleep(0.1)
                conn.commit()
                ok.append(index)
            except psycopg.Error as error:
                errors.append(error.sqlstate)
                conn.rollback()

    threads = [threading.Thread(target=work, args=(i,)) for i in range(WORKERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert set(errors) <= {"54000"}, errors  # refused only by the cap
    return len(ok)


def test_concurrent_agent_keys_stop_at_25(admin, make_user):
    who = make_user(with_session=True)
    made = race("select public.create_agent_key(%s)", lambda i: (f"key {i}",), who)
    live = admin.execute("select count(*) from public.agent_keys where user_id = %s and revoked_at is null",
                         (who[0],)).fetchone()[0]
    assert (made, live) == (25, 25)


def test_concurrent_devices_stop_at_50(admin, make_user):
    user = make_user()
    admin.execute("insert into public.devices (id, user_id, name, platform)"
                  " select gen_random_uuid(), %s, 'tab ' || i, 'web' from generate_series(1, 30) i", (user,))
    made = race("insert into public.devices (id, user_id, name, platform) values (%s, %s, %s, 'web')",
                lambda i: (uuid.uuid4(), user, f"racer {i}"))
    live = admin.execute("select count(*) from public.devices where user_id = %s and revoked_at is null",
                         (user,)).fetchone()[0]
    assert (made, live) == (20, 50)


def test_concurrent_always_allows_stop_at_200(admin, make_user):
    user = make_user()
    admin.execute("insert into public.always_allowed_agents (user_id, client_id, client_name)"
                  " select %s, 'client-' || i, 'Agent' from generate_series(1, 180) i", (user,))
    made = race("insert into public.always_allowed_agents (user_id, client_id, client_name) values (%s, %s, 'Agent')",
                lambda i: (user, f"racer-{i}"))
    live = admin.execute("select count(*) from public.always_allowed_agents where user_id = %s", (user,)).fetchone()[0]
    assert (made, live) == (20, 200)
