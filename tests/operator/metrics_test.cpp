// The Prometheus registry: the exposition text (format 0.0.4) of a small registry byte for byte,
// escaping, histogram buckets, the checks on names and label values, increments from many
// threads, and the operator's metric set.
#include "operator/server/metrics.h"

#include <gtest/gtest.h>

#include <functional>
#include <limits>
#include <string>
#include <thread>
#include <vector>

namespace tessel::server {
namespace {

std::string error_of(const std::function<void()>& action) {
  try {
    action();
  } catch (const MetricError& e) {
    return e.what();
  }
  return "no MetricError";
}

TEST(Metrics, ASmallRegistryRendersExactly) {
  MetricsRegistry registry;
  Counter& requests =
      registry.counter("http_requests_total", "Requests served.", {"method", "code"});
  Gauge& temperature = registry.gauge("room_temperature_celsius", "The temperature.");
  Histogram& latency =
      registry.histogram("request_seconds", "Request latency.", {"path"}, {0.1, 0.5, 1});
  registry.counter("unused_total", "Never touched: not rendered.", {"reason"});

  requests.inc({"post", "500"});
  requests.inc({"get", "200"});
  requests.inc({"get", "200"}, 2);
  temperature.set({}, -3.5);
  latency.observe({"/a"}, 0.25);
  latency.observe({"/a"}, 0.5);  // a bucket's bound is inclusive
  latency.observe({"/a"}, 7);

  EXPECT_EQ(registry.render(),
            "# HELP http_requests_total Requests served.\n"
            "# TYPE http_requests_total counter\n"
            "http_requests_total{method=\"get\",code=\"200\"} 3\n"
            "http_requests_total{method=\"post\",code=\"500\"} 1\n"
            "# HELP request_seconds Request latency.\n"
            "# TYPE request_seconds histogram\n"
            "request_seconds_bucket{path=\"/a\",le=\"0.1\"} 0\n"
            "request_seconds_bucket{path=\"/a\",le=\"0.5\"} 2\n"
            "request_seconds_bucket{path=\"/a\",le=\"1\"} 2\n"
            "request_seconds_bucket{path=\"/a\",le=\"+Inf\"} 3\n"
            "request_seconds_sum{path=\"/a\"} 7.75\n"
            "request_seconds_count{path=\"/a\"} 3\n"
            "# HELP room_temperature_celsius The temperature.\n"
            "# TYPE room_temperature_celsius gauge\n"
            "room_temperature_celsius -3.5\n");
}

TEST(Metrics, FamiliesWithoutLabelsStartAtZero) {
  MetricsRegistry registry;
  registry.counter("events_total", "Events.");
  registry.histogram("wait_seconds", "Waits.", {}, {1, 2.5});
  EXPECT_EQ(registry.render(),
            "# HELP events_total Events.\n"
            "# TYPE events_total counter\n"
            "events_total 0\n"
            "# HELP wait_seconds Waits.\n"
            "# TYPE wait_seconds histogram\n"
            "wait_seconds_bucket{le=\"1\"} 0\n"
            "wait_seconds_bucket{le=\"2.5\"} 0\n"
            "wait_seconds_bucket{le=\"+Inf\"} 0\n"
            "wait_seconds_sum 0\n"
            "wait_seconds_count 0\n");
}

TEST(Metrics, LabelValuesAndHelpAreEscaped) {
  MetricsRegistry registry;
  Gauge& gauge = registry.gauge("odd", "Back\\slash and\nnew line, \"quotes\" kept.", {"text"});
  gauge.set({"a\\b\"c\nd"}, 1e21);
  gauge.set({"plain"}, 0.001);
  EXPECT_EQ(registry.render(),
            "# HELP odd Back\\\\slash and\\nnew line, \"quotes\" kept.\n"
            "# TYPE odd gauge\n"
            "odd{text=\"a\\\\b\\\"c\\nd\"} 1e+21\n"
            "odd{text=\"plain\"} 0.001\n");
}

TEST(Metrics, SpecialValuesAreWrittenAsPrometheusReadsThem) {
  MetricsRegistry registry;
  Gauge& gauge = registry.gauge("special", "Special values.", {"which"});
  gauge.set({"inf"}, std::numeric_limits<double>::infinity());
  gauge.set({"minus_inf"}, -std::numeric_limits<double>::infinity());
  gauge.set({"nan"}, std::numeric_limits<double>::quiet_NaN());
  gauge.set({"tenth"}, 0.1);
  const std::string text = registry.render();
  EXPECT_NE(text.find("special{which=\"inf\"} +Inf\n"), std::string::npos) << text;
  EXPECT_NE(text.find("special{which=\"minus_inf\"} -Inf\n"), std::string::npos) << text;
  EXPECT_NE(text.find("special{which=\"nan\"} NaN\n"), std::string::npos) << text;
  EXPECT_NE(text.find("special{which=\"tenth\"} 0.1\n"), std::string::npos) << text;
}

TEST(Metrics, HistogramBucketsAreCumulative) {
  MetricsRegistry registry;
  Histogram& histogram = registry.histogram("h", "H.", {}, {1, 2, 4});
  for (const double value : {0.5, 1.0, 1.5, 3.0, 3.5, 4.0, 100.0, -2.0})
    histogram.observe({}, value);
  const std::string text = registry.render();
  EXPECT_NE(text.find("h_bucket{le=\"1\"} 3\n"
                      "h_bucket{le=\"2\"} 4\n"
                      "h_bucket{le=\"4\"} 7\n"
                      "h_bucket{le=\"+Inf\"} 8\n"
                      "h_sum 111.5\n"
                      "h_count 8\n"),
            std::string::npos)
      << text;
  EXPECT_EQ(histogram.count(), 8u);
  EXPECT_EQ(histogram.sum(), 111.5);
}

TEST(Metrics, RemovedSeriesAreNoLongerRendered) {
  MetricsRegistry registry;
  Gauge& step = registry.gauge("step", "Step.", {"name"});
  step.set({"a"}, 1);
  step.set({"b"}, 2);
  step.remove({"a"});
  step.remove({"never-set"});
  EXPECT_EQ(registry.render(), "# HELP step Step.\n# TYPE step gauge\nstep{name=\"b\"} 2\n");
  step.remove({"b"});
  EXPECT_EQ(registry.render(), "");
}

TEST(Metrics, BadNamesAndValuesAreRefusedNamingThem) {
  MetricsRegistry registry;
  EXPECT_EQ(error_of([&] { registry.counter("1st_total", "x"); }),
            "metric name \"1st_total\" is not [a-zA-Z_:][a-zA-Z0-9_:]*");
  EXPECT_EQ(error_of([&] { registry.counter("a-b", "x"); }),
            "metric name \"a-b\" is not [a-zA-Z_:][a-zA-Z0-9_:]*");
  EXPECT_EQ(error_of([&] { registry.counter("", "x"); }),
            "metric name \"\" is not [a-zA-Z_:][a-zA-Z0-9_:]*");
  EXPECT_EQ(error_of([&] { registry.gauge("g", "x", {"a:b"}); }),
            "metric g: label name \"a:b\" is not [a-zA-Z_][a-zA-Z0-9_]*");
  EXPECT_EQ(error_of([&] { registry.gauge("g", "x", {"__name"}); }),
            "metric g: label name __name starts with __, which Prometheus reserves");
  EXPECT_EQ(error_of([&] {
              registry.gauge("g", "x", {"a", "a"});
            }),
            "metric g: label name a given twice");
  EXPECT_EQ(error_of([&] { registry.histogram("h", "x", {"le"}); }),
            "metric h: a histogram may not have the label le (its buckets')");
  EXPECT_EQ(error_of([&] { registry.histogram("h", "x", {}, {}); }), "histogram h: no buckets");
  EXPECT_EQ(error_of([&] {
              registry.histogram("h", "x", {}, {1, 1});
            }),
            "histogram h: bucket bounds must increase, 1 follows 1");
  EXPECT_EQ(error_of([&] {
              registry.histogram("h", "x", {}, {1, std::numeric_limits<double>::infinity()});
            }),
            "histogram h: bucket bound +Inf is not finite (+Inf is implicit)");

  Counter& counter = registry.counter("ns:requests_total", "x", {"verb", "code"});
  EXPECT_EQ(error_of([&] { registry.gauge("ns:requests_total", "again"); }),
            "metric ns:requests_total is registered twice");
  EXPECT_EQ(error_of([&] { counter.inc({"get"}); }),
            "metric ns:requests_total has labels [verb, code], given 1 values [get]");
  EXPECT_EQ(error_of([&] {
              counter.inc({"get", "200"}, -1);
            }),
            "counter ns:requests_total: cannot add -1 (a counter only goes up)");
  EXPECT_EQ(counter.value({"get", "200"}), 0);
}

TEST(Metrics, ConcurrentUpdatesAreAllCounted) {
  MetricsRegistry registry;
  Counter& counter = registry.counter("c_total", "C.", {"worker"});
  Histogram& histogram = registry.histogram("h_seconds", "H.", {}, {0.5});
  constexpr int kThreads = 8;
  constexpr int kIncrements = 20000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kIncrements; ++i) {
        counter.inc({"shared"});
        counter.inc({"w" + std::to_string(t % 2)});
        histogram.observe({}, i % 2 == 0 ? 0.25 : 1.0);
      }
    });
  }
  threads.emplace_back([&] {  // a scrape while they count
    for (int i = 0; i < 200; ++i) EXPECT_NE(registry.render(), "");
  });
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(counter.value({"shared"}), kThreads * kIncrements);
  EXPECT_EQ(counter.value({"w0"}), kThreads / 2 * kIncrements);
  EXPECT_EQ(histogram.count(), static_cast<uint64_t>(kThreads) * kIncrements);
  const std::string text = registry.render();
  EXPECT_NE(text.find("h_seconds_bucket{le=\"0.5\"} " + std::to_string(kThreads * kIncrements / 2)),
            std::string::npos)
      << text;
}

TEST(OperatorMetricsSet, DefinesTheOperatorsFamiliesWithTheirLabels) {
  OperatorMetrics metrics;
  const auto labels = [](const MetricFamily& family) { return family.label_names(); };
  using Names = std::vector<std::string>;
  EXPECT_EQ(labels(metrics.reconcile_total), (Names{"controller", "result"}));
  EXPECT_EQ(labels(metrics.reconcile_seconds), (Names{"controller"}));
  EXPECT_EQ(labels(metrics.workqueue_depth), (Names{"controller"}));
  EXPECT_EQ(labels(metrics.placements_total), (Names{"result"}));
  EXPECT_EQ(labels(metrics.placement_seconds), Names{});
  EXPECT_EQ(labels(metrics.api_requests_total), (Names{"cluster", "verb", "code"}));
  EXPECT_EQ(labels(metrics.trainingjob_step), (Names{"namespace", "name"}));
  EXPECT_EQ(labels(metrics.trainingjob_loss), (Names{"namespace", "name"}));
  EXPECT_EQ(labels(metrics.trainingjob_tokens_per_second), (Names{"namespace", "name"}));
  EXPECT_EQ(labels(metrics.member_reachable), (Names{"cluster"}));
  EXPECT_EQ(metrics.reconcile_seconds.type(), MetricType::kHistogram);
  EXPECT_EQ(metrics.member_reachable.type(), MetricType::kGauge);
  // Before anything happened only the placement histogram (no labels) is rendered.
  const std::string text = metrics.registry.render();
  EXPECT_EQ(text.find("# HELP tessel_placement_seconds "), 0u) << text;
  EXPECT_NE(text.find("# TYPE tessel_placement_seconds histogram\n"), std::string::npos);
  EXPECT_EQ(text.find("# TYPE", text.find("# TYPE") + 1), std::string::npos) << text;
}

TEST(OperatorMetricsSet, CountsApiRequestsAndForgetsJobsThatAreGone) {
  OperatorMetrics metrics;
  const auto hub = metrics.api_request_counter("hub");
  hub("list", 200);
  hub("list", 200);
  hub("create", 0);
  metrics.api_request_counter("member-a")("watch", 410);
  EXPECT_EQ(metrics.api_requests_total.value({"hub", "list", "200"}), 2);
  EXPECT_EQ(metrics.api_requests_total.value({"hub", "create", "0"}), 1);
  EXPECT_EQ(metrics.api_requests_total.value({"member-a", "watch", "410"}), 1);

  metrics.set_job_progress("team-a", "fables", 120, 2.5, 48000);
  metrics.set_job_progress("team-b", "other", 7, 5.25, 1000);
  const std::string text = metrics.registry.render();
  EXPECT_NE(text.find("tessel_trainingjob_loss{namespace=\"team-a\",name=\"fables\"} 2.5\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("tessel_trainingjob_step{namespace=\"team-a\",name=\"fables\"} 120\n"),
            std::string::npos);
  EXPECT_NE(text.find("tessel_trainingjob_tokens_per_second{namespace=\"team-a\",name=\"fables\"} "
                      "48000\n"),
            std::string::npos);
  metrics.forget_job("team-a", "fables");
  const std::string after = metrics.registry.render();
  EXPECT_EQ(after.find("fables"), std::string::npos) << after;
  EXPECT_NE(after.find("tessel_trainingjob_step{namespace=\"team-b\",name=\"other\"} 7\n"),
            std::string::npos);
}

}  // namespace
}  // namespace tessel::server
