// The Prometheus text format as weftd writes it: counters, cumulative histogram buckets, gauges,
// and label values escaped so a tenant's name cannot break a line.
#include "common/metrics.h"

#include <gtest/gtest.h>

namespace weft {
namespace {

TEST(MetricsTest, CountersAndHistogramsRenderInTheTextFormat) {
  MetricsRegistry m;
  m.DeclareCounter("jobs_total", "jobs seen");
  m.DeclareHistogram("round_seconds", "rounds", {0.001, 0.01});
  m.Add("jobs_total", {{"tenant", "a"}});
  m.Add("jobs_total", {{"tenant", "a"}}, 2);
  m.Add("jobs_total", {{"tenant", "a"}}, -5);  // counters never go down
  m.Add("undeclared_total", {});
  for (double s : {0.0005, 0.001, 0.005, 3.0}) m.Observe("round_seconds", {}, s);
  EXPECT_EQ(m.Render(),
            "# HELP jobs_total jobs seen\n"
            "# TYPE jobs_total counter\n"
            "jobs_total{tenant=\"a\"} 3\n"
            "# HELP round_seconds rounds\n"
            "# TYPE round_seconds histogram\n"
            "round_seconds_bucket{le=\"0.001\"} 2\n"
            "round_seconds_bucket{le=\"0.01\"} 3\n"
            "round_seconds_bucket{le=\"+Inf\"} 4\n"
            "round_seconds_sum 3.0065\n"
            "round_seconds_count 4\n");
}

TEST(MetricsTest, LabelValuesAreEscapedAndControlCharactersDropped) {
  EXPECT_EQ(RenderLabels({{"tenant", "a\"b\\c\nd\x01\x7f"}, {"job", "j"}}),
            "{job=\"j\",tenant=\"a\\\"b\\\\c\\nd\"}");
  EXPECT_EQ(RenderLabels({}), "");
  std::string out;
  RenderGauge("queue_length", "waiting\njobs", {{{{"tenant", "x"}}, 2}, {{}, 0.25}}, &out);
  EXPECT_EQ(out,
            "# HELP queue_length waiting\\njobs\n"
            "# TYPE queue_length gauge\n"
            "queue_length{tenant=\"x\"} 2\n"
            "queue_length 0.25\n");
}

}  // namespace
TEST(MetricsTest, JobGaugesRenderActiveJobsWithTheirLabelsAndForgetTheRest) {
  JobGauges gauges;
  gauges.Declare("weft_x", "a value jobs report");
  gauges.Set("a", "weft_x", {{{{"k", "1"}}, 5}});
  gauges.Set("b", "weft_x", {{{}, 7}});
  gauges.Set("a", "undeclared", {{{}, 1}});  // ignored
  std::string out;
  gauges.RenderAndPrune({{"a", {{"job", "a"}}}, {"b", {{"job", "b"}}}}, &out);
  EXPECT_NE(out.find("weft_x{job=\"a\",k=\"1\"} 5"), std::string::npos) << out;
  EXPECT_NE(out.find("weft_x{job=\"b\"} 7"), std::string::npos) << out;
  EXPECT_EQ(out.find("undeclared"), std::string::npos) << out;
  // b ended: gone now and after, though a reports again.
  out.clear();
  gauges.RenderAndPrune({{"a", {{"job", "a"}}}}, &out);
  EXPECT_EQ(out.find("job=\"b\""), std::string::npos) << out;
  out.clear();
  gauges.RenderAndPrune({{"a", {{"job", "a"}}}, {"b", {{"job", "b"}}}}, &out);
  EXPECT_EQ(out.find("job=\"b\""), std::string::npos) << out;
  EXPECT_NE(out.find("weft_x{job=\"a\",k=\"1\"} 5"), std::string::npos) << out;
}

}  // namespace weft
