"""A primary and a streaming standby for the failover fault tests: the primary is built like
the fault kit's own cluster (scripts/db.sh: shim, migrations, relay login), the standby with
`pg_basebackup -R`, promoted with `pg_ctl promote`. Either may be stopped, hung (SIGSTOP on
every process of its cluster: a stalled disk or a partition that still ACKs) and resumed."""
import os
import pathlib
import shutil
import signal
import subprocess
import time

import psycopg

from faultkit import PG_BIN, ROOT, wait_until

BASE = pathlib.Path(os.environ.get("WHEREABOT_FAILOVER_PGDATA", "/var/tmp/whereabot-failover"))
DB = "whereabot_failover"
PASSWORD = "postgres"


def as_postgres(command):
    return ["runuser", "-u", "postgres", "--", *command] if os.geteuid() == 0 else command


def stopped(pid):
    """Whether `pid` is stopped by a signal (its state in /proc is T)."""
    return pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "T"


class Node:
    """One server of the pair: its data directory and port."""

    def __init__(self, name, port):
        self.name, self.port = name, port
        self.data = BASE / name

    @property
    def admin_url(self):
        return f"postgresql://supabase_admin:{PASSWORD}@127.0.0.1:{self.port}/{DB}"

    def pg_ctl(self, *args, check=True):
        return subprocess.run(as_postgres([str(PG_BIN / "pg_ctl"), "-D", str(self.data), *args]), check=check,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def start(self):
        self.pg_ctl("-l", str(BASE / f"{self.name}.log"), "-w", "-t", "60", "start")

    def postmaster(self):
        return int((self.data / "postmaster.pid").read_text().split()[0])

    def children(self, postmaster):
        """Every process the postmaster started (a stopped postmaster reaps none: an ended one
        stays listed as a zombie, which a signal still reaches)."""
        children = []
        for status in pathlib.Path("/proc").glob("[0-9]*/status"):
            try:
                fields = dict(line.split(":\t", 1) for line in status.read_text().splitlines() if ":\t" in line)
            except OSError:
                continue  # the process ended meanwhile
            if fields.get("PPid", "").strip() == str(postmaster):
                children.append(int(status.parent.name))
        return children

    def pids(self):
        """The postmaster and every process it started."""
        postmaster = self.postmaster()
        return [postmaster] + self.children(postmaster)

    def hang(self):
        """The postmaster first, so that it forks nothing after its children are listed; then
        each child. (Listing first let a backend forked in between run on, exit, and be reaped
        once the postmaster resumed, before its own SIGCONT: ESRCH, CI run of 948fdd3.)"""
        postmaster = self.postmaster()
        os.kill(postmaster, signal.SIGSTOP)
        wait_until(lambda: stopped(postmaster), 5, "the postmaster stopped")  # a signal is not delivered at once
        for pid in self.children(postmaster):
            os.kill(pid, signal.SIGSTOP)

    def resume(self):
        """The children first, while the stopped postmaster can reap none of them; then it."""
        postmaster = self.postmaster()
        for pid in self.children(postmaster):
            os.kill(pid, signal.SIGCONT)
        os.kill(postmaster, signal.SIGCONT)

    def kill(self):
        """Stops a (possibly hung) server for good: resumed, then `pg_ctl stop -m immediate`,
        which also gives back its shared memory; SIGKILL only if that fails."""
        try:
            pids = self.pids()
        except (FileNotFoundError, ValueError):
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
        if self.pg_ctl("-m", "immediate", "-w", "-t", "20", "stop", check=False).returncode == 0:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.5)

    def is_primary(self):
        try:
            with psycopg.connect(self.admin_url, autocommit=True, connect_timeout=2) as conn:
                return conn.execute("select not pg_is_in_recovery()").fetchone()[0]
        except psycopg.Error:
            return False

    def query(self, sql, params=()):
        with psycopg.connect(self.admin_url, autocommit=True, connect_timeout=3) as conn:
            cursor = conn.execute(sql, params)
            return cursor.fetchall() if cursor.description else []


class ReplicatedPostgres:
    """Two nodes; `primary` and `standby` swap roles at each `rebuild_standby` after a promote."""

    def __init__(self, ports=(25342, 25343)):
        self.nodes = [Node("a", ports[0]), Node("b", ports[1])]
        self.primary, self.standby = self.nodes

    @property
    def relay_url(self):
        hosts = ",".join(f"127.0.0.1:{node.port}" for node in self.nodes)
        return (f"postgresql://whereabot_relay:whereabot-relay-dev@{hosts}/{DB}"
                "?target_session_attrs=read-write&connect_timeout=2")

    def start(self):
        for node in self.nodes:
            node.kill()
        shutil.rmtree(BASE, ignore_errors=True)
        BASE.mkdir(parents=True)
        if os.geteuid() == 0:
            shutil.chown(BASE, "postgres")
        env = {**os.environ, "PGDATA_LOCAL": str(self.primary.data), "PGPORT_LOCAL": str(self.primary.port),
               "TEST_DB": DB}
        subprocess.run([ROOT / "scripts" / "db.sh", "start"], env=env, check=True, stdout=subprocess.DEVNULL)
        subprocess.run([ROOT / "scripts" / "db.sh", "reset-test"], env=env, check=True)
        self.rebuild_standby()

    def rebuild_standby(self):
        """A fresh standby of the current primary, streaming."""
        node = self.standby
        node.kill()
        shutil.rmtree(node.data, ignore_errors=True)
        subprocess.run(as_postgres([str(PG_BIN / "pg_basebackup"), "-h", "127.0.0.1", "-p", str(self.primary.port),
                                    "-U", "supabase_admin", "-D", str(node.data), "-R", "-X", "stream", "-c", "fast"]),
                       check=True, env={**os.environ, "PGPASSWORD": PASSWORD}, stdout=subprocess.DEVNULL)
        with open(node.data / "postgresql.auto.conf", "a") as conf:
            conf.write(f"port = {node.port}\n")
        node.start()
        wait_until(lambda: self._streaming(node), 30, f"standby {node.name} streaming")

    def _streaming(self, node):
        try:
            return bool(self.primary.query("select 1 from pg_stat_replication where state = 'streaming'"))
        except psycopg.Error:
            return False

    def promote_standby(self):
        """Promotes the standby; it is the primary from now on."""
        self.standby.pg_ctl("promote", "-w")
        self.primary, self.standby = self.standby, self.primary
        wait_until(self.primary.is_primary, 30, f"{self.primary.name} promoted")

    def stop(self):
        for node in self.nodes:
            node.kill()
