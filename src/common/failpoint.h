// Failpoints for the fault-injection suite (in the spirit of FreeBSD's fail(9) and etcd's gofail):
// named places where a process kills itself with SIGKILL, as if killed from outside at exactly
// that instant. Off unless the environment variable names one:
//   WEFT_FAILPOINT=<name>@<n>   crash on the n-th time this process reaches <name> (n >= 1)
// Learners read WEFT_LEARNER_FAILPOINT instead and honour it only in attempt 1, so the restarted
// learner runs clean (and, with WEFT_LEARNER_FAILPOINT_RANK=r, only in rank r of a gang). The
// points weft has:
//   atomic-write-before-rename   WriteFileAtomic: temporary file written and fsynced, not renamed
//   checkpoint-before-commit     learner: checkpoint durable on disk, not yet committed to weftd
//   evaluation-before-allreduce  learner: its part of an evaluation done, not yet summed over the
//   gang after-transition             weftd: a job state change stored, nothing acted on it yet
#pragma once

namespace weft {

// Crashes the process (SIGKILL to itself) if `name` is the configured failpoint and this is its
// configured hit. Cheap when no failpoint is set.
void Failpoint(const char* name);

// Which environment variable this process reads (call once at startup, before any Failpoint):
// "WEFT_FAILPOINT" by default; the learner passes "WEFT_LEARNER_FAILPOINT".
void SetFailpointVariable(const char* env_name, bool enabled);

}  // namespace weft
