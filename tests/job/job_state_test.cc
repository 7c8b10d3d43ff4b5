#include "job/job_state.h"

#include <gtest/gtest.h>

#include <set>
#include <utility>

namespace weft {
namespace {

using S = JobState;

// The lifecycle of ARCHITECTURE.md, written out edge by edge.
const std::set<std::pair<S, S>>& Allowed() {
  static const std::set<std::pair<S, S>> kAllowed = {
      {S::kQueued, S::kPlaced},     {S::kQueued, S::kHalted},       {S::kQueued, S::kFailed},
      {S::kPlaced, S::kStarting},   {S::kPlaced, S::kQueued},       {S::kPlaced, S::kHalted},
      {S::kPlaced, S::kFailed},     {S::kStarting, S::kRunning},    {S::kStarting, S::kQueued},
      {S::kStarting, S::kHalted},   {S::kStarting, S::kFailed},     {S::kStarting, S::kPreempted},
      {S::kRunning, S::kRunning},   {S::kDelivered, S::kDelivered}, {S::kRunning, S::kDelivered},
      {S::kRunning, S::kCompleted}, {S::kRunning, S::kFailed},      {S::kRunning, S::kHalted},
      {S::kRunning, S::kPreempted}, {S::kRunning, S::kQueued},      {S::kDelivered, S::kCompleted},
      {S::kDelivered, S::kFailed},  {S::kDelivered, S::kHalted},    {S::kDelivered, S::kPreempted},
      {S::kDelivered, S::kQueued},  {S::kPreempted, S::kQueued},    {S::kHalted, S::kResuming},
      {S::kResuming, S::kQueued},   {S::kResuming, S::kFailed},
  };
  return kAllowed;
}

TEST(JobStateTest, EveryPairIsAllowedExactlyWhenListed) {
  int allowed = 0;
  for (S from : AllJobStates()) {
    for (S to : AllJobStates()) {
      bool expected = Allowed().count({from, to}) > 0;
      EXPECT_EQ(CanTransition(from, to), expected)
          << JobStateName(from) << " -> " << JobStateName(to);
      allowed += CanTransition(from, to);
    }
  }
  EXPECT_EQ(allowed, static_cast<int>(Allowed().size()));
}

TEST(JobStateTest, TerminalStatesGoNowhere) {
  for (S to : AllJobStates()) {
    EXPECT_FALSE(CanTransition(S::kCompleted, to));
    EXPECT_FALSE(CanTransition(S::kFailed, to));
  }
  EXPECT_TRUE(IsTerminal(S::kCompleted));
  EXPECT_TRUE(IsTerminal(S::kFailed));
  EXPECT_FALSE(IsTerminal(S::kHalted));
  EXPECT_FALSE(IsTerminal(S::kDelivered));
}

TEST(JobStateTest, NamesRoundTrip) {
  EXPECT_EQ(AllJobStates().size(), 10u);
  for (S s : AllJobStates()) {
    auto parsed = ParseJobState(JobStateName(s));
    ASSERT_TRUE(parsed.has_value());
    EXPECT_EQ(*parsed, s);
  }
  EXPECT_STREQ(JobStateName(S::kDelivered), "DELIVERED");
  EXPECT_FALSE(ParseJobState("delivered").has_value());
}

TEST(JobStateTest, ResourceHoldingStates) {
  std::set<S> holding;
  for (S s : AllJobStates()) {
    if (HoldsResources(s)) holding.insert(s);
  }
  EXPECT_EQ(holding, (std::set<S>{S::kPlaced, S::kStarting, S::kRunning, S::kDelivered}));
}

// Every predicate as the set of states it holds for, so a change to one shows here.
std::set<S> Where(bool (*predicate)(S)) {
  std::set<S> out;
  for (S s : AllJobStates()) {
    if (predicate(s)) out.insert(s);
  }
  return out;
}

TEST(JobStateTest, EachPredicateHoldsForExactlyItsStates) {
  EXPECT_EQ(Where(IsSettled), (std::set<S>{S::kCompleted, S::kFailed, S::kHalted}));
  EXPECT_EQ(Where(RunsLearners), (std::set<S>{S::kStarting, S::kRunning, S::kDelivered}));
  EXPECT_EQ(Where(InQueue), (std::set<S>{S::kQueued, S::kPreempted}));
  EXPECT_EQ(Where(AcceptsCheckpoints), (std::set<S>{S::kStarting, S::kRunning, S::kDelivered,
                                                    S::kHalted, S::kPreempted, S::kQueued}));
}

TEST(JobStateTest, SettledJobsLeaveOnlyByAPersonsResume) {
  for (S from : AllJobStates()) {
    if (!IsSettled(from)) continue;
    for (S to : AllJobStates()) {
      if (CanTransition(from, to)) {
        EXPECT_EQ(from, S::kHalted) << JobStateName(from) << " -> " << JobStateName(to);
        EXPECT_EQ(to, S::kResuming);
      }
    }
  }
}

}  // namespace
}  // namespace weft
