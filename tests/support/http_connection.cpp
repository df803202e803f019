#include "tests/support/http_connection.h"

#include <openssl/x509.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

namespace tessel::testing::http {
namespace {

// The connection ended before a request was complete: not an error to answer.
struct ConnectionEnded {};

// The UTF-8 text of every `nid` entry of a certificate subject, in order.
std::vector<std::string> name_entries(const X509_NAME* name, int nid) {
  std::vector<std::string> values;
  for (int index = X509_NAME_get_index_by_NID(name, nid, -1); index >= 0;
       index = X509_NAME_get_index_by_NID(name, nid, index)) {
    const ASN1_STRING* data = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(name, index));
    unsigned char* utf8 = nullptr;
    const int length = ASN1_STRING_to_UTF8(&utf8, data);
    if (length < 0) continue;
    values.emplace_back(reinterpret_cast<const char*>(utf8), static_cast<std::size_t>(length));
    OPENSSL_free(utf8);
  }
  return values;
}

}  // namespace

HttpConnection::HttpConnection(int fd, SSL_CTX* tls) : fd_(fd) {
  if (tls != nullptr) {
    ssl_ = SSL_new(tls);
    if (ssl_ != nullptr) SSL_set_fd(ssl_, fd_);
  }
}

// Without close_notify: the destructor may run on a thread that does not block SIGPIPE.
HttpConnection::~HttpConnection() {
  if (ssl_ != nullptr) SSL_free(ssl_);
  if (fd_ >= 0) ::close(fd_);
}

bool HttpConnection::handshake() {
  if (ssl_ == nullptr) return true;
  if (SSL_accept(ssl_) != 1) return false;
  read_client_certificate();
  return true;
}

void HttpConnection::read_client_certificate() {
  const X509* certificate = SSL_get0_peer_certificate(ssl_);
  if (certificate == nullptr || SSL_get_verify_result(ssl_) != X509_V_OK) return;
  const X509_NAME* subject = X509_get_subject_name(certificate);
  const auto common_names = name_entries(subject, NID_commonName);
  if (!common_names.empty()) client_cn_ = common_names.front();
  client_organizations_ = name_entries(subject, NID_organizationName);
}

bool HttpConnection::fill() {
  if (buffer_pos_ > 0 && buffer_pos_ * 2 >= buffer_.size()) {
    buffer_.erase(0, buffer_pos_);
    buffer_pos_ = 0;
  }
  char chunk[16384];
  while (!cut_.load()) {
    int received;
    if (ssl_ != nullptr) {
      received = SSL_read(ssl_, chunk, sizeof chunk);
      if (received <= 0) return false;  // close_notify, EOF, or an error: the connection ends
    } else {
      received = static_cast<int>(::recv(fd_, chunk, sizeof chunk, 0));
      if (received < 0 && errno == EINTR) continue;
      if (received <= 0) return false;
    }
    buffer_.append(chunk, static_cast<std::size_t>(received));
    return true;
  }
  return false;
}

std::string HttpConnection::read_line(std::size_t max_bytes, int status_when_too_long) {
  std::size_t scanned = 0;  // bytes after buffer_pos_ known to hold no newline
  while (true) {
    const auto newline = buffer_.find('\n', buffer_pos_ + scanned);
    if (newline != std::string::npos) {
      std::size_t end = newline;
      if (end > buffer_pos_ && buffer_[end - 1] == '\r') --end;
      if (end - buffer_pos_ > max_bytes) break;
      std::string line = buffer_.substr(buffer_pos_, end - buffer_pos_);
      buffer_pos_ = newline + 1;
      return line;
    }
    scanned = buffer_.size() - buffer_pos_;
    if (scanned > max_bytes + 1) break;  // + 1: the line's '\r'
    if (!fill()) throw ConnectionEnded{};
  }
  throw RequestError(status_when_too_long,
                     "request line or header longer than " + std::to_string(max_bytes) + " bytes");
}

std::string HttpConnection::read_exact(std::size_t count) {
  while (buffer_.size() - buffer_pos_ < count) {
    if (!fill()) throw ConnectionEnded{};
  }
  std::string bytes = buffer_.substr(buffer_pos_, count);
  buffer_pos_ += count;
  return bytes;
}

std::string HttpConnection::read_chunked_body() {
  std::string body;
  while (true) {
    const std::size_t size = parse_chunk_size(read_line(1024, 400));
    if (size == 0) break;
    if (size > kMaxBodyBytes - body.size()) {
      throw RequestError(413, "request body larger than " + std::to_string(kMaxBodyBytes));
    }
    body += read_exact(size);
    if (!read_line(64, 400).empty()) {
      throw RequestError(400, "malformed chunked body: chunk data longer than its size");
    }
  }
  // Trailer fields are read and dropped, up to the empty line.
  std::size_t trailer_bytes = 0;
  for (std::string line = read_line(kMaxHeadBytes, 431); !line.empty();
       line = read_line(kMaxHeadBytes, 431)) {
    trailer_bytes += line.size();
    if (trailer_bytes > kMaxHeadBytes) throw RequestError(431, "request trailers too large");
  }
  return body;
}

std::optional<RequestHead> HttpConnection::read_request() {
  try {
    RequestHead head;
    std::string line = read_line(kMaxHeadBytes, 400);
    // RFC 9112 section 2.2: ignore empty lines before a request line.
    while (line.empty()) line = read_line(kMaxHeadBytes, 400);
    std::size_t head_bytes = line.size();
    parse_request_line(line, head);
    for (line = read_line(kMaxHeadBytes, 431); !line.empty();
         line = read_line(kMaxHeadBytes, 431)) {
      head_bytes += line.size();
      if (head_bytes > kMaxHeadBytes) throw RequestError(431, "request header too large");
      parse_header_line(line, head);
    }

    const HttpHeaders& headers = head.request.headers;
    const auto transfer_encoding = headers.get("Transfer-Encoding");
    const auto content_length = headers.get("Content-Length");
    std::size_t length = 0;
    const bool chunked = transfer_encoding.has_value();
    if (chunked) {
      if (!equals_ignore_case(*transfer_encoding, "chunked")) {
        throw RequestError(501, "unsupported Transfer-Encoding \"" + *transfer_encoding + "\"");
      }
    } else if (content_length) {
      if (content_length->empty() ||
          content_length->find_first_not_of("0123456789") != std::string::npos ||
          content_length->size() > 18) {
        throw RequestError(400, "malformed Content-Length \"" + *content_length + "\"");
      }
      length = std::stoull(*content_length);
      if (length > kMaxBodyBytes) {
        throw RequestError(413, "request body larger than " + std::to_string(kMaxBodyBytes));
      }
    }
    const auto expect = headers.get("Expect");
    if (expect && head.minor_version >= 1 && (chunked || length > 0)) {
      if (!equals_ignore_case(*expect, "100-continue")) {
        throw RequestError(417, "unsupported Expect \"" + *expect + "\"");
      }
      if (!send("HTTP/1.1 100 Continue\r\n\r\n")) return std::nullopt;
    }
    head.request.body = chunked ? read_chunked_body() : read_exact(length);
    return head;
  } catch (const ConnectionEnded&) {
    return std::nullopt;
  }
}

bool HttpConnection::send(std::string_view bytes) {
  while (!bytes.empty()) {
    if (cut_.load()) return false;
    if (ssl_ != nullptr) {
      const int written = SSL_write(ssl_, bytes.data(), static_cast<int>(bytes.size()));
      if (written <= 0) return false;
      bytes.remove_prefix(static_cast<std::size_t>(written));
    } else {
      const ssize_t written = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (written < 0 && errno == EINTR) continue;
      if (written <= 0) return false;
      bytes.remove_prefix(static_cast<std::size_t>(written));
    }
  }
  return true;
}

void HttpConnection::cut() {
  const std::lock_guard lock(fd_mutex_);
  cut_.store(true);
  if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
}

bool HttpConnection::peer_closed() const {
  if (cut_.load()) return true;
  const std::lock_guard lock(fd_mutex_);
  if (fd_ < 0) return true;
  pollfd entry{fd_, POLLRDHUP, 0};
  return ::poll(&entry, 1, 0) > 0 && (entry.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

void HttpConnection::close() {
  const std::lock_guard lock(fd_mutex_);
  if (ssl_ != nullptr) {
    if (!cut_.load()) SSL_shutdown(ssl_);
    SSL_free(ssl_);
    ssl_ = nullptr;
  }
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
  }
}

}  // namespace tessel::testing::http
