#include "noderuntime/transport/tcp_peer.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "noderuntime/transport/crc32c.h"
#include "noderuntime/transport/transport_error.h"

namespace tessel::transport {
namespace {

// Thrown inside the peer's threads; the reason is turned into the peer's failure.
struct PeerFailure {
  std::string reason;
};

// The reason a thread gives when it stops because the peer already failed or is closing;
// never shown, since fail() keeps the first reason.
constexpr const char* kStopped = "stopped";
constexpr size_t kDiscardBytes = 64 * 1024;

SteadyTime now() { return std::chrono::steady_clock::now(); }

std::string seconds_text(std::chrono::milliseconds ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g s", static_cast<double>(ms.count()) / 1000.0);
  return buf;
}

std::string hex32(uint32_t value) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", value);
  return buf;
}

std::string checksum_mismatch(uint32_t in_header, uint32_t computed) {
  return "payload checksum mismatch (header says " + hex32(in_header) + ", computed " +
         hex32(computed) + ")";
}

UniqueFd make_eventfd() {
  const int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (fd < 0) throw TransportError(std::string("eventfd: ") + std::strerror(errno));
  return UniqueFd(fd);
}

void signal_event(int fd) {
  const uint64_t one = 1;
  [[maybe_unused]] const ssize_t n = write(fd, &one, sizeof one);
}

void drain_event(int fd) {
  uint64_t value = 0;
  [[maybe_unused]] const ssize_t n = read(fd, &value, sizeof value);
}

}  // namespace

TcpPeer::TcpPeer(UniqueFd socket, TcpPeerOptions options)
    : options_(std::move(options)),
      socket_(std::move(socket)),
      stop_event_(make_eventfd()),
      recv_posted_event_(make_eventfd()),
      pacer_(options_.shape, options_.burst_bytes),
      last_data_(now()) {
  sender_ = std::thread([this] { send_loop(); });
  receiver_ = std::thread([this] { receive_loop(); });
}

TcpPeer::~TcpPeer() { close(); }

Request TcpPeer::send(const TensorInfo& info, std::span<const std::byte> payload) {
  auto completion = std::make_shared<Completion>();
  {
    std::lock_guard lock(mu_);
    if (failure_) {
      completion->fail(*failure_);
      return Request(completion);
    }
    outgoing_.push_back(
        {MessageHeader{options_.job_id, info, payload.size(), 0}, payload, completion, now()});
  }
  send_cv_.notify_one();
  return Request(completion);
}

Request TcpPeer::recv(const TensorInfo& expected, std::span<std::byte> buffer) {
  auto completion = std::make_shared<Completion>();
  PostedRecv posted{expected, buffer, completion};
  std::unique_lock lock(mu_);
  const MessageKey key = key_of(expected);
  const auto it = std::find_if(arrived_.begin(), arrived_.end(),
                               [&](const Arrived& m) { return key_of(m.header.info) == key; });
  if (it != arrived_.end()) {
    const Arrived message = std::move(*it);
    arrived_.erase(it);
    lock.unlock();
    deliver(posted, message);
    return Request(completion);
  }
  if (failure_) {
    completion->fail(*failure_);
    return Request(completion);
  }
  posted_.push_back(std::move(posted));
  if (!waiting_since_) {
    update_waiting_locked();
    signal_event(recv_posted_event_.get());
  }
  return Request(completion);
}

void TcpPeer::close() {
  std::call_once(close_once_, [this] {
    {
      std::lock_guard lock(mu_);
      closing_ = true;
    }
    fail("communicator closed");
    sender_.join();
    receiver_.join();
  });
}

// ---- sending

void TcpPeer::send_loop() {
  while (true) {
    Outgoing message;
    {
      std::unique_lock lock(mu_);
      send_cv_.wait(lock, [&] { return closing_ || failure_ || !outgoing_.empty(); });
      if (closing_ || failure_) return;
      message = std::move(outgoing_.front());
      outgoing_.pop_front();
    }
    try {
      send_message(message);
      message.completion->complete();
    } catch (const TransportError& e) {  // this message cannot be encoded; the peer is fine
      message.completion->fail(options_.name + ": " + e.what());
    } catch (const PeerFailure& f) {
      message.completion->fail(fail(f.reason));
      return;
    }
  }
}

void TcpPeer::send_message(Outgoing& message) {
  message.header.payload_crc32c = crc32c(message.payload);
  const EncodedHeader header = encode_header(message.header);
  if (!pacer_.shape().shaped()) {
    write_bytes(header);
    write_bytes(message.payload);
    return;
  }
  const auto latency = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(pacer_.shape().latency_s));
  for (std::span<const std::byte> bytes : {std::span<const std::byte>(header), message.payload}) {
    while (!bytes.empty()) {
      const auto piece = bytes.first(std::min(bytes.size(), pacer_.burst_bytes()));
      const SteadyTime ready = std::max(message.enqueued, backpressure_floor_);
      if (!wait_until_due(pacer_.delivery_time(piece.size(), ready))) throw PeerFailure{kStopped};
      if (write_bytes(piece)) {
        // The peer held the link back: later pieces leave from now on, at the link's rate,
        // rather than all at once to catch up with the schedule.
        backpressure_floor_ = now() - latency;
      }
      bytes = bytes.subspan(piece.size());
    }
  }
}

bool TcpPeer::wait_until_due(SteadyTime due) {
  std::unique_lock lock(mu_);
  return !send_cv_.wait_until(lock, due, [&] { return closing_ || failure_.has_value(); });
}

bool TcpPeer::write_bytes(std::span<const std::byte> bytes) {
  bool waited = false;
  SteadyTime last_progress = now();
  while (!bytes.empty()) {
    const ssize_t n =
        ::send(socket_.get(), bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      bytes = bytes.subspan(static_cast<size_t>(n));
      last_progress = now();
      continue;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
      waited = true;
      const SteadyTime deadline = last_progress + options_.io_timeout;
      pollfd fds[2] = {{socket_.get(), POLLOUT, 0}, {stop_event_.get(), POLLIN, 0}};
      const int rc = poll(fds, 2, poll_timeout_ms(deadline));
      if (rc < 0 && errno != EINTR) throw PeerFailure{std::string("poll: ") + std::strerror(errno)};
      if (fds[1].revents) throw PeerFailure{kStopped};
      if (rc == 0 && now() >= deadline) {
        throw PeerFailure{"no progress sending for " + seconds_text(options_.io_timeout) +
                          " (the peer reads nothing)"};
      }
      continue;
    }
    if (errno == EPIPE || errno == ECONNRESET) throw PeerFailure{"connection closed"};
    throw PeerFailure{std::string("send: ") + std::strerror(errno)};
  }
  return waited;
}

// ---- receiving

void TcpPeer::receive_loop() {
  try {
    while (true) receive_message();
  } catch (const PeerFailure& f) {
    fail(f.reason);
  }
}

void TcpPeer::receive_message() {
  EncodedHeader raw{};
  read_bytes(raw, nullptr);
  MessageHeader header;
  try {
    header = decode_header(raw);
  } catch (const TransportError& e) {
    throw PeerFailure{std::string("bad message header: ") + e.what()};
  }
  if (header.job_id != options_.job_id) {
    throw PeerFailure{"message for job " + std::to_string(header.job_id) + ", this job is " +
                      std::to_string(options_.job_id)};
  }
  const MessageKey key = key_of(header.info);
  const auto matches = [&](const PostedRecv& r) { return key_of(r.expected) == key; };

  std::optional<PostedRecv> target;
  {
    std::lock_guard lock(mu_);
    if (closing_ || failure_) throw PeerFailure{kStopped};
    const auto it = std::find_if(posted_.begin(), posted_.end(), matches);
    if (it != posted_.end()) {
      target = std::move(*it);
      posted_.erase(it);
      filling_posted_ = true;
    }
  }
  if (target) {
    receive_into(*target, header);
    return;
  }

  Arrived message{header, {}, std::nullopt};
  try {
    message.payload.resize(header.payload_bytes);
  } catch (const std::bad_alloc&) {
    throw PeerFailure{"cannot hold a message of " + std::to_string(header.payload_bytes) +
                      " bytes (" + to_string(key) + ")"};
  }
  uint32_t crc = 0;
  read_bytes(message.payload, &crc);
  if (crc != header.payload_crc32c) {
    message.error = checksum_mismatch(header.payload_crc32c, crc);
  }
  {
    std::lock_guard lock(mu_);
    const auto it = std::find_if(posted_.begin(), posted_.end(), matches);
    if (it == posted_.end()) {
      arrived_.push_back(std::move(message));
      return;
    }
    target = std::move(*it);
    posted_.erase(it);
    update_waiting_locked();
  }
  deliver(*target, message);
}

void TcpPeer::receive_into(PostedRecv& target, const MessageHeader& header) {
  const MessageKey key = key_of(header.info);
  std::optional<std::string> problem;
  try {
    try {
      check_expected(options_.job_id, target.expected, header);
    } catch (const TransportError& e) {
      problem = e.what();
    }
    if (problem) {
      discard_bytes(header.payload_bytes);
    } else {
      uint32_t crc = 0;
      read_bytes(target.buffer, &crc);
      if (crc != header.payload_crc32c) {
        problem = checksum_mismatch(header.payload_crc32c, crc);
      }
    }
  } catch (const PeerFailure& f) {
    target.completion->fail(fail(f.reason));
    throw;
  }
  {
    std::lock_guard lock(mu_);
    filling_posted_ = false;
    update_waiting_locked();
  }
  if (problem) {
    target.completion->fail(message_error(key, *problem));
  } else {
    target.completion->complete();
  }
}

void TcpPeer::read_bytes(std::span<std::byte> out, uint32_t* crc) {
  while (!out.empty()) {
    const ssize_t n = ::recv(socket_.get(), out.data(), out.size(), MSG_DONTWAIT);
    if (n > 0) {
      const auto got = out.first(static_cast<size_t>(n));
      if (crc) *crc = crc32c_extend(*crc, got);
      out = out.subspan(got.size());
      std::lock_guard lock(mu_);
      last_data_ = now();
      continue;
    }
    if (n == 0) throw PeerFailure{"connection closed"};
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
      wait_readable();
      continue;
    }
    if (errno == ECONNRESET) throw PeerFailure{"connection closed (reset by the peer)"};
    throw PeerFailure{std::string("recv: ") + std::strerror(errno)};
  }
}

void TcpPeer::wait_readable() {
  const auto silence_deadline = [&]() -> std::optional<SteadyTime> {
    if (!waiting_since_) return std::nullopt;
    return std::max(*waiting_since_, last_data_) + options_.io_timeout;
  };
  std::optional<SteadyTime> deadline;
  {
    std::lock_guard lock(mu_);
    if (closing_ || failure_) throw PeerFailure{kStopped};
    deadline = silence_deadline();
  }
  pollfd fds[3] = {{socket_.get(), POLLIN, 0},
                   {stop_event_.get(), POLLIN, 0},
                   {recv_posted_event_.get(), POLLIN, 0}};
  const int rc = poll(fds, 3, deadline ? poll_timeout_ms(*deadline) : -1);
  if (rc < 0 && errno != EINTR) throw PeerFailure{std::string("poll: ") + std::strerror(errno)};
  if (fds[1].revents) throw PeerFailure{kStopped};
  if (fds[2].revents) drain_event(recv_posted_event_.get());
  if (rc == 0) {
    std::lock_guard lock(mu_);
    deadline = silence_deadline();
    if (deadline && now() >= *deadline) {
      throw PeerFailure{"no data for " + seconds_text(options_.io_timeout)};
    }
  }
}

void TcpPeer::discard_bytes(uint64_t bytes) {
  std::vector<std::byte> scratch(static_cast<size_t>(std::min<uint64_t>(bytes, kDiscardBytes)));
  while (bytes > 0) {
    const auto piece =
        std::span(scratch).first(static_cast<size_t>(std::min<uint64_t>(bytes, scratch.size())));
    read_bytes(piece, nullptr);
    bytes -= piece.size();
  }
}

void TcpPeer::deliver(PostedRecv& recv, const Arrived& message) const {
  const MessageKey key = key_of(message.header.info);
  if (message.error) {
    recv.completion->fail(message_error(key, *message.error));
    return;
  }
  try {
    check_expected(options_.job_id, recv.expected, message.header);
  } catch (const TransportError& e) {
    recv.completion->fail(message_error(key, e.what()));
    return;
  }
  std::copy(message.payload.begin(), message.payload.end(), recv.buffer.begin());
  recv.completion->complete();
}

std::string TcpPeer::message_error(const MessageKey& key, const std::string& reason) const {
  return options_.name + ": " + to_string(key) + ": " + reason;
}

// ---- failure

std::string TcpPeer::fail(const std::string& reason) {
  std::vector<std::shared_ptr<Completion>> to_fail;
  std::string text;
  {
    std::lock_guard lock(mu_);
    if (!failure_) failure_ = options_.name + ": " + (closing_ ? "communicator closed" : reason);
    text = *failure_;
    for (auto& r : posted_) to_fail.push_back(std::move(r.completion));
    for (auto& s : outgoing_) to_fail.push_back(std::move(s.completion));
    posted_.clear();
    outgoing_.clear();
    update_waiting_locked();
  }
  send_cv_.notify_all();
  signal_event(stop_event_.get());
  shutdown(socket_.get(), SHUT_RDWR);
  for (auto& c : to_fail) c->fail(text);
  return text;
}

void TcpPeer::update_waiting_locked() {
  const bool waiting = !posted_.empty() || filling_posted_;
  if (!waiting) {
    waiting_since_.reset();
  } else if (!waiting_since_) {
    waiting_since_ = now();
  }
}

}  // namespace tessel::transport
