// HTTP/1.1 message syntax for the test HTTP server: the request head, request-target decoding,
// chunk sizes and reason phrases. No sockets here; tests/support/http_connection.h reads the
// bytes.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>

#include "tests/support/http_server.h"

namespace tessel::testing::http {

// A request the server cannot serve; answered with `status` (400, 413, 431, 501) and closed.
class RequestError : public std::runtime_error {
 public:
  RequestError(int status, const std::string& message)
      : std::runtime_error(message), status_(status) {}
  int status() const { return status_; }

 private:
  int status_;
};

bool equals_ignore_case(std::string_view a, std::string_view b);

// Whether a comma-separated header value ("keep-alive, Upgrade") lists `token`, in any case.
bool has_token(std::string_view header_value, std::string_view token);

// Decodes %XX escapes; '+' becomes a space only when `plus_is_space` (query strings, as Go's
// url.ParseQuery). A malformed escape throws RequestError(400) naming `what`.
std::string percent_decode(std::string_view text, bool plus_is_space, std::string_view what);

// The parts of a request head, before the body is read.
struct RequestHead {
  HttpServerRequest request;  // method, target, path, query and headers filled in
  int minor_version = 1;      // HTTP/1.<minor>
};

// Parses "METHOD SP target SP HTTP/1.x". Throws RequestError (400, or 505 for another version).
void parse_request_line(std::string_view line, RequestHead& head);

// Parses one "Name: value" header line into head.request.headers. Throws RequestError(400).
void parse_header_line(std::string_view line, RequestHead& head);

// Splits the target ("/a%20b?x=1&y", or the absolute form "http://host/a%20b?x=1" that proxies
// get) into the decoded path and query pairs. Throws RequestError(400).
void decode_target(HttpServerRequest& request);

// The size on a chunk-size line ("1a;name=value"). Throws RequestError(400) when it is not hex.
std::size_t parse_chunk_size(std::string_view line);

// "OK", "Not Found", ...; "Unknown" for a code without a standard phrase.
const char* reason_phrase(int status);

}  // namespace tessel::testing::http
