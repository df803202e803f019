// A server's PEM certificate chain and private key checked before a server is started with them,
// so that a wrong file is named at start-up rather than as failed handshakes later.
#pragma once

#include <string>

namespace tessel::server {

// Throws std::invalid_argument saying what is wrong: the certificate or the key is not PEM (or
// does not parse), or the key is not the certificate's.
void check_tls_key_pair(const std::string& cert_pem, const std::string& key_pem);

}  // namespace tessel::server
