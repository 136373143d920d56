#!/usr/bin/env python3
"""README.md stays short and true:
- its contents list names every section (## heading) once, in the README's order, each link
  leading to a heading (GitHub's anchors: lower case, punctuation dropped, spaces as hyphens);
- it is at most MAX_LINES lines and holds no placeholder (TODO, FIXME, TBD);
- its Layout block names every top-level folder of the tree (`git ls-files`, else the folders
  on disk);
- every relative link in README.md and docs/*.md, images included, leads to a file that
  exists, and a link's #anchor to a heading of the page it names;
- the tracked tree (`git ls-files`) stays under MAX_TREE_BYTES, light enough to clone and to
  carry to a GPU machine.

Usage: test_contents.py SOURCE_DIR
"""
import os
import re
import subprocess
import sys

MAX_LINES = 250
MAX_TREE_BYTES = 20_000_000
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def anchor(heading):
    text = heading.strip().lower().replace("`", "")
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def prose(text):
    """The lines of a markdown text outside fenced code blocks."""
    lines, in_code = [], False
    for line in text.splitlines():
        if line.startswith("```"):
            in_code = not in_code
        elif not in_code:
            lines.append(line)
    return lines


def headings(path):
    return [re.sub(r"^#+ ", "", line) for line in prose(open(path).read())
            if re.match(r"#+ ", line)]


def check_contents(readme):
    lines = readme.splitlines()
    sections = [line[3:] for line in prose(readme) if line.startswith("## ")]
    if "Contents" not in sections:
        return ["README.md has no '## Contents' section"]
    start = lines.index("## Contents")
    listed = []
    for line in lines[start + 1:]:
        if line.startswith("## "):
            break
        listed += re.findall(r"\[[^\]]+\]\(#([^)]+)\)", line)
    expected = [anchor(h) for h in sections if h != "Contents"]
    if listed == expected:
        return []
    missing = [a for a in expected if a not in listed]
    unknown = [a for a in listed if a not in expected]
    return [f"contents list {listed} != the sections in order {expected}"
            f" (missing {missing}, unknown {unknown})"]


def top_level_folders(source):
    try:
        files = subprocess.run(["git", "-C", source, "ls-files"], capture_output=True,
                               text=True, check=True).stdout.split()
        if files:
            return sorted({f.split("/")[0] for f in files if "/" in f})
    except (OSError, subprocess.CalledProcessError):
        pass
    return sorted(d for d in os.listdir(source) if os.path.isdir(os.path.join(source, d))
                  and d != ".git" and not d.startswith("build"))


def check_tree_size(source):
    try:
        files = subprocess.run(["git", "-C", source, "ls-files", "-z"], capture_output=True,
                               text=True, check=True).stdout.split("\0")
    except (OSError, subprocess.CalledProcessError):
        return []  # not a git checkout: nothing tracked to weigh
    sizes = sorted(((os.path.getsize(os.path.join(source, f)), f) for f in files
                    if f and os.path.isfile(os.path.join(source, f))), reverse=True)
    total = sum(size for size, _ in sizes)
    if total <= MAX_TREE_BYTES:
        return []
    largest = ", ".join(f"{f} ({size / 1e6:.1f} MB)" for size, f in sizes[:5])
    return [f"the tracked tree is {total / 1e6:.1f} MB, more than {MAX_TREE_BYTES / 1e6:.0f} MB; "
            f"the largest files: {largest} (a result folder may keep its records as "
            "results.jsonl.gz, gzip -9n)"]


def check_layout(source, readme):
    after = readme.split("\n## Layout\n", 1)
    if len(after) < 2 or "```" not in after[1]:
        return ["README.md has no '## Layout' section with a code block"]
    block = after[1].split("```", 2)[1]
    named = {m.group(1) for m in re.finditer(r"^(\S+)/\s", block, re.MULTILINE)}
    missing = [d for d in top_level_folders(source) if d not in named]
    return [f"README.md's Layout does not list the top-level folder {d}/" for d in missing]


def check_links(source, page):
    problems = []
    text = open(page).read()
    for target in LINK.findall("\n".join(prose(text))):
        if re.match(r"[a-z]+:", target):  # http:, https:, mailto:
            continue
        path, _, fragment = target.partition("#")
        resolved = os.path.normpath(os.path.join(os.path.dirname(page), path)) if path else page
        name = os.path.relpath(page, source)
        if not os.path.exists(resolved):
            problems.append(f"{name} links to {target}: {os.path.relpath(resolved, source)} "
                            "does not exist")
        elif fragment and resolved.endswith(".md") and \
                fragment not in [anchor(h) for h in headings(resolved)]:
            problems.append(f"{name} links to {target}: no heading #{fragment} there")
    return problems


def main():
    source = os.path.abspath(sys.argv[1])
    readme_path = os.path.join(source, "README.md")
    readme = open(readme_path).read()
    problems = check_contents(readme)
    count = len(readme.splitlines())
    if count > MAX_LINES:
        problems.append(f"README.md has {count} lines, more than {MAX_LINES}: move the detail "
                        "into docs/ and link to it")
    for word in ("TODO", "FIXME", "TBD"):
        if word in readme:
            problems.append(f"README.md holds a placeholder: {word}")
    problems += check_layout(source, readme)
    problems += check_tree_size(source)
    docs = os.path.join(source, "docs")
    pages = [readme_path] + sorted(os.path.join(docs, f) for f in os.listdir(docs)
                                   if f.endswith(".md"))
    for page in pages:
        problems += check_links(source, page)
    if problems:
        sys.exit("FAIL: " + "\nFAIL: ".join(problems))
    print(f"README: {count} lines, contents in order, Layout lists every top-level folder; "
          f"the links of {len(pages)} pages resolve; the tracked tree is under "
          f"{MAX_TREE_BYTES / 1e6:.0f} MB")


if __name__ == "__main__":
    main()
