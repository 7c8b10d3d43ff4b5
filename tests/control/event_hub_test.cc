#include "control/event_hub.h"

#include <atomic>
#include <thread>

#include "control/event_waker.h"
#include "gtest/gtest.h"

namespace weft {
namespace {

JobEvent Of(const std::string& job, const std::string& tenant) {
  JobEvent e;
  e.job = job;
  e.tenant = tenant;
  return e;
}

TEST(EventHubTest, ReadersGetWhatCameAfterTheirCursorInOrder) {
  EventHub hub;
  EXPECT_EQ(hub.LastSeq(), 0);
  EXPECT_EQ(hub.Publish(Of("a", "t1")), 1);
  EXPECT_EQ(hub.Publish(Of("b", "t2")), 2);
  EXPECT_EQ(hub.Publish(Of("c", "t1")), 3);
  EventHub::Batch all = hub.Wait(0, absl::ZeroDuration(), nullptr);
  ASSERT_EQ(all.events.size(), 3u);
  EXPECT_EQ(all.events[0].job, "a");
  EXPECT_EQ(all.events[2].seq, 3);
  EXPECT_EQ(all.last, 3);
  EXPECT_FALSE(all.missed);
  EventHub::Batch after_one = hub.Wait(1, absl::ZeroDuration(), nullptr);
  ASSERT_EQ(after_one.events.size(), 2u);
  EXPECT_EQ(after_one.events[0].job, "b");
}

TEST(EventHubTest, RefusedEventsStillMoveTheCursor) {
  EventHub hub;
  hub.Publish(Of("a", "t1"));
  hub.Publish(Of("b", "t2"));
  auto t1 = [](const JobEvent& e) { return e.tenant == "t1"; };
  EventHub::Batch b = hub.Wait(1, absl::ZeroDuration(), t1);
  EXPECT_TRUE(b.events.empty());
  EXPECT_EQ(b.last, 2);
}

TEST(EventHubTest, AReaderTooFarBehindIsToldItMissedEvents) {
  EventHub hub(2);
  for (int i = 0; i < 5; ++i) hub.Publish(Of("j" + std::to_string(i), "t"));
  EventHub::Batch b = hub.Wait(1, absl::ZeroDuration(), nullptr);
  EXPECT_TRUE(b.missed);
  ASSERT_EQ(b.events.size(), 2u);  // the newest two are still there
  EXPECT_EQ(b.events[0].seq, 4);
  EXPECT_FALSE(hub.Wait(3, absl::ZeroDuration(), nullptr).missed);
}

TEST(EventHubTest, WaitReturnsEmptyOnTimeoutAndWakesOnAPublish) {
  EventHub hub;
  EventHub::Batch none = hub.Wait(0, absl::Milliseconds(20), nullptr);
  EXPECT_TRUE(none.events.empty());
  EXPECT_EQ(none.last, 0);
  std::thread publisher([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    hub.Publish(Of("late", "t"));
  });
  // Generous: the wait ends on the publish, long before this.
  EventHub::Batch b = hub.Wait(0, absl::Seconds(30), nullptr);
  publisher.join();
  ASSERT_EQ(b.events.size(), 1u);
  EXPECT_EQ(b.events[0].job, "late");
}

// The waker calls its wake for the events it keeps and for none other.
TEST(EventWakerTest, WakesForTheEventsItKeepsOnly) {
  EventHub hub;
  std::atomic<int> woken{0};
  EventWaker waker(
      hub, [](const JobEvent& e) { return e.tenant == "wanted"; }, [&] { ++woken; });
  hub.Publish(Of("before", "wanted"));  // before Start: not news to it
  waker.Start();
  hub.Publish(Of("other", "t"));
  hub.Publish(Of("kept", "wanted"));
  for (int i = 0; i < 3000 && woken == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(woken, 1);
  // Whatever else it would wake for has had two of its waits to show up.
  std::this_thread::sleep_for(std::chrono::milliseconds(2 * EventWaker::kPollMs));
  waker.Stop();
  EXPECT_EQ(woken, 1);
}

}  // namespace
}  // namespace weft
