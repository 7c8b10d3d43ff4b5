#!/usr/bin/env python3
"""clang's view of weft's translation units, for scripts/check.sh (its step 2).

Usage: clang-check.py BUILD_DIR JOBS UNIT...

Every unit gets clang's warnings (the build's -Wall -Wextra) and its -Wthread-safety analysis, as
errors; a unit of src/ or apps/ also gets clang-tidy's readability-function-size (.clang-tidy: at
most 80 lines), so those run through clang-tidy and the others (tests/, bench/, which lift the
size limit) through `clang++ -fsyntax-only`, which reports the same diagnostics in a third of the
time. A unit missing from BUILD_DIR/compile_commands.json (the fuzz targets, built only in
build-fuzz/) goes through clang-tidy, which borrows a neighbour's flags.

gcc's precompiled header of <torch/torch.h> (CMake's cmake_pch.hxx) means nothing to clang, so
each such header is compiled once by clang, with the flags of a unit that uses it, and the units
include that instead: parsing libtorch is most of a torch unit's time.

Prints every finding; exits 1 if there is any.
"""
import concurrent.futures
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile

CLANG = "clang++-14"
CLANG_TIDY = "clang-tidy-14"
PCH_INCLUDE = re.compile(r"-include (\S*cmake_pch\.hxx)")


def compile_args(command):
    """The compile command's arguments without the compiler, its output and its input."""
    args = shlex.split(command)[1:]
    out = []
    skip = False
    for a in args:
        if skip:
            skip = False
            continue
        if a in ("-o", "-c"):
            skip = a == "-o"
            continue
        out.append(a)
    return out


def build_pchs(entries, workdir):
    """Compiles each cmake_pch.hxx once with clang; returns {gcc header: clang pch}."""
    pchs = {}
    for e in entries:
        m = PCH_INCLUDE.search(e["command"])
        if not m or m.group(1) in pchs:
            continue
        header = m.group(1)
        pch = os.path.join(workdir, f"{len(pchs)}.pch")
        args = compile_args(PCH_INCLUDE.sub("", e["command"]))
        args = [a for a in args[:-1] if a not in ("-Werror", "-Winvalid-pch")]
        subprocess.run([CLANG, *args, "-Wno-pragma-system-header-outside-header",
                        "-x", "c++-header", header, "-o", pch],
                       cwd=e["directory"], check=True)
        pchs[header] = pch
    return pchs


def with_clang_pch(command, pchs):
    command = PCH_INCLUDE.sub(lambda m: "-include-pch " + pchs[m.group(1)], command)
    return command.replace("-Winvalid-pch", "")


def check(unit, entry, db_dir):
    if entry is None or unit.startswith(("src/", "apps/")):
        cmd = [CLANG_TIDY, "-p", db_dir, "--quiet", "--extra-arg=-Wthread-safety", unit]
        cwd = None
    else:
        cmd = [CLANG, *compile_args(entry["command"])[:-1], "-Wthread-safety", "-Werror",
               "-fsyntax-only", entry["file"]]
        cwd = entry["directory"]
    run = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    lines = (run.stdout + run.stderr).splitlines()
    noise = re.compile(r"^\d+ (warning|error)s? generated\.$|Error while processing")
    return [l for l in lines if not noise.search(l)]


def main():
    build_dir, jobs, units = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    entries = json.load(open(os.path.join(build_dir, "compile_commands.json")))
    root = os.getcwd()
    with tempfile.TemporaryDirectory() as workdir:
        pchs = build_pchs(entries, workdir)
        for e in entries:
            e["command"] = with_clang_pch(e["command"], pchs)
        json.dump(entries, open(os.path.join(workdir, "compile_commands.json"), "w"))
        by_file = {os.path.relpath(e["file"], root): e for e in entries}
        with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
            results = list(pool.map(lambda u: check(u, by_file.get(u), workdir), units))
    findings = [l for lines in results for l in lines]
    print("\n".join(findings[:120]))
    count = sum(1 for l in findings if re.search(r"warning:|error:", l, re.I))
    if count:
        print(f"check: FAILED: {count} findings of clang (warnings, thread-safety analysis, "
              "function sizes)")
    return 1 if count else 0


if __name__ == "__main__":
    sys.exit(main())
