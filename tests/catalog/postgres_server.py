"""A throwaway PostgreSQL server for the SQL catalog tests: initdb + pg_ctl in a temporary directory.

Listens only on a Unix socket in that directory. Runs the server as the ``postgres`` OS user when the
tests run as root (PostgreSQL refuses root). ``start()`` returns None, with the reason, where no server
binaries or no driver are installed.
"""

from __future__ import annotations

import glob
import importlib.util
import os
import pwd
import shutil
import subprocess
import tempfile
import uuid
from dataclasses import dataclass


@dataclass(frozen=True)
class PostgresServer:
    root: str
    socket_dir: str
    port: int
    run_as: list[str]

    def url(self, database: str = "postgres") -> str:
        return f"postgresql+psycopg://postgres@/{database}?host={self.socket_dir}&port={self.port}"

    def new_database(self) -> str:
        """A fresh, empty database; its SQLAlchemy URL."""
        import sqlalchemy as sa

        name = f"t_{uuid.uuid4().hex[:12]}"
        engine = sa.create_engine(self.url(), isolation_level="AUTOCOMMIT")
        with engine.connect() as conn:
            conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
        engine.dispose()
        return self.url(name)

    def stop(self) -> None:
        data = os.path.join(self.root, "data")
        subprocess.run(
            [*self.run_as, _bin("pg_ctl"), "-D", data, "-m", "immediate", "stop"], capture_output=True
        )
        shutil.rmtree(self.root, ignore_errors=True)


def _bin(name: str) -> str:
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return candidates[-1] if candidates else name


def start() -> PostgresServer | str:
    """A running server, or the reason there is none."""
    if importlib.util.find_spec("psycopg") is None:
        return "the psycopg driver is not installed (pip install 'psycopg[binary]')"
    if shutil.which(_bin("initdb")) is None and not os.path.exists(_bin("initdb")):
        return "PostgreSQL server binaries (initdb, pg_ctl) are not installed"
    run_as: list[str] = []
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root and there is no 'postgres' user to run the server as"
        run_as = ["runuser", "-u", "postgres", "--"]
    root = tempfile.mkdtemp(prefix="gpu-engine-pg-")
    os.chmod(root, 0o777)
    data = os.path.join(root, "data")
    port = 20000 + os.getpid() % 20000
    init = subprocess.run(
        [*run_as, _bin("initdb"), "-D", data, "-A", "trust", "-U", "postgres", "--no-sync"],
        capture_output=True,
        text=True,
    )
    if init.returncode != 0:
        shutil.rmtree(root, ignore_errors=True)
        return f"initdb failed: {init.stderr.strip()[-300:]}"
    options = f"-k {root} -p {port} -c listen_addresses='' -c fsync=off"
    started = subprocess.run(
        [*run_as, _bin("pg_ctl"), "-D", data, "-o", options, "-l", os.path.join(root, "log"), "-w", "start"],
        capture_output=True,
        text=True,
    )
    if started.returncode != 0:
        shutil.rmtree(root, ignore_errors=True)
        return f"pg_ctl start failed: {started.stderr.strip()[-300:]}"
    return PostgresServer(root=root, socket_dir=root, port=port, run_as=run_as)
