// The custom resources the kube/ tests talk about: TrainingJob and MemberCluster as a CRD would
// serve them. kube/ itself knows no custom resource (a client learns them from discovery, or
// the operator registers them from crds/), so its tests name theirs here.
#pragma once

#include "kube/resource.h"

namespace tessel::kube::testing {

inline const ResourceInfo& trainingjobs_resource() {
  static const ResourceInfo info{
      {"tessel.dev", "v1alpha1", "trainingjobs"}, "TrainingJob", true, {"tj"}, {"status"}};
  return info;
}

inline const ResourceInfo& memberclusters_resource() {
  static const ResourceInfo info{
      {"tessel.dev", "v1alpha1", "memberclusters"}, "MemberCluster", false, {"mc"}, {"status"}};
  return info;
}

}  // namespace tessel::kube::testing
