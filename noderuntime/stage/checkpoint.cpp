#include "noderuntime/stage/checkpoint.h"

#include <filesystem>
#include <functional>
#include <span>

#include "noderuntime/stage/checkpoint_manifest.h"
#include "noderuntime/stage/checkpoint_rank_file.h"
#include "noderuntime/transport/crc32c.h"
#include "placement/atomic_file.h"

namespace tessel::stage {
namespace {

namespace fs = std::filesystem;

// A rank's file in 16-bit pieces, exact as floats: size (4 pieces) and CRC32C (2 pieces).
constexpr int kPiecesPerRank = 6;

void put_pieces(float* out, uint64_t bytes, uint32_t crc) {
  for (int i = 0; i < 4; ++i) out[i] = static_cast<float>((bytes >> (16 * i)) & 0xFFFF);
  out[4] = static_cast<float>(crc & 0xFFFF);
  out[5] = static_cast<float>(crc >> 16);
}

std::pair<uint64_t, uint32_t> get_pieces(const float* in) {
  uint64_t bytes = 0;
  for (int i = 0; i < 4; ++i) bytes |= static_cast<uint64_t>(in[i]) << (16 * i);
  const uint32_t crc = static_cast<uint32_t>(in[4]) | static_cast<uint32_t>(in[5]) << 16;
  return {bytes, crc};
}

}  // namespace

void save_checkpoint(const std::string& dir, StageRuntime& runtime, transport::Communicator& comm,
                     const CheckpointPruning& pruning, CheckpointDirs dirs) {
  const int64_t step = runtime.steps_done();
  const std::string where = "checkpoint step " + std::to_string(step) + ": ";
  if (pruning.keep < 1) {
    throw CheckpointError(where + "keep is " + std::to_string(pruning.keep) +
                          ", at least 1 checkpoint must be kept");
  }
  const SafetensorsFile file = rank_file_of(runtime, where);
  const std::string step_dir = checkpoint_step_dir(dir, step);
  std::error_code error;
  fs::create_directories(step_dir, error);
  if (error) {
    throw CheckpointError(where + step_dir + ": cannot create the folder: " + error.message());
  }
  const std::vector<std::byte> bytes = encode_safetensors(file);
  const std::string path = checkpoint_rank_file(dir, step, comm.rank());
  try {
    placement::write_file_atomically(path, [&](std::ostream& out) {
      out.write(reinterpret_cast<const char*>(bytes.data()),
                static_cast<std::streamsize>(bytes.size()));
    });
  } catch (const placement::FileWriteError& e) {
    throw CheckpointError(where + e.what());
  }

  // Every rank's file size and checksum to every rank; once it returns, every file is in place.
  const std::vector<int> world = runtime.layout().world();
  std::vector<float> pieces(world.size() * kPiecesPerRank, 0.0f);
  put_pieces(&pieces[static_cast<size_t>(comm.rank()) * kPiecesPerRank], bytes.size(),
             transport::crc32c(bytes));
  comm.all_reduce(pieces.data(), pieces.size(), transport::DType::kF32, world);
  if (dirs == CheckpointDirs::kShared && comm.rank() != 0) return;

  std::vector<std::pair<uint64_t, uint32_t>> files;
  for (size_t rank = 0; rank < world.size(); ++rank) {
    files.push_back(get_pieces(&pieces[rank * kPiecesPerRank]));
  }
  const std::string text = manifest_text(runtime, step, files);
  try {
    placement::write_file_atomically(checkpoint_step_manifest(dir, step), text);
    placement::write_file_atomically(checkpoint_manifest(dir), text);
  } catch (const placement::FileWriteError& e) {
    throw CheckpointError(where + e.what());
  }
  prune_checkpoints(dir, step, pruning);
}

void prune_checkpoints(const std::string& dir, int64_t current, const CheckpointPruning& pruning) {
  if (pruning.keep < 1) {
    throw CheckpointError(dir + ": keep is " + std::to_string(pruning.keep) +
                          ", at least 1 checkpoint must be kept");
  }
  std::vector<int64_t> older;  // ascending
  for (int64_t step : step_folders(dir)) {
    if (step < current) older.push_back(step);
  }
  const size_t keep_older = static_cast<size_t>(pruning.keep - 1);
  if (older.size() <= keep_older) return;
  older.resize(older.size() - keep_older);  // the oldest go, but never the protected step
  std::erase(older, pruning.protect.value_or(-1));
  for (int64_t step : older) {
    const std::string folder = checkpoint_step_dir(dir, step);
    std::error_code error;
    fs::remove_all(folder, error);
    // Another rank pruning the same folder at once (per-rank dirs that are in fact one folder)
    // makes entries vanish under remove_all: that one removes them, which is no failure.
    if (error && error != std::errc::no_such_file_or_directory) {
      throw CheckpointError(folder + ": cannot remove an old checkpoint: " + error.message());
    }
  }
}

namespace {

// A committed step of a checkpoint dir whose manifests check out (rank files not yet read).
struct CommittedStep {
  int64_t step = 0;
  std::string manifest_path;  // the step's manifest.json
  Manifest manifest;
};

// The committed steps of `dir`, newest first: a step folder with a manifest.json that parses and
// names the step, committed by <dir>/manifest.json (which names it, byte-identical, or a newer
// step; when <dir>/manifest.json is missing or unreadable, every step but the newest complete
// one). Every step left out goes to `skip` with the fault. `found_any` (when given) says whether
// dir held any checkpoint at all. Throws CheckpointMismatch for a checkpoint of an older format,
// CheckpointError when dir is not a folder or cannot be listed.
std::vector<CommittedStep> committed_steps(
    const std::string& dir, const std::function<void(int64_t, const std::string&)>& skip,
    bool* found_any) {
  std::vector<CommittedStep> usable;
  std::error_code error;
  if (!fs::exists(dir, error)) return usable;
  if (!fs::is_directory(dir, error)) {
    throw CheckpointError(dir + ": the checkpoint folder is not a folder");
  }
  bool found = false;
  const std::vector<int64_t> steps = step_folders(dir);  // ascending
  // <dir>/manifest.json commits a step: the one it names and the older ones are complete.
  const std::string top = checkpoint_manifest(dir);
  std::optional<int64_t> committed;
  std::string top_text;
  std::string top_fault;
  if (fs::exists(top, error)) {
    found = true;
    try {
      top_text = read_manifest_text(top);
      committed = parse_manifest(top_text, top).step;
    } catch (const CheckpointMismatch&) {
      throw;
    } catch (const CheckpointError& e) {
      top_fault = e.what();
    }
  } else {
    top_fault = top + ": missing";
  }
  std::optional<int64_t> newest_complete;
  for (int64_t step : steps) {
    found = true;
    if (fs::exists(checkpoint_step_manifest(dir, step), error)) newest_complete = step;
  }
  if (found_any) *found_any = found;
  for (auto it = steps.rbegin(); it != steps.rend(); ++it) {
    const int64_t step = *it;
    const std::string manifest_path = checkpoint_step_manifest(dir, step);
    if (!fs::exists(manifest_path, error)) {
      skip(step, manifest_path + ": missing: a save that did not finish (a half-written folder)");
      continue;
    }
    if (committed && step > *committed) {
      skip(step, top + " names step " + std::to_string(*committed) +
                     ": this newer step's save did not finish in this folder");
      continue;
    }
    if (!committed && step == newest_complete) {
      // An old checkpoint has no <dir>/manifest.json at all: its format is what to say.
      try {
        parse_manifest(read_manifest_text(manifest_path), manifest_path);
      } catch (const CheckpointMismatch&) {
        throw;
      } catch (const CheckpointError&) {
      }
      skip(step, top_fault + "; it commits the newest step, which is therefore not used");
      continue;
    }
    std::string text;
    Manifest manifest;
    try {
      text = read_manifest_text(manifest_path);
      manifest = parse_manifest(text, manifest_path);
    } catch (const CheckpointMismatch&) {
      throw;
    } catch (const CheckpointError& e) {
      skip(step, e.what());
      continue;
    }
    if (manifest.step != step) {
      skip(step, manifest_path + ": step " + std::to_string(manifest.step) + ", expected " +
                     std::to_string(step));
      continue;
    }
    if (committed && step == *committed && text != top_text) {
      skip(step, manifest_path + ": differs from " + top +
                     ", which names this step as the current checkpoint: one was edited");
      continue;
    }
    usable.push_back({step, manifest_path, std::move(manifest)});
  }
  return usable;
}

}  // namespace

std::optional<int64_t> latest_checkpoint(const std::string& dir) {
  // The steps skipped are said when a resume takes the inventory.
  const std::vector<CommittedStep> steps = committed_steps(
      dir, [](int64_t, const std::string&) {}, nullptr);
  if (steps.empty()) return std::nullopt;
  return steps.front().step;
}

void load_state(const std::vector<std::byte>& bytes, const StateFacts& facts,
                const std::string& source, const std::string& facts_source, StageRuntime& runtime) {
  apply_state(verified_state(bytes, facts, source, facts_source, runtime), runtime);
}

std::vector<std::byte> read_stored_state(const StoredState& state, const StageRuntime& runtime) {
  std::vector<std::byte> bytes =
      read_rank_file(state.path, state.facts.bytes, state.manifest_path, max_state_bytes(runtime));
  verified_state(bytes, state.facts, state.path, state.manifest_path, runtime);
  return bytes;
}

void load_checkpoint(const std::string& dir, int64_t step, StageRuntime& runtime) {
  const std::string manifest_path = checkpoint_step_manifest(dir, step);
  const Manifest manifest = parse_manifest(read_manifest_text(manifest_path), manifest_path);
  if (manifest.step != step) {
    throw CheckpointError(manifest_path + ": step " + std::to_string(manifest.step) +
                          ", expected " + std::to_string(step));
  }
  if (manifest.layout) check_same_job(*manifest.layout, manifest_path, runtime);
  // This rank's own file when the manifest lists it for this stage, else the stage's first
  // replica's (another width: every replica of a stage holds the same state).
  const ManifestEntry* entry = nullptr;
  const size_t own = static_cast<size_t>(runtime.rank());
  if (own < manifest.files.size() && manifest.files[own].stage == runtime.stage()) {
    entry = &manifest.files[own];
  } else {
    for (const ManifestEntry& e : manifest.files) {
      if (e.stage == runtime.stage() && (!entry || e.replica < entry->replica)) entry = &e;
    }
  }
  if (!entry) {
    if (own < manifest.files.size()) {  // the message of a file of another stage, as before
      const ManifestEntry& e = manifest.files[own];
      throw CheckpointError(manifest_path + ": rank " + std::to_string(e.rank) + " is stage " +
                            std::to_string(e.stage) + " replica " + std::to_string(e.replica) +
                            ", this job's is stage " + std::to_string(runtime.stage()) +
                            " replica " + std::to_string(runtime.replica()) +
                            ", and no rank of it is of stage " + std::to_string(runtime.stage()));
    }
    throw CheckpointError(manifest_path + ": lists no file of stage " +
                          std::to_string(runtime.stage()));
  }
  const std::string path = checkpoint_rank_file(dir, step, entry->rank);
  const std::vector<std::byte> bytes =
      read_rank_file(path, entry->bytes, manifest_path, max_state_bytes(runtime));
  load_state(bytes, manifest.facts(*entry), path, manifest_path, runtime);
}

StateInventory inventory_states(const std::string& dir, const StageRuntime& runtime,
                                std::ostream& err, const std::string& who, CheckpointDirs dirs) {
  StateInventory inventory;
  const auto skip = [&](int64_t step, const std::string& why) {
    err << who << ": resume: skipping step " << step << ": " << why << '\n';
  };
  std::error_code error;
  for (const CommittedStep& committed : committed_steps(dir, skip, &inventory.found_any)) {
    const int64_t step = committed.step;
    const Manifest& manifest = committed.manifest;
    if (manifest.layout) check_same_job(*manifest.layout, committed.manifest_path, runtime);
    // The stage's files that are in this folder: this rank's own first.
    std::vector<const ManifestEntry*> candidates;
    for (const ManifestEntry& e : manifest.files) {
      if (e.stage != runtime.stage()) continue;
      const std::string path = checkpoint_rank_file(dir, step, e.rank);
      if (!fs::exists(path, error)) {
        // A per-rank dir holds only the files its ranks wrote; a shared one should hold all.
        if (dirs == CheckpointDirs::kShared && e.rank == runtime.rank()) {
          skip(step, path + ": missing (" + committed.manifest_path + " lists it)");
        }
        continue;
      }
      if (e.rank == runtime.rank()) {
        candidates.insert(candidates.begin(), &e);
      } else {
        candidates.push_back(&e);
      }
    }
    if (candidates.empty()) {
      skip(step, committed.manifest_path + ": none of the files it lists for stage " +
                     std::to_string(runtime.stage()) + " is in " + dir);
      continue;
    }
    for (const ManifestEntry* entry : candidates) {
      StoredState state{step, checkpoint_rank_file(dir, step, entry->rank), committed.manifest_path,
                        manifest.facts(*entry)};
      try {
        read_stored_state(state, runtime);
      } catch (const CheckpointMismatch&) {
        throw;
      } catch (const SafetensorsError& e) {  // CheckpointErrors, and a file that does not decode
        skip(step, e.what());
        continue;
      }
      inventory.usable.push_back(std::move(state));
      break;
    }
  }
  return inventory;
}

}  // namespace tessel::stage
