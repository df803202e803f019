#include "noderuntime/launcher/local_topology.h"

#include <unistd.h>

#include "placement/full_cost.h"
#include "placement/topology_generate.h"

namespace tessel::launcher {
namespace {

void scale(placement::Link& link, double bandwidth_scale, double latency_scale) {
  link.bandwidth_gbps *= bandwidth_scale;
  link.latency_ms *= latency_scale;
}

double physical_memory_gib() {
  const double pages = static_cast<double>(sysconf(_SC_PHYS_PAGES));
  const double page_bytes = static_cast<double>(sysconf(_SC_PAGE_SIZE));
  return pages > 0 && page_bytes > 0 ? pages * page_bytes / double(1ULL << 30) : 1.0;
}

}  // namespace

placement::Topology job_topology(const LocalJob& job) {
  const TopologySource& source = job.topology;
  placement::Topology topology;
  std::string where;
  if (source.generate) {
    placement::GeoTopologySpec spec = *source.generate;
    spec.devices = job.world_size();
    if (spec.sites > spec.devices) {
      throw LocalJobError(job.source + ": topology.generate.sites: " + std::to_string(spec.sites) +
                          " sites for " + std::to_string(spec.devices) +
                          " devices (stages x replicas); give at most one site per device");
    }
    topology = placement::generate_geo_topology(spec);
    where = job.source + ": topology.generate";
  } else {
    try {
      topology = placement::load_topology_file(source.file);
    } catch (const placement::TopologyError& e) {
      throw LocalJobError(job.source + ": topology.file: " + e.what());
    }
    where = source.file;
  }
  if (topology.size() != job.world_size()) {
    throw LocalJobError(where + ": has " + std::to_string(topology.size()) +
                        " devices, but the job's pipeline.stages x pipeline.replicas is " +
                        std::to_string(job.stages) + " x " + std::to_string(job.replicas) + " = " +
                        std::to_string(job.world_size()) + " (one device per process)");
  }
  if (source.bandwidth_scale != 1 || source.latency_scale != 1) {
    const double bw = source.bandwidth_scale, lat = source.latency_scale;
    scale(topology.intra_site, bw, lat);
    if (topology.inter_site_default) scale(*topology.inter_site_default, bw, lat);
    for (auto& pair : topology.site_pairs) scale(pair.link, bw, lat);
    for (auto& pair : topology.device_pairs) scale(pair.link, bw, lat);
    topology.finalize(where);
  }
  return topology;
}

placement::Topology localize_topology(placement::Topology topology, const ComputeSpeed& speed,
                                      int processes) {
  const placement::FullCostOptions defaults;
  placement::GpuType cpu;
  cpu.name = "local-cpu";
  // The full cost model computes at utilisation x peak: choose the peak that gives the speed.
  cpu.peak_tflops_fp32 = speed.effective_flops_per_s() / defaults.utilisation / 1e12;
  cpu.peak_tflops = cpu.peak_tflops_fp32;
  cpu.memory_gib = physical_memory_gib() / processes + defaults.memory_reserve_gib;
  topology.gpu_types = {cpu};
  for (placement::Device& device : topology.devices) {
    device.gpu = cpu.name;
    device.peak_tflops = cpu.peak_tflops;
    device.memory_gib = cpu.memory_gib;
  }
  topology.finalize(topology.id + " (localized)");
  return topology;
}

}  // namespace tessel::launcher
