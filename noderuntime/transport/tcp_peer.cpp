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

// Thrown inside the link's threads; the reason is turned into the link's failure, naming the
// stream unless it concerns the link as a whole.
struct PeerFailure {
  std::string reason;
  bool link_wide = false;
  bool closed_between_frames = false;  // the peer closed the stream cleanly after a frame
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

TcpPeer::TcpPeer(std::vector<UniqueFd> streams, TcpPeerOptions options)
    : options_(std::move(options)), stop_event_(make_eventfd()), last_data_(now()) {
  if (streams.empty()) throw TransportError(options_.name + ": a link needs at least one stream");
  const auto count = static_cast<double>(streams.size());
  // The streams share the link: each is paced at its share of the rate.
  const LinkShape stream_shape{options_.shape.bytes_per_s / count, options_.shape.latency_s};
  for (size_t k = 0; k < streams.size(); ++k) {
    streams_.push_back(
        std::unique_ptr<Stream>(new Stream{static_cast<int>(k),
                                           std::move(streams[k]),
                                           make_eventfd(),
                                           LinkPacer(stream_shape, options_.burst_bytes),
                                           {},
                                           {},
                                           std::nullopt,
                                           {},
                                           {}}));
  }
  for (auto& stream : streams_) {
    Stream& s = *stream;
    s.sender = std::thread([this, &s] { send_loop(s); });
    s.receiver = std::thread([this, &s] { receive_loop(s); });
  }
}

TcpPeer::~TcpPeer() { close(); }

Request TcpPeer::send(const TensorInfo& info, std::span<const std::byte> payload) {
  auto completion = std::make_shared<Completion>();
  MessageHeader header{options_.job_id, info, payload.size()};
  try {
    header.piece_bytes = payload.size();
    encode_header(header);  // refuses what cannot be framed before any piece leaves
  } catch (const TransportError& e) {
    completion->fail(options_.name + ": " + e.what());
    return Request(completion);
  }
  const size_t n = streams_.size();
  const size_t pieces =
      std::clamp<size_t>(payload.size() / std::max<size_t>(options_.min_piece_bytes, 1), 1, n);
  {
    std::lock_guard lock(mu_);
    if (failure_) {
      completion->fail(*failure_);
      return Request(completion);
    }
    header.sequence = next_send_sequence_++;
    auto message = std::make_shared<SendState>(SendState{completion, pieces, std::nullopt});
    const SteadyTime enqueued = now();
    for (size_t i = 0; i < pieces; ++i) {
      const size_t begin = payload.size() * i / pieces;
      const size_t end = payload.size() * (i + 1) / pieces;
      Stream& stream = *streams_[(header.sequence + i) % n];
      Piece piece{header, payload.subspan(begin, end - begin), message, enqueued};
      piece.header.piece_offset = begin;
      piece.header.piece_bytes = end - begin;
      piece.header.stream = static_cast<uint16_t>(stream.index);
      stream.outgoing.push_back(std::move(piece));
    }
  }
  send_cv_.notify_all();
  return Request(completion);
}

Request TcpPeer::recv(const TensorInfo& expected, std::span<std::byte> buffer) {
  auto completion = std::make_shared<Completion>();
  PostedRecv posted{expected, buffer, completion};
  std::unique_lock lock(mu_);
  const MessageKey key = key_of(expected);
  // The oldest message of this key that no receive has taken: complete, or still arriving.
  const auto done = std::find_if(arrived_.begin(), arrived_.end(), [&](const auto& m) {
    return key_of(m.second.header.info) == key;
  });
  const auto arriving = std::find_if(incoming_.begin(), incoming_.end(), [&](const auto& m) {
    return !m.second.target && !m.second.claim && key_of(m.second.header.info) == key;
  });
  const bool take_done =
      done != arrived_.end() && (arriving == incoming_.end() || done->first < arriving->first);
  if (take_done) {
    const Arrived message = std::move(done->second);
    arrived_.erase(done);
    lock.unlock();
    deliver(posted, message);
    return Request(completion);
  }
  if (failure_) {
    completion->fail(*failure_);
    return Request(completion);
  }
  if (arriving != incoming_.end()) {
    arriving->second.claim = std::move(posted);
    ++attached_;
  } else {
    posted_.push_back(std::move(posted));
  }
  if (!waiting_since_) {
    update_waiting_locked();
    for (auto& stream : streams_) signal_event(stream->recv_posted_event.get());
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
    for (auto& stream : streams_) {
      stream->sender.join();
      stream->receiver.join();
    }
  });
}

std::string TcpPeer::stream_reason(const Stream& stream, const std::string& reason) const {
  if (streams_.size() == 1) return reason;
  return "stream " + std::to_string(stream.index) + " of " + std::to_string(streams_.size()) +
         ": " + reason;
}

// ---- sending

void TcpPeer::send_loop(Stream& stream) {
  while (true) {
    Piece piece;
    {
      std::unique_lock lock(mu_);
      send_cv_.wait(lock, [&] { return closing_ || failure_ || !stream.outgoing.empty(); });
      if (closing_ || failure_) return;
      piece = std::move(stream.outgoing.front());
      stream.outgoing.pop_front();
    }
    try {
      send_piece(stream, piece);
      finish_piece(piece.message, std::nullopt);
    } catch (const TransportError& e) {  // not framed after all: the stream would go astray
      finish_piece(piece.message, fail(stream_reason(stream, e.what())));
      return;
    } catch (const PeerFailure& f) {
      const std::string text = fail(f.link_wide ? f.reason : stream_reason(stream, f.reason));
      finish_piece(piece.message, text);
      return;
    }
  }
}

void TcpPeer::finish_piece(const std::shared_ptr<SendState>& message,
                           const std::optional<std::string>& error) {
  std::optional<std::string> outcome;
  {
    std::lock_guard lock(mu_);
    if (error && !message->error) message->error = error;
    if (--message->unfinished > 0) return;
    outcome = message->error;
  }
  if (outcome) {
    message->completion->fail(*outcome);
  } else {
    message->completion->complete();
  }
}

void TcpPeer::send_piece(Stream& stream, Piece& piece) {
  piece.header.piece_crc32c = crc32c(piece.bytes);
  const EncodedHeader header = encode_header(piece.header);
  if (!stream.pacer.shape().shaped()) {
    write_bytes(stream, header);
    write_bytes(stream, piece.bytes);
    return;
  }
  const auto latency = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(stream.pacer.shape().latency_s));
  for (std::span<const std::byte> bytes : {std::span<const std::byte>(header), piece.bytes}) {
    while (!bytes.empty()) {
      const auto part = bytes.first(std::min(bytes.size(), stream.pacer.burst_bytes()));
      const SteadyTime ready = std::max(piece.enqueued, stream.backpressure_floor);
      if (!wait_until_due(stream.pacer.delivery_time(part.size(), ready))) {
        throw PeerFailure{kStopped};
      }
      if (write_bytes(stream, part)) {
        // The peer held the link back: later pieces leave from now on, at the link's rate,
        // rather than all at once to catch up with the schedule.
        stream.backpressure_floor = now() - latency;
      }
      bytes = bytes.subspan(part.size());
    }
  }
}

bool TcpPeer::wait_until_due(SteadyTime due) {
  std::unique_lock lock(mu_);
  return !send_cv_.wait_until(lock, due, [&] { return closing_ || failure_.has_value(); });
}

bool TcpPeer::write_bytes(Stream& stream, std::span<const std::byte> bytes) {
  bool waited = false;
  SteadyTime last_progress = now();
  const int fd = stream.socket.get();
  while (!bytes.empty()) {
    const ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      bytes = bytes.subspan(static_cast<size_t>(n));
      last_progress = now();
      continue;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
      waited = true;
      const SteadyTime deadline = last_progress + options_.io_timeout;
      pollfd fds[2] = {{fd, POLLOUT, 0}, {stop_event_.get(), POLLIN, 0}};
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

void TcpPeer::receive_loop(Stream& stream) {
  try {
    while (true) receive_frame(stream);
  } catch (const PeerFailure& f) {
    if (f.closed_between_frames) {
      // A peer that finishes closes its streams one after another, while the others may still
      // carry the pieces of its last messages: the link fails once every stream is closed (or
      // a waiting receive hears nothing for io_timeout).
      std::lock_guard lock(mu_);
      closed_streams_.push_back(stream.index);
      if (closed_streams_.size() < streams_.size()) return;
    }
    fail(f.link_wide ? f.reason : stream_reason(stream, f.reason));
  }
}

TcpPeer::Incoming& TcpPeer::incoming_for(const MessageHeader& header) {
  const uint64_t sequence = header.sequence;
  std::unique_lock lock(mu_);
  // Messages begin in sequence order: wait until every earlier one has begun on some stream.
  const bool ready = match_cv_.wait_for(lock, options_.io_timeout, [&] {
    return closing_ || failure_ || sequence <= next_to_match_;
  });
  if (closing_ || failure_) throw PeerFailure{kStopped};
  if (!ready) {
    throw PeerFailure{"message " + std::to_string(sequence) + " waited " +
                      seconds_text(options_.io_timeout) + " for message " +
                      std::to_string(next_to_match_) + ", which no stream began"};
  }
  if (sequence < next_to_match_) {
    const auto it = incoming_.find(sequence);
    if (it == incoming_.end()) {
      throw PeerFailure{"a piece of message " + std::to_string(sequence) +
                        ", which is already complete"};
    }
    Incoming& message = it->second;
    if (header.info != message.header.info ||
        header.payload_bytes != message.header.payload_bytes) {
      throw PeerFailure{"a piece of message " + std::to_string(sequence) + " (" +
                        to_string(key_of(header.info)) + ") disagrees with its first piece (" +
                        to_string(key_of(message.header.info)) + ")"};
    }
    if (header.piece_bytes > message.bytes_left) {
      throw PeerFailure{"the pieces of message " + std::to_string(sequence) + " exceed its " +
                        std::to_string(message.header.payload_bytes) + " bytes"};
    }
    ++message.readers;
    return message;
  }
  Incoming message;
  message.header = header;
  message.bytes_left = header.payload_bytes;
  const MessageKey key = key_of(header.info);
  const auto posted = std::find_if(posted_.begin(), posted_.end(),
                                   [&](const PostedRecv& r) { return key_of(r.expected) == key; });
  if (posted != posted_.end()) {
    message.target = std::move(*posted);
    posted_.erase(posted);
    ++attached_;
    try {
      check_expected(options_.job_id, message.target->expected, header);
    } catch (const TransportError& e) {
      message.problem = e.what();
    }
  } else {
    try {
      message.held = std::make_unique_for_overwrite<std::byte[]>(header.payload_bytes);
    } catch (const std::bad_alloc&) {
      throw PeerFailure{"cannot hold a message of " + std::to_string(header.payload_bytes) +
                        " bytes (" + to_string(key) + ")"};
    }
  }
  message.readers = 1;
  ++next_to_match_;
  match_cv_.notify_all();
  return incoming_.emplace(sequence, std::move(message)).first->second;
}

void TcpPeer::receive_frame(Stream& stream) {
  EncodedHeader raw{};
  read_bytes(stream, raw, nullptr);  // a clean close here is between frames
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
  if (header.payload_bytes > options_.max_message_bytes) {
    throw PeerFailure{"a message of " + std::to_string(header.payload_bytes) + " bytes (" +
                      to_string(key_of(header.info)) + ") is larger than the limit of " +
                      std::to_string(options_.max_message_bytes) + " bytes (max_message_bytes)"};
  }
  if (header.stream != stream.index) {
    throw PeerFailure{"a frame of stream " + std::to_string(header.stream) + " arrived here"};
  }
  if (stream.last_sequence && header.sequence <= *stream.last_sequence) {
    throw PeerFailure{"message " + std::to_string(header.sequence) + " after message " +
                      std::to_string(*stream.last_sequence) + " (sequence went back)"};
  }
  stream.last_sequence = header.sequence;

  Incoming* message = nullptr;
  std::span<std::byte> into;
  bool discard = false;
  {
    // The entry stays while this thread counts among its readers.
    message = &incoming_for(header);
    Incoming& entry = *message;
    std::lock_guard lock(mu_);
    const auto offset = static_cast<size_t>(header.piece_offset);
    const auto bytes = static_cast<size_t>(header.piece_bytes);
    if (entry.target) {
      discard = entry.problem.has_value();
      if (!discard) into = entry.target->buffer.subspan(offset, bytes);
    } else {
      into = std::span(entry.held.get() + offset, bytes);
    }
  }

  uint32_t crc = 0;
  try {
    if (discard) {
      discard_bytes(stream, header.piece_bytes, &crc);
    } else {
      read_bytes(stream, into, &crc);
    }
  } catch (const PeerFailure& f) {
    const std::string text = fail(f.link_wide ? f.reason : stream_reason(stream, f.reason));
    std::optional<PostedRecv> target;
    {
      std::lock_guard lock(mu_);
      if (--message->readers == 0) {
        target = std::move(message->target);
        if (target) --attached_;
        incoming_.erase(header.sequence);
        update_waiting_locked();
      }
    }
    if (target) target->completion->fail(text);
    throw PeerFailure{kStopped};
  }

  // Book the piece; the thread that books the last byte completes the message.
  std::optional<PostedRecv> target, claim;
  std::optional<Arrived> for_claim;
  std::optional<std::string> problem;
  {
    std::lock_guard lock(mu_);
    --message->readers;
    message->bytes_left -= header.piece_bytes;
    if (crc != header.piece_crc32c && !message->problem) {
      message->problem = checksum_mismatch(header.piece_crc32c, crc);
      if (header.piece_bytes != header.payload_bytes) {
        *message->problem = "piece of " + std::to_string(header.piece_bytes) + " bytes at offset " +
                            std::to_string(header.piece_offset) + ": " + *message->problem;
      }
    }
    if (message->bytes_left > 0) {
      // The link failed while this piece was read: the last reader fails the receive.
      if (!failure_ || message->readers > 0) return;
      problem = failure_;
    } else if (message->problem) {
      problem = message_error(key_of(header.info), *message->problem);
    }
    target = std::move(message->target);
    claim = std::move(message->claim);
    if (target || claim) --attached_;
    if (!target && message->bytes_left == 0) {
      Arrived done{message->header, std::move(message->held), message->problem};
      if (claim) {
        for_claim = std::move(done);
      } else {
        arrived_.emplace(header.sequence, std::move(done));
      }
    }
    incoming_.erase(header.sequence);
    update_waiting_locked();
  }
  if (for_claim) {
    deliver(*claim, *for_claim);
  } else if (target || claim) {
    const auto& completion = target ? target->completion : claim->completion;
    if (problem) {
      completion->fail(*problem);
    } else {
      completion->complete();
    }
  }
}

void TcpPeer::read_bytes(Stream& stream, std::span<std::byte> out, uint32_t* crc) {
  const size_t wanted = out.size();
  while (!out.empty()) {
    const ssize_t n = ::recv(stream.socket.get(), out.data(), out.size(), MSG_DONTWAIT);
    if (n > 0) {
      const auto got = out.first(static_cast<size_t>(n));
      if (crc) *crc = crc32c_extend(*crc, got);
      out = out.subspan(got.size());
      std::lock_guard lock(mu_);
      last_data_ = now();
      continue;
    }
    // Nothing of `out` read yet: for a header, the peer closed between frames.
    if (n == 0) throw PeerFailure{"connection closed", false, out.size() == wanted};
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
      wait_readable(stream);
      continue;
    }
    if (errno == ECONNRESET) throw PeerFailure{"connection closed (reset by the peer)"};
    throw PeerFailure{std::string("recv: ") + std::strerror(errno)};
  }
}

void TcpPeer::wait_readable(Stream& stream) {
  // The silence timer is the link's: data on any stream counts.
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
  pollfd fds[3] = {{stream.socket.get(), POLLIN, 0},
                   {stop_event_.get(), POLLIN, 0},
                   {stream.recv_posted_event.get(), POLLIN, 0}};
  const int rc = poll(fds, 3, deadline ? poll_timeout_ms(*deadline) : -1);
  if (rc < 0 && errno != EINTR) throw PeerFailure{std::string("poll: ") + std::strerror(errno)};
  if (fds[1].revents) throw PeerFailure{kStopped};
  if (fds[2].revents) drain_event(stream.recv_posted_event.get());
  if (rc == 0) {
    std::lock_guard lock(mu_);
    deadline = silence_deadline();
    if (deadline && now() >= *deadline) {
      std::string reason = "no data for " + seconds_text(options_.io_timeout);
      for (const int closed : closed_streams_) {
        reason += ", stream " + std::to_string(closed) + " of " + std::to_string(streams_.size()) +
                  " closed by the peer";
      }
      throw PeerFailure{reason, true};
    }
  }
}

void TcpPeer::discard_bytes(Stream& stream, uint64_t bytes, uint32_t* crc) {
  std::vector<std::byte> scratch(static_cast<size_t>(std::min<uint64_t>(bytes, kDiscardBytes)));
  while (bytes > 0) {
    const auto piece =
        std::span(scratch).first(static_cast<size_t>(std::min<uint64_t>(bytes, scratch.size())));
    read_bytes(stream, piece, crc);
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
  std::copy_n(message.payload.get(), message.header.payload_bytes, recv.buffer.begin());
  recv.completion->complete();
}

std::string TcpPeer::message_error(const MessageKey& key, const std::string& reason) const {
  return options_.name + ": " + to_string(key) + ": " + reason;
}

// ---- failure

std::string TcpPeer::fail(const std::string& reason) {
  std::vector<std::shared_ptr<Completion>> to_fail;
  std::vector<std::shared_ptr<SendState>> dropped;  // sends with pieces taken off the queues
  std::string text;
  {
    std::lock_guard lock(mu_);
    if (!failure_) failure_ = options_.name + ": " + (closing_ ? "communicator closed" : reason);
    text = *failure_;
    for (auto& r : posted_) to_fail.push_back(std::move(r.completion));
    posted_.clear();
    for (auto it = incoming_.begin(); it != incoming_.end();) {
      Incoming& message = it->second;
      if (message.claim) {
        to_fail.push_back(std::move(message.claim->completion));
        message.claim.reset();
        --attached_;
      }
      if (message.readers > 0) {  // its readers fail its target when they stop
        ++it;
        continue;
      }
      if (message.target) {
        to_fail.push_back(std::move(message.target->completion));
        --attached_;
      }
      it = incoming_.erase(it);
    }
    for (auto& stream : streams_) {
      for (auto& piece : stream->outgoing) dropped.push_back(std::move(piece.message));
      stream->outgoing.clear();
    }
    update_waiting_locked();
  }
  send_cv_.notify_all();
  match_cv_.notify_all();
  signal_event(stop_event_.get());
  for (auto& stream : streams_) shutdown(stream->socket.get(), SHUT_RDWR);
  for (auto& c : to_fail) c->fail(text);
  for (auto& message : dropped) finish_piece(message, text);
  return text;
}

void TcpPeer::update_waiting_locked() {
  const bool waiting = !posted_.empty() || attached_ > 0;
  if (!waiting) {
    waiting_since_.reset();
  } else if (!waiting_since_) {
    waiting_since_ = now();
  }
}

}  // namespace tessel::transport
