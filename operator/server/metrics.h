// A small Prometheus registry: counters, gauges and histograms, each a family of series keyed by
// label values, rendered in the text exposition format 0.0.4 (what /metrics serves). Thread-safe:
// reconcilers, work queues and Kubernetes clients update series from their own threads while a
// scrape renders. And the operator's own metric set, defined once (OperatorMetrics).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace tessel::server {

// A metric or label name outside Prometheus's grammar, a second family of one name, label values
// that do not match the family's label names, a counter decremented, bad histogram buckets.
class MetricError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// What /metrics answers with (the exposition format's content type).
inline constexpr std::string_view kMetricsContentType = "text/plain; version=0.0.4; charset=utf-8";

// Label values, in the order of the family's label names.
using LabelValues = std::vector<std::string>;

enum class MetricType { kCounter, kGauge, kHistogram };

// One metric family: its name, help, type and label names, and a series per label-value set.
// A family without labels has its one series from the start (rendered as 0); a family with
// labels renders only the series that were touched.
class MetricFamily {
 public:
  MetricFamily(const MetricFamily&) = delete;
  MetricFamily& operator=(const MetricFamily&) = delete;
  virtual ~MetricFamily() = default;

  const std::string& name() const { return name_; }
  MetricType type() const { return type_; }
  const std::vector<std::string>& label_names() const { return label_names_; }

  // Drops the series of these label values (what it described is gone); nothing if absent.
  void remove(const LabelValues& values);

  // Appends the family in the exposition format (nothing when it has no series).
  void render(std::string& out) const;

 protected:
  struct Series {
    double value = 0;                    // counters and gauges
    std::vector<std::uint64_t> buckets;  // histograms: observations <= each bound (not cumulative)
    double sum = 0;
    std::uint64_t count = 0;
  };

  MetricFamily(std::string name, std::string help, MetricType type,
               std::vector<std::string> label_names, std::vector<double> bounds = {});

  // Runs `change` on the series of `values` (created at zero if absent), under the lock.
  void update(const LabelValues& values, const std::function<void(Series&)>& change);
  // A copy of the series of `values`; a zero series when absent.
  Series read(const LabelValues& values) const;

  const std::vector<double> bounds_;  // histograms: the finite upper bounds, increasing

 private:
  void check_values(const LabelValues& values) const;

  const std::string name_;
  const std::string help_;
  const MetricType type_;
  const std::vector<std::string> label_names_;
  mutable std::mutex mutex_;
  std::map<LabelValues, Series> series_;
};

class Counter : public MetricFamily {
 public:
  Counter(std::string name, std::string help, std::vector<std::string> label_names);
  // Throws MetricError for a negative amount: a counter only goes up.
  void inc(const LabelValues& values = {}, double amount = 1);
  double value(const LabelValues& values = {}) const;
};

class Gauge : public MetricFamily {
 public:
  Gauge(std::string name, std::string help, std::vector<std::string> label_names);
  void set(const LabelValues& values, double value);
  void add(const LabelValues& values, double amount);
  double value(const LabelValues& values = {}) const;
};

class Histogram : public MetricFamily {
 public:
  // `bounds`: the buckets' finite upper bounds, strictly increasing; +Inf is implicit.
  Histogram(std::string name, std::string help, std::vector<std::string> label_names,
            std::vector<double> bounds);
  void observe(const LabelValues& values, double value);
  std::uint64_t count(const LabelValues& values = {}) const;
  double sum(const LabelValues& values = {}) const;
};

// Prometheus client libraries' default buckets (seconds): 5 ms to 10 s.
std::vector<double> default_buckets();

// The families of one process. Families live as long as the registry; references stay valid.
class MetricsRegistry {
 public:
  // Each throws MetricError for a bad name, bad label names, or a name already registered.
  Counter& counter(const std::string& name, const std::string& help,
                   std::vector<std::string> label_names = {});
  Gauge& gauge(const std::string& name, const std::string& help,
               std::vector<std::string> label_names = {});
  Histogram& histogram(const std::string& name, const std::string& help,
                       std::vector<std::string> label_names = {},
                       std::vector<double> bounds = default_buckets());

  // Every family in the text exposition format 0.0.4, ordered by name.
  std::string render() const;

 private:
  template <typename Family>
  Family& add(std::unique_ptr<Family> family);

  mutable std::mutex mutex_;
  std::map<std::string, std::unique_ptr<MetricFamily>> families_;
};

// The operator's metrics. Label values: controller is the reconciler's name ("trainingjob",
// "membercluster"); result of a reconcile is "success", "error" or "requeue"; result of a
// placement is "placed", "unschedulable" or "error"; cluster is "hub" or the MemberCluster's name.
struct OperatorMetrics {
  OperatorMetrics();

  MetricsRegistry registry;              // first: the references below point into it
  Counter& reconcile_total;              // {controller, result}
  Histogram& reconcile_seconds;          // {controller}
  Gauge& workqueue_depth;                // {controller}
  Counter& placements_total;             // {result}
  Histogram& placement_seconds;          // no labels
  Counter& api_requests_total;           // {cluster, verb, code}
  Gauge& trainingjob_step;               // {namespace, name}
  Gauge& trainingjob_loss;               // {namespace, name}
  Gauge& trainingjob_tokens_per_second;  // {namespace, name}
  Gauge& member_reachable;               // {cluster}: 1 or 0

  // What a kube::Client of `cluster` is given as ClientOptions::on_response: counts each
  // answer in api_requests_total (code "0": no answer came). Keeps a reference to this object.
  std::function<void(std::string_view verb, int code)> api_request_counter(std::string cluster);

  // A job's progress, and its series dropped when the job is gone.
  void set_job_progress(const std::string& job_namespace, const std::string& name, double step,
                        double loss, double tokens_per_second);
  void forget_job(const std::string& job_namespace, const std::string& name);
};

}  // namespace tessel::server
