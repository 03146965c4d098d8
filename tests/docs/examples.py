#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""examples.py -- the C examples of the docs, taken out of the Markdown to be built and run.

Every ```c block of README.md, docs/guide.md and docs/man/*.md outside a SYNOPSIS section
carries a marker on the line before its fence, which names it and says what it is:

    <!-- example NAME: program -->    a whole program (main() included): built as it is,
                                       run under loco-run and mpirun (docs/examples/meson.build)
    <!-- example NAME: unit -->       functions (and their includes): built as they are, in a
                                       file of tests/docs/examples/ that calls them in a job
    <!-- example NAME: fragment -->   statements: built as they are, inside a function of a
                                       file of tests/docs/examples/ that declares what they use,
                                       and run there

(pandoc drops the comments from the man pages; GitHub does not show them.) The build writes
NAME.c (program) or NAME.inc (unit, fragment), each starting with a #line directive, so that
a compiler's message points into the Markdown page (a fragment's ends with a null statement).

usage: examples.py extract SOURCE_ROOT OUTDIR NAME...     write the named examples
       examples.py check SOURCE_ROOT --names NAME... --files FILE...
           fail when a block is not marked, a name is used twice or is not one of NAME (the
           examples meson.build builds), a NAME is in no page, or a docs/examples/*.c is not
           one of FILE (the programs the run tests run)
       examples.py list SOURCE_ROOT
       exit 0 ok, 1 problems, 2 usage
"""
import glob
import os
import re
import sys

MARK_RE = re.compile(r"^<!--\s*example\s+([A-Za-z0-9_-]+)\s*:\s*(program|unit|fragment)\s*-->\s*$")
KINDS = ("program", "unit", "fragment")


def sources(root):
    """The Markdown files whose C blocks are examples."""
    return [os.path.join(root, "README.md"), os.path.join(root, "docs", "guide.md")] + sorted(
        glob.glob(os.path.join(root, "docs", "man", "*.md"))
    )


def blocks(root):
    """Every ```c block: dicts of path, line (of its first code line), section, name, kind, text."""
    out = []
    for path in sources(root):
        lines = open(path, encoding="utf-8").read().split("\n")
        section, i = "", 0
        while i < len(lines):
            line = lines[i]
            if re.match(r"^#{1,2}\s+\S", line):
                section = line.lstrip("#").strip()
            if re.match(r"^\s*```c\s*$", line):
                indent = line[: len(line) - len(line.lstrip())]
                j = i + 1
                while j < len(lines) and lines[j].strip() != "```":
                    j += 1
                text = "\n".join(l[len(indent) :] if l.startswith(indent) else l for l in lines[i + 1 : j])
                k = i - 1
                while k >= 0 and lines[k].strip() == "":
                    k -= 1
                m = MARK_RE.match(lines[k].strip()) if k >= 0 else None
                out.append(
                    {
                        "path": path,
                        "rel": os.path.relpath(path, root),
                        "line": i + 2,
                        "section": section,
                        "name": m.group(1) if m else None,
                        "kind": m.group(2) if m else None,
                        "text": text + "\n",
                    }
                )
                i = j
            i += 1
    return out


def examples(root):
    """The marked blocks, by name (the first of a name when it is used twice)."""
    ex = {}
    for b in blocks(root):
        if b["name"] and b["name"] not in ex:
            ex[b["name"]] = b
    return ex


def extract(root, outdir, names):
    ex = examples(root)
    missing = [n for n in names if n not in ex]
    if missing:
        print("examples.py: no example named " + ", ".join(missing) + " in the docs", file=sys.stderr)
        return 1
    os.makedirs(outdir, exist_ok=True)
    for n in names:
        b = ex[n]
        suffix = ".c" if b["kind"] == "program" else ".inc"
        text = f'#line {b["line"]} "{b["rel"]}"\n' + b["text"]
        if b["kind"] == "fragment":
            # a null statement in the fragment's first column: the statement of the file
            # that includes it is not taken for the body of the fragment's last if or for
            # (clang's -Wmisleading-indentation)
            text += ";\n"
        dest = os.path.join(outdir, n + suffix)
        old = open(dest, encoding="utf-8").read() if os.path.exists(dest) else None
        if old != text:  # unchanged: keep its time, so that nothing is rebuilt
            with open(dest, "w", encoding="utf-8") as f:
                f.write(text)
    return 0


def check(root, names, files):
    problems, seen = [], {}
    for b in blocks(root):
        where = f'{b["rel"]}:{b["line"] - 1}'
        if b["section"] == "SYNOPSIS":
            continue
        if not b["name"]:
            problems.append(
                f"{where}: a ```c block without a marker (<!-- example NAME: program|unit|fragment -->"
                " on the line before it)"
            )
            continue
        if b["name"] in seen:
            problems.append(f'{where}: example {b["name"]} is also at {seen[b["name"]]}')
            continue
        seen[b["name"]] = where
        if b["name"] not in names:
            problems.append(
                f'{where}: example {b["name"]} ({b["kind"]}) is not built: add it to tests/docs/meson.build'
            )
    for n in names:
        if n not in seen:
            problems.append(f"tests/docs/meson.build builds example {n}, which no page has")
    for f in sorted(glob.glob(os.path.join(root, "docs", "examples", "*.c"))):
        if os.path.basename(f) not in files:
            problems.append(f"docs/examples/{os.path.basename(f)} is not run by docs-examples-*")
    for p in problems:
        print("examples.py: " + p)
    kinds = {k: sum(1 for b in blocks(root) if b["kind"] == k) for k in KINDS}
    print(
        f"examples.py: {len(seen)} marked examples ({kinds['program']} programs, {kinds['unit']} units, "
        f"{kinds['fragment']} fragments), {len(files)} programs in docs/examples: {len(problems)} problem(s)"
    )
    return 1 if problems else 0


def main(argv):
    if len(argv) >= 3 and argv[1] == "extract":
        return extract(argv[2], argv[3], argv[4:]) if len(argv) >= 4 else 2
    if len(argv) >= 3 and argv[1] == "check":
        args, names, files, cur = argv[3:], [], [], None
        for a in args:
            if a in ("--names", "--files"):
                cur = names if a == "--names" else files
            elif cur is not None:
                cur.append(a)
            else:
                return 2
        return check(argv[2], names, files)
    if len(argv) == 3 and argv[1] == "list":
        for b in blocks(argv[2]):
            print(f'{b["rel"]}:{b["line"] - 1}: {b["section"]}: {b["name"] or "-"} {b["kind"] or ""}')
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
