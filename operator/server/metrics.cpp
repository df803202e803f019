#include "operator/server/metrics.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <set>
#include <utility>

namespace tessel::server {
namespace {

// [a-zA-Z_:][a-zA-Z0-9_:]* for metric names; label names as well but without ':'.
bool is_name(std::string_view name, bool colons) {
  if (name.empty()) return false;
  const auto allowed = [&](char c, bool first) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (colons && c == ':') ||
           (!first && c >= '0' && c <= '9');
  };
  if (!allowed(name.front(), true)) return false;
  return std::all_of(name.begin() + 1, name.end(), [&](char c) { return allowed(c, false); });
}

void check_names(const std::string& name, const std::vector<std::string>& label_names,
                 MetricType type) {
  if (!is_name(name, true))
    throw MetricError("metric name \"" + name + "\" is not [a-zA-Z_:][a-zA-Z0-9_:]*");
  std::set<std::string> seen;
  for (const std::string& label : label_names) {
    if (!is_name(label, false))
      throw MetricError("metric " + name + ": label name \"" + label +
                        "\" is not [a-zA-Z_][a-zA-Z0-9_]*");
    if (label.starts_with("__"))
      throw MetricError("metric " + name + ": label name " + label +
                        " starts with __, which Prometheus reserves");
    if (type == MetricType::kHistogram && label == "le")
      throw MetricError("metric " + name +
                        ": a histogram may not have the label le (its buckets')");
    if (!seen.insert(label).second)
      throw MetricError("metric " + name + ": label name " + label + " given twice");
  }
}

std::string_view type_name(MetricType type) {
  switch (type) {
    case MetricType::kCounter:
      return "counter";
    case MetricType::kGauge:
      return "gauge";
    case MetricType::kHistogram:
      return "histogram";
  }
  return "untyped";
}

// As Prometheus writes floats: +Inf, -Inf, NaN, else the shortest text that reads back exactly.
std::string format_value(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  char text[32];
  const auto end = std::to_chars(text, text + sizeof text, value).ptr;
  return std::string(text, end);
}

// Label values: backslash, double quote and line feed escaped. HELP text: backslash and line feed.
std::string escaped(std::string_view text, bool quotes) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (quotes && c == '"') {
      out += "\\\"";
    } else {
      out += c;
    }
  }
  return out;
}

// {a="x",b="y"} with `extra` (le="...") last; "" when there is no label at all.
std::string label_text(const std::vector<std::string>& names, const LabelValues& values,
                       const std::string& extra = "") {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    out += (out.empty() ? "" : ",") + names[i] + "=\"" + escaped(values[i], true) + "\"";
  }
  if (!extra.empty()) out += (out.empty() ? "" : ",") + extra;
  return out.empty() ? "" : "{" + out + "}";
}

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& name : names) out += (out.empty() ? "" : ", ") + name;
  return "[" + out + "]";
}

}  // namespace

MetricFamily::MetricFamily(std::string name, std::string help, MetricType type,
                           std::vector<std::string> label_names, std::vector<double> bounds)
    : bounds_(std::move(bounds)),
      name_(std::move(name)),
      help_(std::move(help)),
      type_(type),
      label_names_(std::move(label_names)) {
  check_names(name_, label_names_, type_);
  if (label_names_.empty()) update({}, [](Series&) {});
}

void MetricFamily::check_values(const LabelValues& values) const {
  if (values.size() != label_names_.size())
    throw MetricError("metric " + name_ + " has labels " + joined(label_names_) + ", given " +
                      std::to_string(values.size()) + " values " + joined(values));
}

void MetricFamily::update(const LabelValues& values, const std::function<void(Series&)>& change) {
  check_values(values);
  std::lock_guard lock(mutex_);
  auto [at, added] = series_.try_emplace(values);
  if (added && type_ == MetricType::kHistogram) at->second.buckets.assign(bounds_.size(), 0);
  change(at->second);
}

MetricFamily::Series MetricFamily::read(const LabelValues& values) const {
  check_values(values);
  std::lock_guard lock(mutex_);
  const auto found = series_.find(values);
  return found == series_.end() ? Series{} : found->second;
}

void MetricFamily::remove(const LabelValues& values) {
  check_values(values);
  std::lock_guard lock(mutex_);
  series_.erase(values);
}

void MetricFamily::render(std::string& out) const {
  std::lock_guard lock(mutex_);
  if (series_.empty()) return;
  out += "# HELP " + name_ + " " + escaped(help_, false) + "\n";
  out += "# TYPE " + name_ + " " + std::string(type_name(type_)) + "\n";
  for (const auto& [values, series] : series_) {
    if (type_ != MetricType::kHistogram) {
      out += name_ + label_text(label_names_, values) + " " + format_value(series.value) + "\n";
      continue;
    }
    std::uint64_t cumulative = 0;
    for (size_t i = 0; i < bounds_.size(); ++i) {
      cumulative += series.buckets[i];
      out += name_ + "_bucket" +
             label_text(label_names_, values, "le=\"" + format_value(bounds_[i]) + "\"") + " " +
             std::to_string(cumulative) + "\n";
    }
    out += name_ + "_bucket" + label_text(label_names_, values, "le=\"+Inf\"") + " " +
           std::to_string(series.count) + "\n";
    out +=
        name_ + "_sum" + label_text(label_names_, values) + " " + format_value(series.sum) + "\n";
    out += name_ + "_count" + label_text(label_names_, values) + " " +
           std::to_string(series.count) + "\n";
  }
}

Counter::Counter(std::string name, std::string help, std::vector<std::string> label_names)
    : MetricFamily(std::move(name), std::move(help), MetricType::kCounter, std::move(label_names)) {
}

void Counter::inc(const LabelValues& values, double amount) {
  if (!(amount >= 0))
    throw MetricError("counter " + this->name() + ": cannot add " + format_value(amount) +
                      " (a counter only goes up)");
  update(values, [&](Series& series) { series.value += amount; });
}

double Counter::value(const LabelValues& values) const { return read(values).value; }

Gauge::Gauge(std::string name, std::string help, std::vector<std::string> label_names)
    : MetricFamily(std::move(name), std::move(help), MetricType::kGauge, std::move(label_names)) {}

void Gauge::set(const LabelValues& values, double value) {
  update(values, [&](Series& series) { series.value = value; });
}

void Gauge::add(const LabelValues& values, double amount) {
  update(values, [&](Series& series) { series.value += amount; });
}

double Gauge::value(const LabelValues& values) const { return read(values).value; }

namespace {

std::vector<double> checked_bounds(const std::string& name, std::vector<double> bounds) {
  if (bounds.empty()) throw MetricError("histogram " + name + ": no buckets");
  for (size_t i = 0; i < bounds.size(); ++i) {
    if (!std::isfinite(bounds[i]))
      throw MetricError("histogram " + name + ": bucket bound " + format_value(bounds[i]) +
                        " is not finite (+Inf is implicit)");
    if (i > 0 && !(bounds[i] > bounds[i - 1]))
      throw MetricError("histogram " + name + ": bucket bounds must increase, " +
                        format_value(bounds[i]) + " follows " + format_value(bounds[i - 1]));
  }
  return bounds;
}

}  // namespace

Histogram::Histogram(std::string name, std::string help, std::vector<std::string> label_names,
                     std::vector<double> bounds)
    : MetricFamily(name, std::move(help), MetricType::kHistogram, std::move(label_names),
                   checked_bounds(name, std::move(bounds))) {}

void Histogram::observe(const LabelValues& values, double value) {
  // The first bucket whose bound is >= value; none (only +Inf) past the last, or for NaN.
  const size_t bucket =
      std::isnan(value) ? bounds_.size()
                        : std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin();
  update(values, [&](Series& series) {
    if (bucket < series.buckets.size()) ++series.buckets[bucket];
    series.sum += value;
    ++series.count;
  });
}

std::uint64_t Histogram::count(const LabelValues& values) const { return read(values).count; }

double Histogram::sum(const LabelValues& values) const { return read(values).sum; }

std::vector<double> default_buckets() {
  return {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
}

template <typename Family>
Family& MetricsRegistry::add(std::unique_ptr<Family> family) {
  std::lock_guard lock(mutex_);
  Family& added = *family;
  if (!families_.try_emplace(family->name(), std::move(family)).second)
    throw MetricError("metric " + added.name() + " is registered twice");
  return added;
}

Counter& MetricsRegistry::counter(const std::string& name, const std::string& help,
                                  std::vector<std::string> label_names) {
  return add(std::make_unique<Counter>(name, help, std::move(label_names)));
}

Gauge& MetricsRegistry::gauge(const std::string& name, const std::string& help,
                              std::vector<std::string> label_names) {
  return add(std::make_unique<Gauge>(name, help, std::move(label_names)));
}

Histogram& MetricsRegistry::histogram(const std::string& name, const std::string& help,
                                      std::vector<std::string> label_names,
                                      std::vector<double> bounds) {
  return add(std::make_unique<Histogram>(name, help, std::move(label_names), std::move(bounds)));
}

std::string MetricsRegistry::render() const {
  std::lock_guard lock(mutex_);
  std::string out;
  for (const auto& [name, family] : families_) family->render(out);
  return out;
}

namespace {

// A placement runs the evolutionary search: from milliseconds for a few GPUs to minutes for
// thousands of evaluations over a large topology.
std::vector<double> placement_buckets() {
  return {0.01, 0.05, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300};
}

}  // namespace

OperatorMetrics::OperatorMetrics()
    : reconcile_total(registry.counter("tessel_reconcile_total",
                                       "Reconciles by controller and result (success, error, "
                                       "requeue).",
                                       {"controller", "result"})),
      reconcile_seconds(registry.histogram(
          "tessel_reconcile_seconds", "Time one reconcile took, by controller.", {"controller"})),
      workqueue_depth(registry.gauge("tessel_workqueue_depth",
                                     "Keys waiting in a controller's work queue.", {"controller"})),
      placements_total(registry.counter(
          "tessel_placements_total",
          "Placements of TrainingJobs by result (placed, unschedulable, error).", {"result"})),
      placement_seconds(registry.histogram(
          "tessel_placement_seconds", "Time one placement search took.", {}, placement_buckets())),
      api_requests_total(registry.counter(
          "tessel_api_requests_total",
          "Kubernetes API requests by cluster, verb and HTTP status code (0: no answer).",
          {"cluster", "verb", "code"})),
      trainingjob_step(registry.gauge("tessel_trainingjob_step",
                                      "The last training step a TrainingJob reported.",
                                      {"namespace", "name"})),
      trainingjob_loss(registry.gauge("tessel_trainingjob_loss",
                                      "The training loss a TrainingJob last reported.",
                                      {"namespace", "name"})),
      trainingjob_tokens_per_second(registry.gauge(
          "tessel_trainingjob_tokens_per_second",
          "The training throughput a TrainingJob last reported, in tokens per second.",
          {"namespace", "name"})),
      member_reachable(registry.gauge("tessel_member_reachable",
                                      "1 when the operator reaches a member cluster's API, else 0.",
                                      {"cluster"})) {}

std::function<void(std::string_view, int)> OperatorMetrics::api_request_counter(
    std::string cluster) {
  return [this, cluster = std::move(cluster)](std::string_view verb, int code) {
    api_requests_total.inc({cluster, std::string(verb), std::to_string(code)});
  };
}

void OperatorMetrics::set_job_progress(const std::string& job_namespace, const std::string& name,
                                       double step, double loss, double tokens_per_second) {
  trainingjob_step.set({job_namespace, name}, step);
  trainingjob_loss.set({job_namespace, name}, loss);
  trainingjob_tokens_per_second.set({job_namespace, name}, tokens_per_second);
}

void OperatorMetrics::forget_job(const std::string& job_namespace, const std::string& name) {
  for (Gauge* gauge : {&trainingjob_step, &trainingjob_loss, &trainingjob_tokens_per_second})
    gauge->remove({job_namespace, name});
}

}  // namespace tessel::server
