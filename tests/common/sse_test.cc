#include "common/sse.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace weft {
namespace {

std::vector<SseEvent> FeedInPieces(const std::string& stream, size_t piece) {
  SseParser parser;
  std::vector<SseEvent> out;
  for (size_t i = 0; i < stream.size(); i += piece) {
    EXPECT_TRUE(parser.Feed(std::string_view(stream).substr(i, piece),
                            [&](const SseEvent& e) { out.push_back(e); }));
  }
  return out;
}

TEST(SseParserTest, ReadsEventsWhateverTheSplitOfTheBytes) {
  const std::string stream =
      "retry: 2000\n\n"
      ": keep-alive\n\n"
      "id: 7\nevent: job\ndata: {\"a\":1}\n\n"
      "id: 8\r\nevent: state\r\ndata: one\r\ndata:two\r\n\r\n"
      "data: no type\rdata: cr only\r\r"
      "id: 9\nevent: unfinished\ndata: x\n";
  for (size_t piece : {1u, 2u, 5u, 1000u}) {
    std::vector<SseEvent> events = FeedInPieces(stream, piece);
    ASSERT_EQ(events.size(), 3u) << "piece " << piece;
    EXPECT_EQ(events[0].id, "7");
    EXPECT_EQ(events[0].event, "job");
    EXPECT_EQ(events[0].data, "{\"a\":1}");
    EXPECT_EQ(events[1].id, "8");
    EXPECT_EQ(events[1].event, "state");
    EXPECT_EQ(events[1].data, "one\ntwo");
    // No event: field is "message"; the last id carries over.
    EXPECT_EQ(events[2].event, "message");
    EXPECT_EQ(events[2].id, "8");
    EXPECT_EQ(events[2].data, "no type\ncr only");
  }
}

TEST(SseParserTest, AnOverlongLineBreaksTheStream) {
  SseParser parser(16);
  int events = 0;
  auto count = [&](const SseEvent&) { ++events; };
  EXPECT_TRUE(parser.Feed("data: short\n\n", count));
  EXPECT_FALSE(parser.Feed("data: " + std::string(20, 'x'), count));
  EXPECT_FALSE(parser.Feed("\n\ndata: y\n\n", count));
  EXPECT_EQ(events, 1);
}

}  // namespace
}  // namespace weft
