"""`make audit` against the test database (every migration applied) must print exactly the
report docs/rls.md holds between its markers: the document cannot drift from the catalog."""
import difflib
import os
import subprocess

from conftest import OWNER_URL, ROOT


def test_docs_rls_md_is_the_catalog():
    report = subprocess.run([str(ROOT / "scripts" / "audit.sh")], env={**os.environ, "DATABASE_URL": OWNER_URL},
                            capture_output=True, text=True, timeout=60, check=True).stdout
    document = (ROOT / "docs" / "rls.md").read_text()
    block = document.split("<!-- make audit: begin -->\n")[1].split("<!-- make audit: end -->")[0]
    diff = "\n".join(difflib.unified_diff(block.strip().splitlines(), report.strip().splitlines(),
                                          "docs/rls.md", "make audit", lineterm=""))
    assert block.strip() == report.strip(), "docs/rls.md drifted from the catalog; rerun make audit:\n" + diff[:4000]
    assert "- row level security: OFF" not in report, "every table has row-level security"
    assert "| invoker |" in report and "| definer |" in report


def test_every_definer_function_pins_its_search_path():
    report = subprocess.run([str(ROOT / "scripts" / "audit.sh")], env={**os.environ, "DATABASE_URL": OWNER_URL},
                            capture_output=True, text=True, timeout=60, check=True).stdout
    rows = [line for line in report.splitlines() if line.startswith("| ") and "| definer |" in line]
    assert rows and all('search_path=""' in line for line in rows), [r for r in rows if 'search_path=""' not in r]
    relay = [line for line in report.splitlines() if line.startswith("| relay.") and "| definer |" in line]
    assert relay and all(line.split(" | ")[4] == "postgres, whereabot_relay" for line in relay), \
        "relay.* functions are executable by whereabot_relay (and their owner) only"
