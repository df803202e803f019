// The one file that knows cpprestsdk: http_listener over TLS (boost::asio::ssl) serving an
// HttpsHandler.
#include <cpprest/http_listener.h>

#include <boost/asio/ssl.hpp>

#include "operator/server/https_server.h"

namespace tessel::server {
namespace {

using web::http::http_request;
using web::http::experimental::listener::http_listener;
using web::http::experimental::listener::http_listener_config;

void reply(const http_request& request, const HttpsResponse& response) {
  web::http::http_response answer(static_cast<web::http::status_code>(response.status));
  answer.set_body(response.body, response.content_type);
  for (const auto& [name, value] : response.headers) answer.headers().add(name, value);
  request.reply(answer).wait();
}

class CpprestServer : public HttpsServer {
 public:
  CpprestServer(const std::string& url, const std::string& cert_pem, const std::string& key_pem,
                HttpsHandler handler)
      : url_(url), handler_(std::move(handler)) {
    http_listener_config config;
    config.set_ssl_context_callback([cert_pem, key_pem](boost::asio::ssl::context& context) {
      context.set_options(
          boost::asio::ssl::context::default_workarounds | boost::asio::ssl::context::no_sslv2 |
          boost::asio::ssl::context::no_sslv3 | boost::asio::ssl::context::no_tlsv1 |
          boost::asio::ssl::context::no_tlsv1_1);
      context.use_certificate_chain(boost::asio::buffer(cert_pem));
      context.use_private_key(boost::asio::buffer(key_pem), boost::asio::ssl::context::pem);
    });
    listener_ = std::make_unique<http_listener>(utility::conversions::to_string_t(url), config);
    listener_->support([this](http_request request) { serve(request); });
    try {
      listener_->open().wait();
    } catch (const std::exception& e) {
      throw HttpsServerError(url + ": cannot serve: " + e.what());
    }
  }

  ~CpprestServer() override {
    try {
      listener_->close().wait();
    } catch (const std::exception&) {
      // closing a listener that failed: nothing left to release
    }
  }

  std::string url() const override { return url_; }

 private:
  void serve(const http_request& request) {
    try {
      const auto length = request.headers().content_length();
      if (length > kMaxRequestBytes) {
        reply(request, {413, "text/plain",
                        "request body larger than " + std::to_string(kMaxRequestBytes) + " bytes"});
        return;
      }
      HttpsRequest in;
      in.method = request.method();
      in.path = utility::conversions::to_utf8string(request.relative_uri().path());
      const std::vector<unsigned char> bytes = request.extract_vector().get();
      if (bytes.size() > kMaxRequestBytes) {
        reply(request, {413, "text/plain", "request body too large"});
        return;
      }
      in.body.assign(bytes.begin(), bytes.end());
      reply(request, handler_(in));
    } catch (const std::exception& e) {
      try {
        reply(request, {500, "text/plain", e.what()});
      } catch (const std::exception&) {
        // the client went away: nothing to answer
      }
    }
  }

  std::string url_;
  HttpsHandler handler_;
  std::unique_ptr<http_listener> listener_;
};

}  // namespace

std::unique_ptr<HttpsServer> start_https_server(const std::string& host, uint16_t port,
                                                const std::string& cert_pem,
                                                const std::string& key_pem, HttpsHandler handler) {
  const std::string url = "https://" + host + ":" + std::to_string(port) + "/";
  if (cert_pem.find("-----BEGIN") == std::string::npos)
    throw HttpsServerError(url + ": the certificate is not PEM");
  if (key_pem.find("-----BEGIN") == std::string::npos)
    throw HttpsServerError(url + ": the key is not PEM");
  return std::make_unique<CpprestServer>(url, cert_pem, key_pem, std::move(handler));
}

}  // namespace tessel::server
