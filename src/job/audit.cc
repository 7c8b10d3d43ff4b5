// The data audit: its records, and the check that every sample of every epoch contributed to
// exactly one applied step of the lineage. Two passes over the file: the first finds the lineage
// (which step records a later resume rolled back), the second counts each epoch's samples over
// the lineage's records, one epoch at a time (one byte per sample).
#include "job/audit.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <ext/stdio_filebuf.h>
#include <fstream>
#include <limits>
#include <map>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/files.h"

namespace weft {
namespace {

std::vector<absl::string_view> Tokens(absl::string_view line) {
  return absl::StrSplit(line, ' ', absl::SkipEmpty());
}

bool Int(absl::string_view s, int64_t* v) { return absl::SimpleAtoi(s, v); }

// One line of at most kAuditMaxLineBytes; false at the end. *terminated: it ended in '\n'.
bool NextLine(std::istream& in, std::vector<char>& buf, absl::string_view* line, bool* terminated,
              bool* too_long) {
  *too_long = false;
  if (!in.getline(buf.data(), static_cast<std::streamsize>(buf.size()))) {
    if (in.eof() && in.gcount() == 0) return false;
    if (in.fail() && !in.eof()) {  // longer than the buffer: skip the rest of it
      *too_long = true;
      in.clear();
      in.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
      *line = {};
      *terminated = true;
      return true;
    }
  }
  *terminated = !in.eof();
  const std::streamsize n = in.gcount() - (*terminated ? 1 : 0);
  *line = absl::string_view(buf.data(), static_cast<size_t>(std::max<std::streamsize>(n, 0)));
  return true;
}

struct Lineage {
  struct Entry {
    int64_t step;
    std::streamoff offset;  // where its record starts
  };
  std::vector<Entry> steps;            // the lineage so far, steps in increasing order
  std::map<int64_t, int64_t> samples;  // epoch -> data set size, as last recorded
};

// Pass 1: the step records on the lineage, in order.
absl::StatusOr<Lineage> FindLineage(std::istream& in, std::vector<char>& buf, AuditReport& r) {
  Lineage l;
  absl::string_view line;
  bool terminated = false, too_long = false;
  int64_t number = 0;
  int64_t next_step = 1;  // the step the next record must be
  while (true) {
    const std::streamoff offset = in.tellg();
    if (!NextLine(in, buf, &line, &terminated, &too_long)) break;
    ++number;
    if (number == 1) {
      if (line != kAuditHeader) {
        return absl::InvalidArgumentError(
            absl::StrCat("not a weft audit: the first line is not ", kAuditHeader));
      }
      continue;
    }
    if (too_long) {
      r.problems.push_back(
          absl::StrCat("line ", number, ": longer than ", kAuditMaxLineBytes, " bytes"));
      continue;
    }
    std::vector<absl::string_view> t = Tokens(line);
    int64_t a = 0, b = 0, k = 0;
    if (t.size() == 2 && t[0] == "resume" && Int(t[1], &a) && a >= 0) {
      while (!l.steps.empty() && l.steps.back().step > a) {
        l.steps.pop_back();
        ++r.steps_rolled_back;
      }
      if (!l.steps.empty() && l.steps.back().step < a) {
        r.problems.push_back(absl::StrCat("line ", number, ": resumed from step ", a,
                                          ", but the lineage's last recorded step is ",
                                          l.steps.back().step));
      }
      next_step = a + 1;
    } else if (t.size() == 4 && t[0] == "epoch" && t[2] == "samples" && Int(t[1], &a) &&
               Int(t[3], &b) && a >= 1 && b >= 0) {
      if (b > kAuditMaxSamples) {
        return absl::InvalidArgumentError(absl::StrCat(
            "epoch ", a, " has ", b, " samples; the audit checks at most ", kAuditMaxSamples));
      }
      l.samples[a] = b;
    } else if (t.size() >= 6 && t[0] == "step" && t[2] == "epoch" && t[4] == "n" && Int(t[1], &a) &&
               Int(t[3], &b) && Int(t[5], &k)) {
      if (!terminated || static_cast<int64_t>(t.size()) - 6 != k) {
        ++r.torn_records;
        ++r.steps_rolled_back;
        continue;
      }
      if (a != next_step) {
        r.problems.push_back(
            absl::StrCat("line ", number, ": step ", a, " where step ", next_step, " was due"));
      }
      l.steps.push_back({a, offset});
      next_step = a + 1;
    } else if (!terminated) {
      ++r.torn_records;  // a resume or epoch record cut short: nothing applied depends on it
    } else {
      r.problems.push_back(absl::StrCat("line ", number, ": not an audit record"));
    }
  }
  if (number == 0) return absl::InvalidArgumentError("not a weft audit: the file is empty");
  return l;
}

void CloseEpoch(std::vector<uint8_t>& counts, AuditEpoch& e) {
  for (uint8_t c : counts) {
    if (c == 0) ++e.missing;
    if (c == 1) ++e.once;
    if (c > 1) ++e.twice;
  }
}

}  // namespace

std::string AuditResumeRecord(int64_t step) { return absl::StrCat("resume ", step, "\n"); }

std::string AuditEpochRecord(int64_t epoch, int64_t samples) {
  return absl::StrCat("epoch ", epoch, " samples ", samples, "\n");
}

std::string AuditStepRecord(int64_t step, int64_t epoch, const int64_t* indices, int64_t count) {
  std::string s = absl::StrCat("step ", step, " epoch ", epoch, " n ", count);
  s.reserve(s.size() + static_cast<size_t>(count) * 7 + 1);
  for (int64_t i = 0; i < count; ++i) absl::StrAppend(&s, " ", indices[i]);
  s.push_back('\n');
  return s;
}

bool AuditReport::exact() const {
  if (!problems.empty()) return false;
  for (const AuditEpoch& e : epochs) {
    if (!e.exact()) return false;
  }
  return true;
}

absl::StatusOr<AuditReport> CheckAudit(std::istream& in) {
  AuditReport r;
  std::vector<char> buf(static_cast<size_t>(kAuditMaxLineBytes) + 1);
  absl::StatusOr<Lineage> lineage = FindLineage(in, buf, r);
  if (!lineage.ok()) return lineage.status();
  r.steps_applied = static_cast<int64_t>(lineage->steps.size());
  // Pass 2: count each epoch's samples over the lineage's records.
  std::vector<uint8_t> counts;
  AuditEpoch* current = nullptr;
  for (const Lineage::Entry& entry : lineage->steps) {
    in.clear();
    in.seekg(entry.offset);
    absl::string_view line;
    bool terminated = false, too_long = false;
    if (!NextLine(in, buf, &line, &terminated, &too_long)) break;
    std::vector<absl::string_view> t = Tokens(line);
    int64_t epoch = 0;
    // Pass 1 read a step record here; one that is not any more (the file was replaced between
    // the passes) is a problem, never an index out of bounds.
    if (t.size() < 6 || !Int(t[3], &epoch)) {
      r.problems.push_back(absl::StrCat("step ", entry.step, "'s record changed while read"));
      continue;
    }
    if (current == nullptr || epoch != current->epoch) {
      if (current != nullptr) CloseEpoch(counts, *current);
      if (current != nullptr && epoch < current->epoch) {
        r.problems.push_back(absl::StrCat("step ", entry.step, " trains epoch ", epoch,
                                          " after epoch ", current->epoch));
      }
      const int64_t expected = current == nullptr ? 1 : current->epoch + 1;
      if (epoch > expected) {
        r.problems.push_back(absl::StrCat("no applied step trained epoch ", expected));
      }
      auto n = lineage->samples.find(epoch);
      if (n == lineage->samples.end()) {
        r.problems.push_back(absl::StrCat("epoch ", epoch, " has no record of its size"));
      }
      r.epochs.push_back(AuditEpoch{epoch, n == lineage->samples.end() ? 0 : n->second});
      current = &r.epochs.back();
      counts.assign(static_cast<size_t>(current->samples), 0);
    }
    for (size_t i = 6; i < t.size(); ++i) {
      int64_t index = -1;
      if (!Int(t[i], &index) || index < 0 || index >= current->samples) {
        ++current->out_of_range;
      } else if (counts[static_cast<size_t>(index)] < 255) {
        ++counts[static_cast<size_t>(index)];
      }
    }
  }
  if (current != nullptr) {
    CloseEpoch(counts, *current);
    current->partial = current->missing > 0;
  }
  return r;
}

absl::StatusOr<AuditReport> CheckAuditFile(const std::string& path) {
  // In the job's log directory, which its learner writes: no link is followed.
  const int fd = OpenNoSymlinks(path, O_RDONLY | O_NONBLOCK);
  if (fd < 0) return absl::NotFoundError(absl::StrCat("no audit at ", path));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::NotFoundError(absl::StrCat("no audit at ", path, " (not a regular file)"));
  }
  __gnu_cxx::stdio_filebuf<char> buf(fd, std::ios::in | std::ios::binary);
  std::istream in(&buf);
  return CheckAudit(in);
}

}  // namespace weft
