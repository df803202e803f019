#include "noderuntime/launcher/blame.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <functional>
#include <map>
#include <set>

namespace tessel::launcher {
namespace {

constexpr const char* kTimeoutPhrases[] = {"no data for", "no progress sending for", "timed out"};
constexpr const char* kClosedPhrases[] = {"connection closed", "communicator closed",
                                          "reset by the peer"};
constexpr std::streamoff kLogTailBytes = 64 * 1024;
constexpr size_t kLogLineChars = 1000;

bool contains_any(const std::string& text, const auto& phrases) {
  for (const char* phrase : phrases) {
    if (text.find(phrase) != std::string::npos) return true;
  }
  return false;
}

// "ranks 0 and 2", "rank 0", "ranks 0, 2 and 3"
std::string rank_list(const std::vector<int>& ranks) {
  std::string text = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (i > 0) text += i + 1 == ranks.size() ? " and " : ", ";
    text += std::to_string(ranks[i]);
  }
  return text;
}

class Judge {
 public:
  explicit Judge(const std::vector<RankEnd>& ranks) : ranks_(ranks) {
    const int world = static_cast<int>(ranks.size());
    for (const RankEnd& r : ranks) {
      if (!r.error) continue;
      const auto complaint = peer_complaint(*r.error, r.rank, world);
      if (!complaint) {
        // An error of its own that blames another tasklet ("not starting: stage 1 replica 0
        // (rank 1) could not load its checkpoint") refers the blame to it.
        const std::vector<int> named = ranks_named(*r.error, r.rank, world);
        for (int other : named) referred_to_[other].push_back(r.rank);
        if (!named.empty()) refers_.insert(r.rank);
        continue;
      }
      complains_[r.rank] = complaint->kind;
      auto& named = complaint->kind == PeerComplaint::Kind::kTimeout ? timed_out_on_ : closed_on_;
      for (int peer : complaint->ranks) named[peer].push_back(r.rank);
    }
  }

  Blame judge() const {
    std::vector<int> bad;
    for (const RankEnd& r : ranks_) {
      if (r.ended_badly) bad.push_back(r.rank);
    }
    std::sort(bad.begin(), bad.end(),
              [&](int a, int b) { return ranks_[a].order < ranks_[b].order; });
    auto first_of = [&](const std::function<bool(const RankEnd&)>& test) -> std::optional<int> {
      for (int rank : bad) {
        if (test(ranks_[rank])) return rank;
      }
      return std::nullopt;
    };
    if (auto r = first_of([](const RankEnd& e) { return e.exit && e.exit->signaled; })) {
      return {*r, ended(*r)};
    }
    if (auto r = first_of([](const RankEnd& e) { return !e.error; })) return {*r, ended(*r)};
    auto own = [&](const RankEnd& e) { return !complains_.count(e.rank); };
    if (auto r = first_of([&](const RankEnd& e) { return own(e) && !refers_.count(e.rank); })) {
      return {*r, ended(*r)};
    }
    if (auto r = most_named(referred_to_, [](int) { return true; })) return {*r, ended(*r)};
    // Stopped answering: named by timeouts, silent itself.
    if (auto r = most_named(timed_out_on_, [&](int rank) { return !complains_.count(rank); })) {
      return {*r, stopped_answering(*r)};
    }
    for (const RankEnd& e : ranks_) {
      if (e.stopped_by || e.unresponsive) return {e.rank, stopped_answering(e.rank)};
    }
    if (auto r = most_named(timed_out_on_, [](int) { return true; })) {
      return {*r, stopped_answering(*r)};
    }
    if (auto r = most_named(closed_on_, [](int) { return true; })) return {*r, ended(*r)};
    if (auto r = first_of(own)) return {*r, ended(*r)};
    return {bad.front(), ended(bad.front())};
  }

 private:
  std::optional<int> most_named(const std::map<int, std::vector<int>>& named,
                                const std::function<bool(int)>& eligible) const {
    std::optional<int> best;
    for (const auto& [rank, complainers] : named) {
      if (!eligible(rank)) continue;
      if (!best || complainers.size() > named.at(*best).size()) best = rank;
    }
    return best;
  }

  std::string prefix(int rank) const {
    const RankEnd& e = ranks_[rank];
    return e.label + " (rank " + std::to_string(rank) + ") (pid " + std::to_string(e.pid) + ")";
  }

  std::string suffix(int rank) const {
    std::string text;
    const int others = static_cast<int>(ranks_.size()) - 1;
    if (others > 0) text += "; the other " + std::to_string(others) + " stopped";
    return text + " (log: " + ranks_[rank].log_path + ")";
  }

  // "stage 0 replica 1 (rank 2) (pid 123) exited with status 1: <its error>; ..."
  std::string ended(int rank) const {
    const RankEnd& e = ranks_[rank];
    std::string text = prefix(rank) + " " + (e.exit ? e.exit->describe() : "did not end");
    if (e.error) text += ": " + *e.error;
    const auto referred = referred_to_.find(rank);
    if (referred != referred_to_.end() && !e.error) {
      text += " (" + rank_list(referred->second) + " name it)";
    }
    const auto closed = closed_on_.find(rank);
    if (closed != closed_on_.end() && !e.ended_badly) {
      text += " (" + rank_list(closed->second) + " lost the connection to it)";
    }
    return text + suffix(rank);
  }

  // "stage 1 replica 0 (rank 1) (pid 123) stopped answering: ranks 0 and 2 timed out waiting
  // for it (rank 0: ...); it was stopped by SIGSTOP; it was killed by SIGKILL; ..."
  std::string stopped_answering(int rank) const {
    const RankEnd& e = ranks_[rank];
    std::vector<std::string> evidence;
    const auto waited = timed_out_on_.find(rank);
    if (waited != timed_out_on_.end()) {
      const int first = waited->second.front();
      evidence.push_back(rank_list(waited->second) + " timed out waiting for it (rank " +
                         std::to_string(first) + ": " + *ranks_[first].error + ")");
    }
    if (e.stopped_by) evidence.push_back("it was stopped by " + signal_name(*e.stopped_by));
    if (e.unresponsive) evidence.push_back("it did not stop within the grace period");
    if (e.exit) {
      std::string fate = "it " + e.exit->describe();
      if (e.error) fate += ": " + *e.error;
      evidence.push_back(fate);
    }
    std::string text = prefix(rank) + " stopped answering";
    for (size_t i = 0; i < evidence.size(); ++i) text += (i == 0 ? ": " : "; ") + evidence[i];
    return text + suffix(rank);
  }

  const std::vector<RankEnd>& ranks_;
  std::map<int, PeerComplaint::Kind> complains_;  // rank -> what it complained of
  std::map<int, std::vector<int>> timed_out_on_;  // rank -> the ranks that timed out on it
  std::map<int, std::vector<int>> closed_on_;     // rank -> the ranks that lost it
  std::map<int, std::vector<int>> referred_to_;   // rank -> the ranks whose own errors name it
  std::set<int> refers_;                          // ranks whose own error names another
};

}  // namespace

std::vector<int> ranks_named(const std::string& message, int own_rank, int world) {
  std::vector<int> ranks;
  for (size_t at = message.find("rank "); at != std::string::npos;
       at = message.find("rank ", at + 1)) {
    if (at > 0 && std::isalnum(static_cast<unsigned char>(message[at - 1]))) continue;
    size_t end = at + 5;
    while (end < message.size() && std::isdigit(static_cast<unsigned char>(message[end]))) ++end;
    const size_t digits = end - at - 5;
    if (digits == 0 || digits > 9) continue;
    // "rank 3 (127.0.0.1:40123, ...)" as the transport names a peer, "stage 1 replica 0 (rank 3)"
    // as the stage runtime names another tasklet.
    const bool peer_form = message.compare(end, 2, " (") == 0;
    const bool tasklet_form = at > 0 && message[at - 1] == '(' && message.compare(end, 1, ")") == 0;
    if (!peer_form && !tasklet_form) continue;
    const int rank = std::stoi(message.substr(at + 5, digits));
    if (rank == own_rank || rank < 0 || rank >= world) continue;
    if (std::find(ranks.begin(), ranks.end(), rank) == ranks.end()) ranks.push_back(rank);
  }
  return ranks;
}

std::optional<PeerComplaint> peer_complaint(const std::string& message, int own_rank, int world) {
  const bool timeout = contains_any(message, kTimeoutPhrases);
  if (!timeout && !contains_any(message, kClosedPhrases)) return std::nullopt;
  PeerComplaint complaint;
  complaint.kind = timeout ? PeerComplaint::Kind::kTimeout : PeerComplaint::Kind::kClosed;
  complaint.ranks = ranks_named(message, own_rank, world);
  if (complaint.ranks.empty()) return std::nullopt;
  return complaint;
}

Blame assign_blame(const std::vector<RankEnd>& ranks) { return Judge(ranks).judge(); }

std::optional<std::string> error_line_of_log(const std::string& log_path) {
  std::ifstream in(log_path, std::ios::binary);
  if (!in) return std::nullopt;
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  if (size <= 0) return std::nullopt;
  const std::streamoff from = std::max<std::streamoff>(0, size - kLogTailBytes);
  in.seekg(from);
  std::string tail(static_cast<size_t>(size - from), '\0');
  in.read(tail.data(), static_cast<std::streamsize>(tail.size()));
  tail.resize(static_cast<size_t>(std::max<std::streamsize>(0, in.gcount())));
  std::optional<std::string> last, last_error;
  size_t start = from > 0 ? tail.find('\n') + 1 : 0;  // a partial first line is left out
  while (start < tail.size()) {
    size_t end = tail.find('\n', start);
    if (end == std::string::npos) end = tail.size();
    std::string line = tail.substr(start, end - start);
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
    if (!line.empty()) {
      last = line;
      if (line.find("error") != std::string::npos) last_error = line;
    }
    start = end + 1;
  }
  std::optional<std::string> chosen = last_error ? last_error : last;
  if (chosen && chosen->size() > kLogLineChars) chosen = chosen->substr(0, kLogLineChars) + "...";
  return chosen;
}

}  // namespace tessel::launcher
