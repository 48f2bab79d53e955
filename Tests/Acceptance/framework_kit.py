"""What the framework tests share (test_frameworks.py, test_frameworks_in_the_field.py): each
framework's venv, made once with its pinned versions (Tests/Acceptance/frameworks/<name>.txt)
under a lock, so that test files on different workers never build the same venv at once.

Run as a script (`python3 Tests/Acceptance/framework_kit.py`), it makes every venv, three at
a time: `make test` does so beside its build, so that no test waits for pip."""
import concurrent.futures
import fcntl
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]

FRAMEWORKS = ROOT / "Tests" / "Acceptance" / "frameworks"
VENVS = ROOT / ".venv-frameworks"
LAT, LON = 52.52, 13.405
# Each framework's client script (frameworks/<script>.py; its pins are <name>.txt).
SCRIPTS = ["openai_agents_client", "fastmcp_client", "mcp_sdk_1_client", "pydantic_ai_client",
           "langchain_mcp_adapters_client", "mcp_use_client", "strands_agents_client", "smolagents_client",
           "google_adk_client"]


def framework_python(script):
    """The venv of `script`'s framework (made, or remade when its pins changed): its python."""
    name = script.split("_client")[0].replace("_", "-")
    pins = (FRAMEWORKS / f"{name}.txt").read_text()
    venv = VENVS / name
    VENVS.mkdir(exist_ok=True)
    with open(VENVS / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        marker = venv / ".installed"
        if not marker.exists() or marker.read_text() != pins:
            subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True, timeout=120)
            subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                            "-r", str(FRAMEWORKS / f"{name}.txt")], check=True, timeout=900)
            marker.write_text(pins)
    return venv / "bin" / "python"


if __name__ == "__main__":
    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        for python in pool.map(framework_python, SCRIPTS):
            print(f"framework venv: {python.parent.parent.name}")
