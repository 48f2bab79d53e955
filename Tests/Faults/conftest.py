"""Fault tests run in their own pytest session (make test-faults): they start their own
PostgreSQL cluster, relays and HAProxy."""
import sys
import pathlib

sys.path.insert(0, str(pathlib.Path(__file__).parent))


def pytest_configure(config):
    """A helper thread that dies fails its test (pytest only warns by default)."""
    config.addinivalue_line("filterwarnings", "error::pytest.PytestUnhandledThreadExceptionWarning")
