// The legacy service-account token controller of kube-controller-manager, as far as a Secret
// written by a user needs it: a Secret of type kubernetes.io/service-account-token whose
// annotation kubernetes.io/service-account.name names an existing ServiceAccount gets
// data.token (a token of ServiceAccountTokens), data.ca.crt (the server's CA) and data.namespace,
// and the annotation kubernetes.io/service-account.uid; a token Secret whose ServiceAccount is
// missing (or has another uid than the annotation says) is deleted, as the controller deletes
// it. It runs on a thread of its own after the changes that may give it work, asynchronously as
// on a real cluster. (Since 1.24 no Secret is made for a ServiceAccount unasked.)
#pragma once

#include <string>

#include "tests/support/api_resources.h"
#include "tests/support/api_service_account_tokens.h"
#include "tests/support/api_store.h"
#include "tests/support/api_verbs.h"
#include "tests/support/background_pass.h"

namespace tessel::testing {

class TokenController {
 public:
  // ca_pem: what data.ca.crt holds ("" for a server without TLS).
  TokenController(ObjectStore& store, ServedResources& resources, ApiVerbs& verbs,
                  ServiceAccountTokens& tokens, std::string ca_pem);
  TokenController(const TokenController&) = delete;
  TokenController& operator=(const TokenController&) = delete;

  // Told of every change (under the store's lock): runs a pass soon after a change to a token
  // Secret or a ServiceAccount.
  void observe(const StoredEvent& change);
  // One pass over every token Secret.
  void run_once();

 private:
  // Fills or deletes one token Secret, as it needs.
  void sync(const nlohmann::json& secret);

  ObjectStore& store_;
  ServedResources& resources_;
  ApiVerbs& verbs_;
  ServiceAccountTokens& tokens_;
  const std::string ca_pem_;
  BackgroundPass pass_;  // last: it stops before the members its passes read go
};

}  // namespace tessel::testing
