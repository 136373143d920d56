#!/usr/bin/env python3
"""README.md's contents list names every section (## heading) once, in the README's order,
and each of its links leads to a heading (GitHub's anchors: lower case, punctuation dropped,
spaces as hyphens). Also: every docs/*.md file the README links to exists.

Usage: test_contents.py SOURCE_DIR
"""
import os
import re
import sys


def anchor(heading):
    text = heading.strip().lower().replace("`", "")
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def main():
    source = sys.argv[1]
    readme = open(os.path.join(source, "README.md")).read()
    lines = readme.splitlines()
    in_code = False
    headings = []
    for line in lines:
        if line.startswith("```"):
            in_code = not in_code
        elif not in_code and line.startswith("## "):
            headings.append(line[3:])
    sections = [h for h in headings if h != "Contents"]
    if "Contents" not in headings:
        sys.exit("FAIL: README.md has no '## Contents' section")
    start = lines.index("## Contents")
    listed = []
    for line in lines[start + 1:]:
        if line.startswith("## "):
            break
        listed += re.findall(r"\[[^\]]+\]\(#([^)]+)\)", line)
    problems = []
    expected = [anchor(h) for h in sections]
    if listed != expected:
        missing = [a for a in expected if a not in listed]
        unknown = [a for a in listed if a not in expected]
        problems.append(f"contents list {listed} != the sections in order {expected}"
                        f" (missing {missing}, unknown {unknown})")
    for link in re.findall(r"\]\((docs/[^)#]+)", readme):
        if not os.path.exists(os.path.join(source, link)):
            problems.append(f"README links to {link}, which does not exist")
    if problems:
        sys.exit("FAIL: " + "\nFAIL: ".join(problems))
    print(f"README contents: {len(sections)} sections listed in order; docs links resolve")


if __name__ == "__main__":
    main()
