#!/usr/bin/env bash
# The habits the tools check (docs/design.md, "Habits the tools check"); scripts/test.sh runs it
# before the tests, so CI fails on any of them:
#  1. format: clang-format (.clang-format: Google style, 100 columns) leaves every C++ file of
#     src/, apps/, tests/ and bench/ as it is (fix with: scripts/check.sh --fix-format);
#  2. clang's view (.clang-tidy, scripts/clang-check.py): its warnings under the build's -Wall
#     -Wextra and its -Wthread-safety analysis over every translation unit of ours, so
#     ABSL_GUARDED_BY and friends on absl::Mutex are checked, not decoration; and no function in
#     src/ or apps/ over 80 lines (clang-tidy's readability-function-size);
#  3. sizes: no source file over 600 lines, none in src/control/ over 400.
# Needs a configured build for compile_commands.json (scripts/build.sh). Usage:
#   scripts/check.sh [--fix-format] [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
FIX=0
if [[ "${1:-}" == "--fix-format" ]]; then FIX=1; shift; fi
BUILD_DIR="${1:-${WEFT_BUILD_DIR:-build}}"
CLANG_FORMAT=$(command -v clang-format-14 || command -v clang-format)
failed=0

# Tracked files and new ones git does not ignore: a file not yet added is formatted and measured
# too, so --fix-format before the first commit of a file leaves nothing for CI to find.
mapfile -t sources < <(git ls-files --cached --others --exclude-standard -- 'src/*.cc' 'src/*.h' \
                         'apps/*.cc' 'tests/*.cc' 'tests/*.h' 'bench/*.cc')

echo "check: format (${#sources[@]} files)"
if [[ $FIX == 1 ]]; then
  "$CLANG_FORMAT" -i "${sources[@]}"
elif ! "$CLANG_FORMAT" --dry-run --Werror "${sources[@]}" 2>/tmp/weft-format.$$; then
  head -40 /tmp/weft-format.$$
  echo "check: FAILED: files not formatted; run scripts/check.sh --fix-format"
  failed=1
fi
rm -f /tmp/weft-format.$$

echo "check: file sizes"
for f in "${sources[@]}"; do
  lines=$(wc -l < "$f")
  limit=600
  [[ $f == src/control/* ]] && limit=400
  if (( lines > limit )); then
    echo "check: FAILED: $f has $lines lines (limit $limit): split it along a boundary you can name"
    failed=1
  fi
done

mapfile -t units < <(git ls-files -- 'src/*.cc' 'apps/*.cc' 'tests/*.cc' 'bench/*.cc')
echo "check: clang's warnings, thread-safety analysis and function sizes (${#units[@]} translation units)"
# What is checked is in .clang-tidy (tests/ and bench/ lift the function size limit);
# scripts/clang-check.py says how each unit is checked.
python3 scripts/clang-check.py "$BUILD_DIR" "${WEFT_JOBS:-2}" "${units[@]}" || failed=1

if [[ $failed != 0 ]]; then exit 1; fi
echo "check: all passed"
