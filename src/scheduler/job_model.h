// What a throughput-aware policy may ask about a job: how fast it runs on a placement and how much
// work it has left, to its end and to its deliver target. weft-sim answers from measured
// application traces; weftd will answer from the step times its learners report. Pure interface, no
// I/O.
#pragma once

#include <vector>

namespace weft::scheduler {

// A placement as a policy reasons about it: learners per node, in node order, zeros dropped.
// (4, 2) is 4 learners on one node and 2 on another.
using NodeCounts = std::vector<int>;

class JobModel {
 public:
  virtual ~JobModel() = default;

  // Seconds per optimizer step at the job's own (fixed) total batch size on `placement`, as
  // Optimus estimates it (Peng et al., EuroSys'18): the batch is split across the learners and
  // accumulated when a learner cannot hold its share. Must be > 0 for a non-empty placement.
  virtual double StepSeconds(const NodeCounts& placement) const = 0;

  // Optimizer steps the job still needs at its fixed batch size (Optimus's remaining work;
  // an oracle in weft-sim). At least 1 while the job is active.
  virtual double RemainingSteps() const = 0;

  // Goodput on `placement` at the best batch size the job could use there, in units of
  // progress per second (Pollux, OSDI'21: throughput × statistical efficiency, normalised to the
  // job's initial batch size). 0 for an empty placement.
  virtual double Goodput(const NodeCounts& placement) const = 0;

  // Progress still needed to reach the job's deliver target, in Goodput's units of progress (so
  // ProgressToDeliver() / Goodput(p) estimates the seconds to delivery on placement p); 0 once it
  // is met or when the job has none. weft-sim answers from the application's validation curve.
  virtual double ProgressToDeliver() const { return 0; }
  // Progress still needed to the job's end (its budget), in Goodput's units; 0 when unknown
  // (then a resize is never refused for its cost: ResizePays in scheduler/placement.h).
  virtual double RemainingProgress() const { return 0; }
  // Seconds of training one resize costs the job (its learners' stall while the gang re-forms
  // in place, or a restart's); 0: free.
  virtual double ResizeSeconds() const { return 0; }
};

}  // namespace weft::scheduler
