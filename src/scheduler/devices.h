// GPU devices for the learners a round places. The policies decide how many learners go on which
// node, counting GPUs as a resource like cpus; AssignGpus then gives each learner the indices of
// the devices it is to have, all on its own node, so that no device is ever given to two
// learners. Pure like the policies: weftd runs it after every checked round, weft-sim too, so a
// trace job asking for 4 GPUs gets 4 indices in both.
#pragma once

#include "absl/status/status.h"
#include "scheduler/cluster.h"

namespace weft::scheduler {

// Fills every placement's learner_gpus. A learner a running job keeps on a node keeps its devices
// (the job's learners on one node keep theirs in rank order); every other learner gets
// `per_learner.gpus` of its node's free devices, lowest index first. A device is free when no
// learner holds it (Node::gpus_held) — and, with snapshot.preemption_frees_at_once, also when it
// is a preempted job's or one a resized job gives up. Placements are served in the order the
// policy listed them. FailedPrecondition naming the node and the job when a node has fewer free
// devices than the decisions put on it (a round CheckDecisions should have refused, or an
// inventory whose held devices disagree with its allocation); `decisions` is then unusable.
absl::Status AssignGpus(const ClusterSnapshot& snapshot, Decisions* decisions);

// OK when, after `decisions`, every learner of a placement holds exactly its job's
// per_learner.gpus devices, each one of its node's, and no device is held by two learners
// (counting the devices the nodes' other holders keep). FailedPrecondition naming the first
// device given twice, or the learner with the wrong devices.
absl::Status CheckGpus(const ClusterSnapshot& snapshot, const Decisions& decisions);

}  // namespace weft::scheduler
