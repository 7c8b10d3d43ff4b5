// A job's data audit (docs/design.md, "Exactly-once data"). With WEFT_LEARNER_AUDIT=1 in weftd's
// environment (learners inherit it), rank 0 of every attempt appends to AuditPath(log_dir) one
// record per applied step: its epoch and the sample indices it trained. CheckAudit reads the file
// back and shows, epoch by epoch, that every sample contributed to exactly one applied step of the
// model's lineage: the steps a later attempt resumed past, and no others.
//
// The file is text, one record per '\n'-terminated line:
//   weft-audit-v1                            the first line
//   resume <step>                            an attempt resumed from the checkpoint of <step>
//                                            (0: from scratch); every record of a later step
//                                            written before it was rolled back
//   epoch <e> samples <n>                    epoch <e> (1-based) draws from samples 0 … n-1
//   step <s> epoch <e> n <k> <i1> … <ik>     step <s> (1-based, counted over the whole job) was
//                                            applied by every learner; it trained samples i1 … ik
// A step record with fewer than k indices or without its '\n' is torn: its writer was killed
// while writing it, before any checkpoint could include the step, so it is rolled back too.
#pragma once

#include <cstdint>
#include <istream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace weft {

// Set to "1" in weftd's environment to have learners write the audit.
inline constexpr char kAuditEnv[] = "WEFT_LEARNER_AUDIT";
inline constexpr char kAuditHeader[] = "weft-audit-v1";
// Bounds of what CheckAudit reads: samples per epoch (one byte of memory each) and bytes per line.
inline constexpr int64_t kAuditMaxSamples = int64_t{1} << 26;
inline constexpr int64_t kAuditMaxLineBytes = int64_t{16} << 20;

// The records, each with its '\n'.
std::string AuditResumeRecord(int64_t step);
std::string AuditEpochRecord(int64_t epoch, int64_t samples);
std::string AuditStepRecord(int64_t step, int64_t epoch, const int64_t* indices, int64_t count);

struct AuditEpoch {
  int64_t epoch = 0;         // 1-based
  int64_t samples = 0;       // the epoch's data set size
  int64_t once = 0;          // samples trained by exactly one applied step
  int64_t missing = 0;       // samples no applied step trained
  int64_t twice = 0;         // samples trained by more than one applied step
  int64_t out_of_range = 0;  // indices outside 0 … samples-1
  // The lineage's last epoch when it ends before its last sample (training stopped, met its
  // target mid-epoch, or goes on): its missing samples are not a fault.
  bool partial = false;
  bool exact() const { return twice == 0 && out_of_range == 0 && (missing == 0 || partial); }
};

struct AuditReport {
  std::vector<AuditEpoch> epochs;  // in order
  int64_t steps_applied = 0;       // on the lineage
  int64_t steps_rolled_back = 0;   // written, then resumed past (including torn records)
  int64_t torn_records = 0;
  std::vector<std::string> problems;  // malformed records, gaps in the steps, epochs out of order
  // Every epoch exact and no problem.
  bool exact() const;
};

// Reads an audit (a seekable stream: it is read twice) and checks it. InvalidArgument if it does
// not start with kAuditHeader or an epoch has more than kAuditMaxSamples samples.
absl::StatusOr<AuditReport> CheckAudit(std::istream& in);
// The same for the file at `path`: NotFound if there is none (the job ran without the audit).
absl::StatusOr<AuditReport> CheckAuditFile(const std::string& path);

}  // namespace weft
