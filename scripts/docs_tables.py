#!/usr/bin/env python3
"""The predicted results quoted in README.md and docs/*.md, regenerated from
the binary, so that no figure in them can drift from what tasp-sim prints.

usage: scripts/docs_tables.py --check  [--sim build/tasp-sim] [--replay PATH] [FILE.md...]
       scripts/docs_tables.py --update [--sim build/tasp-sim] [--replay PATH] [FILE.md...]
       CSV | scripts/docs_tables.py --columns NAME[:FMT],...   (a filter, below)
       TEXT | scripts/docs_tables.py --lines REGEX               (a filter, below)

Every block of predicted results in the docs sits between two markers, the
first of which names the exact command that printed it:

    <!-- generated: build/tasp-sim scenarios/h100x8.json --sp 8 --seq 128K -->
    ...what that command prints...
    <!-- end -->

--update replaces every block whole by what its command prints now (so the
text inside a block is never edited by hand); running it twice changes
nothing.  --check changes nothing, and exits 1 naming the first block whose
text differs from its command's output (with a diff), 2 when a marker or a
command is malformed or a command fails.  Without FILEs: README.md and
docs/*.md.  Each distinct command runs once per invocation.

A command is one of
  build/tasp-sim ARGS            --sim replaces the binary's path
  build/tasp-replay ARGS         --replay (default: the one beside --sim);
                                 in both, an argument with * is expanded as
                                 the shell does
  python3 scripts/NAME.py ARGS   runs under this interpreter, given --sim
optionally followed by one filter of this script (runnable as written):
  | scripts/docs_tables.py --columns seq_len:seq,scheduler,step_ms:.1f,...
      the CSV on stdin as a markdown table of the named columns, in the
      order given, headed by their CSV names.  FMT is a Python format spec
      (.2f, .1%), with "x" appended for a speedup (.2fx), or "seq" for a
      length as K/M; a value that is not a number is printed as it is.
  | scripts/docs_tables.py --lines REGEX
      only the lines that match REGEX (re.search).
The block shows the command as well (the marker renders as nothing): a
markdown table (--columns, or a script's output unfiltered) follows the
command in `backquotes`; anything else is put in a ``` fence after a line
"$ COMMAND".

Tables of wall-clock speed (scripts/bench.sh) are benchmark output, marked
<!-- benchmark output: ... -->, and neither regenerated nor compared here.
"""
import argparse
import csv
import difflib
import glob
import io
import os
import re
import shlex
import subprocess
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
BEGIN = re.compile(r"^<!-- generated: (.+?) -->$")
END = "<!-- end -->"
SIM = "build/tasp-sim"
REPLAY = "build/tasp-replay"
SELF = "scripts/docs_tables.py"


class Bad(Exception):
    """A malformed marker or a failing command: exit status 2."""


# ---------------------------------------------------------------- filters

def fmt_value(v, spec):
    if not spec:
        return v
    try:
        x = float(v)
    except ValueError:
        return v  # n/a rows and text columns come through as printed
    if spec == "seq":
        n = int(x)
        if n and n % (1 << 20) == 0:
            return f"{n >> 20}M"
        if n and n % (1 << 10) == 0:
            return f"{n >> 10}K"
        return str(n)
    suffix = ""
    if spec.endswith("x"):
        spec, suffix = spec[:-1], "x"
    return format(x, spec) + suffix


def columns_filter(text, spec):
    """CSV text -> a markdown table of the columns named in spec."""
    cols = []
    for item in spec.split(","):
        name, _, fmt = item.partition(":")
        cols.append((name.strip(), fmt.strip()))
    rows = list(csv.DictReader(io.StringIO(text)))
    if not rows:
        raise Bad("--columns: the CSV has no rows")
    missing = [n for n, _ in cols if n not in rows[0]]
    if missing:
        raise Bad(f"--columns: no column {', '.join(missing)} in the CSV "
                  f"(it has {', '.join(rows[0])})")
    # numbers (a format given) right-aligned, names and lengths left
    out = ["| " + " | ".join(n for n, _ in cols) + " |",
           "|" + "|".join("---:" if f and f != "seq" else "---" for _, f in cols) + "|"]
    for r in rows:
        out.append("| " + " | ".join(fmt_value(r[n], f) for n, f in cols) + " |")
    return "\n".join(out) + "\n"


def lines_filter(text, regex):
    pat = re.compile(regex)
    return "".join(line for line in text.splitlines(True) if pat.search(line))


FILTERS = {"--columns": columns_filter, "--lines": lines_filter}


# ---------------------------------------------------------------- commands

def parse_command(cmd):
    """'STAGE [| FILTER]' -> (argv of the stage, kind, filter or None)."""
    parts = cmd.split(" | ")
    if len(parts) > 2:
        raise Bad("at most one filter after the command")
    try:
        argv = shlex.split(parts[0])
    except ValueError as e:
        raise Bad(f"cannot split the command: {e}") from None
    if argv and argv[0] in (SIM, REPLAY):
        kind = "bin"
    elif len(argv) >= 2 and argv[0] == "python3" and re.fullmatch(r"scripts/\w+\.py", argv[1]):
        kind = "script"
    else:
        raise Bad(f"a command starts with {SIM}, {REPLAY} or python3 scripts/NAME.py, "
                  f"got {parts[0]!r}")
    filt = None
    if len(parts) == 2:
        f = shlex.split(parts[1])
        if len(f) != 3 or f[0] != SELF or f[1] not in FILTERS:
            raise Bad(f"a filter is {SELF} --columns SPEC or --lines REGEX, got {parts[1]!r}")
        filt = (f[1], f[2])
    return argv, kind, filt


def run_stage(argv, kind, bins, cache):
    key = tuple(argv)
    if key in cache:
        return cache[key]
    if kind == "bin":
        real = [bins[argv[0]]]
        for arg in argv[1:]:  # the shell's expansion, sorted as the shell does
            found = sorted(glob.glob(os.path.join(ROOT, arg))) if "*" in arg else []
            real += [os.path.relpath(f, ROOT) for f in found] or [arg]
    else:
        real = [sys.executable] + argv[1:] + ["--sim", bins[SIM]]
    p = subprocess.run(real, cwd=ROOT, capture_output=True, text=True)
    if p.returncode != 0:
        raise Bad(f"exit status {p.returncode}:\n{p.stderr.strip()}")
    cache[key] = p.stdout
    return p.stdout


def render(cmd, bins, cache):
    """What the block of cmd holds now: its lines between the markers."""
    argv, kind, filt = parse_command(cmd)
    out = run_stage(argv, kind, bins, cache)
    if filt:
        out = FILTERS[filt[0]](out, filt[1])
    # the command is shown, not only in the marker (which renders as nothing)
    markdown = filt[0] == "--columns" if filt else kind == "script"
    if markdown:
        out = f"`{cmd}`\n\n{out.strip(chr(10))}\n"
    else:
        out = f"```\n$ {cmd}\n{out.strip(chr(10))}\n```\n"
    out = out.strip("\n")
    if END in out or BEGIN.search(out):
        raise Bad("the output holds a marker")
    return out.split("\n") if out else []


# ---------------------------------------------------------------- documents

def blocks(path, lines):
    """[(begin index, end index, command)] of the generated blocks."""
    found, open_at = [], None
    for i, line in enumerate(lines):
        m = BEGIN.match(line.rstrip("\n"))
        if m:
            if open_at is not None:
                raise Bad(f"{path}:{i + 1}: a block begins inside the block of line "
                          f"{open_at[0] + 1}")
            open_at = (i, m.group(1))
        elif line.rstrip("\n") == END and open_at is not None:
            found.append((open_at[0], i, open_at[1]))
            open_at = None
    if open_at is not None:
        raise Bad(f"{path}:{open_at[0] + 1}: block has no {END}")
    return found


def process(paths, bins, update, skip=None):
    cache, stale, skipped = {}, [], 0
    for path in paths:
        with open(path) as f:
            lines = f.read().split("\n")
        rel = os.path.relpath(path, ROOT)
        new, last = [], 0
        for b, e, cmd in blocks(rel, lines):
            if skip and re.search(skip, cmd):
                skipped += 1
                new += lines[last:e + 1]
                last = e + 1
                continue
            try:
                body = render(cmd, bins, cache)
            except Bad as err:
                raise Bad(f"{rel}:{b + 1}: {cmd}: {err}") from None
            if lines[b + 1:e] != body:
                stale.append((rel, b + 1, cmd, lines[b + 1:e], body))
            new += lines[last:b + 1] + body + [lines[e]]
            last = e + 1
        new += lines[last:]
        if update and new != lines:
            tmp = path + ".tmp"
            with open(tmp, "w") as f:
                f.write("\n".join(new))
            os.replace(tmp, path)
    if skipped:
        print(f"docs_tables: {skipped} blocks skipped (--skip)", file=sys.stderr)
    return stale


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--check", action="store_true", help="exit 1 if a block differs")
    mode.add_argument("--update", action="store_true", help="rewrite the blocks")
    mode.add_argument("--columns", metavar="SPEC", help="filter: CSV on stdin to markdown")
    mode.add_argument("--lines", metavar="REGEX", help="filter: matching lines of stdin")
    ap.add_argument("--sim", default=SIM, help="the tasp-sim binary (default %(default)s)")
    ap.add_argument("--replay", help="the tasp-replay binary (default: beside --sim)")
    ap.add_argument("--skip", metavar="REGEX",
                    help="leave out the blocks whose command matches (a slow build)")
    ap.add_argument("files", nargs="*", help="markdown files (default README.md docs/*.md)")
    a = ap.parse_args()
    try:
        if a.columns or a.lines:
            flag = "--columns" if a.columns else "--lines"
            sys.stdout.write(FILTERS[flag](sys.stdin.read(), a.columns or a.lines))
            return 0
        bins = {SIM: os.path.abspath(a.sim),
                REPLAY: os.path.abspath(a.replay or os.path.join(os.path.dirname(a.sim),
                                                                 "tasp-replay"))}
        for opt, path in zip(("--sim", "--replay"), bins.values()):
            if not os.path.isfile(path) or not os.access(path, os.X_OK):
                raise Bad(f"{opt}: {path}: not an executable file")
        paths = a.files or [os.path.join(ROOT, "README.md")] + sorted(
            glob.glob(os.path.join(ROOT, "docs", "*.md")))
        stale = process(paths, bins, a.update, a.skip)
    except Bad as err:
        print(f"docs_tables: {err}", file=sys.stderr)
        return 2
    except OSError as err:
        print(f"docs_tables: {err}", file=sys.stderr)
        return 2
    if a.update:
        for rel, line, cmd, _, _ in stale:
            print(f"docs_tables: updated {rel}:{line}: {cmd}")
        return 0
    if not stale:
        return 0
    rel, line, cmd, old, new = stale[0]
    print(f"docs_tables: {rel}:{line}: the block differs from what its command prints now:\n"
          f"  {cmd}", file=sys.stderr)
    sys.stderr.writelines(difflib.unified_diff(
        [s + "\n" for s in old], [s + "\n" for s in new], f"{rel} (committed)",
        f"{rel} (printed now)"))
    for rel, line, cmd, _, _ in stale[1:]:
        print(f"docs_tables: also differs: {rel}:{line}: {cmd}", file=sys.stderr)
    print("docs_tables: run scripts/docs_tables.py --update and review the diff",
          file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
