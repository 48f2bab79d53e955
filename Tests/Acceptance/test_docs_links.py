"""Every relative link in README.md and docs/*.md resolves: the file (or folder) exists, and
a `#anchor` names a heading of the target as GitHub renders its slug (or an explicit
`<a id>` / `<a name>`). Pure Python, no relay or database: `python3
Tests/Acceptance/test_docs_links.py` lists the broken links without pytest.

Links inside fenced code blocks and inline code are not links and are skipped, as are
absolute URLs (`https:`, `mailto:` …). Anchors are checked in Markdown targets only.
"""
import pathlib
import re
import sys
import unicodedata
import urllib.parse

try:
    import pytest
except ImportError:  # run as a script with a Python that has no pytest
    pytest = None

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)[ \t]*#*[ \t]*$")
INLINE_CODE = re.compile(r"(`+)(.+?)\1")
# [text](target "title") and ![alt](target); the text may hold one level of brackets.
INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*(<[^>]*>|[^\s()]*(?:\([^\s()]*\)[^\s()]*)*)(?:\s+[\"'(][^)]*)?\s*\)")
REFERENCE_DEFINITION = re.compile(r"^ {0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)")
HTML_ANCHOR = re.compile(r"<a\s+[^>]*?(?:id|name)\s*=\s*[\"']([^\"']+)[\"']", re.IGNORECASE)
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def prose_lines(text):
    """The lines of a Markdown text outside fenced code blocks, with their line numbers."""
    fence = None
    for number, line in enumerate(text.splitlines(), 1):
        opening = FENCE.match(line)
        if fence is None and opening:
            fence = opening.group(1)[0] * len(opening.group(1))
            continue
        if fence is not None:
            if line.strip().startswith(fence) and set(line.strip()) <= {fence[0]}:
                fence = None
            continue
        yield number, line


def slug(heading):
    """The anchor GitHub gives a heading: its rendered text in lower case, every character
    that is not a letter, mark, digit, connector (`_`), space or hyphen removed, and each
    space a hyphen (github-slugger)."""
    text = INLINE_CODE.sub(lambda m: m.group(2), heading)
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)        # links and images: their text
    text = re.sub(r"<[^>]+>", "", text)                             # inline HTML
    text = re.sub(r"(\*+|(?<!\w)_+|_+(?!\w))", "", text)            # emphasis markers
    kept = []
    for char in text.lower():
        category = unicodedata.category(char)
        if char in " -" or category[0] in "LMN" or category == "Pc":
            kept.append(char)
    return "".join(kept).replace(" ", "-")


def anchors(path):
    """Every anchor a Markdown file offers: heading slugs (repeats numbered -1, -2 … as
    GitHub does) and explicit HTML ids."""
    found, seen = set(), {}
    for _, line in prose_lines(path.read_text(encoding="utf-8")):
        heading = HEADING.match(line)
        if heading:
            base = slug(heading.group(2))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
        found.update(HTML_ANCHOR.findall(line))
    return found


def links(path):
    """(line number, target) for every link of a Markdown file, code excluded."""
    for number, line in prose_lines(path.read_text(encoding="utf-8")):
        definition = REFERENCE_DEFINITION.match(line)
        if definition:
            yield number, definition.group(1).strip("<>")
            continue
        line = INLINE_CODE.sub("", line)
        for match in INLINE_LINK.finditer(line):
            yield number, match.group(1).strip("<>")


def shown(path):
    """`path` relative to the repository when it lies inside it."""
    try:
        return str(path.relative_to(ROOT))
    except ValueError:
        return str(path)


def broken_links(documents=DOCUMENTS):
    """Every relative link of `documents` that does not resolve, as readable lines."""
    problems, cache = [], {}
    for document in documents:
        for number, target in links(document):
            if not target or SCHEME.match(target) or target.startswith("//"):
                continue
            where = f"{shown(document)}:{number}: {target}"
            path_part, _, fragment = target.partition("#")
            path_part = urllib.parse.unquote(path_part.split("?")[0])
            resolved = (document.parent / path_part).resolve() if path_part else document
            if not resolved.exists():
                problems.append(f"{where}: no such file")
                continue
            if not fragment or resolved.suffix.lower() != ".md":
                continue
            if resolved not in cache:
                cache[resolved] = anchors(resolved)
            if urllib.parse.unquote(fragment) not in cache[resolved]:
                problems.append(f"{where}: no heading with this anchor in {shown(resolved)}")
    return problems


if pytest:
    @pytest.fixture(scope="module", autouse=True)
    def fresh_registration_budget():
        """conftest.py's per-module database fixture, replaced: this module needs no database."""
        yield


def test_the_documents_exist():
    """README.md and the pages under docs/ are where the links are looked for."""
    assert (ROOT / "README.md").exists() and len(DOCUMENTS) > 5


def test_every_relative_link_and_anchor_resolves():
    """Each relative link of README.md and docs/*.md names a file that exists, and each
    `#anchor` a heading of its target as GitHub slugs it."""
    problems = broken_links()
    assert not problems, "broken links:\n" + "\n".join(problems)


def test_slugs_follow_github():
    """The slug rule the check relies on, on headings of the kinds these pages use."""
    assert slug("Timeouts: requests that outlive the call") == "timeouts-requests-that-outlive-the-call"
    assert slug("Behind a load balancer: the client's address") == "behind-a-load-balancer-the-clients-address"
    assert slug("2. Instances") == "2-instances"
    assert slug("Who sends: the claim") == "who-sends-the-claim"
    assert slug("The current definition: supabase/schemas") == "the-current-definition-supabaseschemas"
    assert slug("The last full `make bench` (2026-11-30)") == "the-last-full-make-bench-2026-11-30"
    assert slug("private.agent_key_signing") == "privateagent_key_signing"
    assert slug("Why agents do not sign in with Supabase Auth's OAuth server") == \
        "why-agents-do-not-sign-in-with-supabase-auths-oauth-server"


def test_a_broken_link_is_found(tmp_path):
    """The check fails on a missing file and on a missing anchor (a page written for it)."""
    page = ROOT / "docs" / "architecture.md"
    broken = tmp_path / "page.md"
    broken.write_text(f"# A page\n\n[fine]({page}#the-modules) [gone]({page}#no-such-heading)\n"
                      f"[missing](nowhere.md) [self](#a-page) ```[code](nowhere.md)```\n", encoding="utf-8")
    problems = broken_links([broken])
    assert len(problems) == 2, problems
    assert "no-such-heading" in problems[0] and "nowhere.md: no such file" in problems[1]


if __name__ == "__main__":
    found = broken_links()
    print("\n".join(found) if found else f"every relative link of {len(DOCUMENTS)} documents resolves")
    sys.exit(1 if found else 0)
