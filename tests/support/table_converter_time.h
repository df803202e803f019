// Times in Table cells, as kube-apiserver's printers render them: ages ("13s", "3m54s", "5d")
// from k8s.io/apimachinery/pkg/util/duration.HumanDuration, timestamps as RFC 3339.
#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace tessel::testing {

// An RFC 3339 time ("2026-11-21T23:01:17Z", with an optional fraction and any offset);
// nullopt when it does not parse.
std::optional<std::chrono::system_clock::time_point> parse_rfc3339(const std::string& text);

// duration.HumanDuration: "<invalid>" for durations below -1s, then "0s", "59s", "3m54s",
// "12m", "5h3m", "20h", "3d4h", "30d", "2y45d", "9y".
std::string human_duration(std::chrono::system_clock::duration elapsed);

// The age a printer shows for a timestamp field: "<unknown>" when absent or null,
// "<invalid>" when it does not parse, else human_duration(now - time).
std::string age_cell(const nlohmann::json& timestamp, std::chrono::system_clock::time_point now);

// time.Time.UTC().Format(time.RFC3339) of a timestamp field ("0001-01-01T00:00:00Z" when
// absent, as Go prints a zero time).
std::string rfc3339_cell(const nlohmann::json& timestamp);

}  // namespace tessel::testing
