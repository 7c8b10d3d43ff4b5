// weft-learner: one training process of one job, started by a weftd executor.
#include "train/learner.h"

int main() { return weft::train::RunLearnerFromEnvironment(); }
