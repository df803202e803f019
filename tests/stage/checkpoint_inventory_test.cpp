// The inventory of a per-rank checkpoint dir (checkpoint.h inventory_states) and a state sent to
// a peer (peer_state.h), in process: 2 stages x 2 replicas save steps 1-3 each into its own dir;
// each case damages one thing the way a killed save, a person or a re-placement would and checks
// which steps stay usable, which file serves them, and the line that names what was skipped.
// A state sent to a peer loads bit for bit; one changed in transit is refused naming the peer.
#include <gtest/gtest.h>

#include <filesystem>
#include <optional>
#include <sstream>

#include "checkpoint_damage.h"
#include "noderuntime/stage/checkpoint.h"
#include "noderuntime/stage/peer_state.h"
#include "stage_test_support.h"

namespace tessel::stage {
namespace {

namespace fs = std::filesystem;
using placement::ScheduleKind;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// What one rank's inventory found.
struct Found {
  std::vector<int64_t> steps;
  std::vector<std::string> paths;
  bool found_any = false;
  std::string lines;  // its stderr
  std::string error;  // what it threw
};

class Inventory : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("tessel-stage-inventory-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    testing::RunHooks save;
    save.after_step = [&](StageRuntime& runtime, transport::Communicator& comm, int) {
      save_checkpoint(ckpt(runtime.rank()), runtime, comm, {}, CheckpointDirs::kPerRank);
    };
    testing::run_pipeline(config_, layout_, options_, 3, save);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string ckpt(int rank) const { return (dir_ / ("rank-" + std::to_string(rank))).string(); }

  // Every rank's inventory of the dir `dir_of` gives it (its own by default).
  std::vector<Found> inventories(std::function<std::string(int)> dir_of = {},
                                 std::optional<TrainingOptions> options = std::nullopt) {
    if (!dir_of) dir_of = [this](int rank) { return ckpt(rank); };
    std::vector<Found> found(4);
    testing::RunHooks take;
    take.before = [&](StageRuntime& runtime, transport::Communicator&) {
      Found& f = found[runtime.rank()];
      std::ostringstream err;
      try {
        const StateInventory inventory = inventory_states(dir_of(runtime.rank()), runtime, err,
                                                          "rank " + std::to_string(runtime.rank()));
        f.found_any = inventory.found_any;
        for (const StoredState& s : inventory.usable) {
          f.steps.push_back(s.step);
          f.paths.push_back(s.path);
        }
      } catch (const std::exception& e) {
        f.error = e.what();
      }
      f.lines = err.str();
    };
    testing::run_pipeline(config_, layout_, options.value_or(options_), 0, take);
    return found;
  }

  fs::path dir_;
  const GptConfig config_ = testing::tiny_config(4);
  const PipelineLayout layout_ = PipelineLayout::standard(2, 2, 1, 4);
  const TrainingOptions options_ = testing::tiny_options(ScheduleKind::OneFOneB, 2);
};

TEST_F(Inventory, EveryCommittedStepOfItsOwnFileAndNoLine) {
  const auto found = inventories();
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_EQ(found[rank].error, "");
    EXPECT_TRUE(found[rank].found_any);
    EXPECT_EQ(found[rank].steps, (std::vector<int64_t>{3, 2, 1}));
    EXPECT_EQ(found[rank].paths[0], checkpoint_rank_file(ckpt(rank), 3, rank));
    EXPECT_EQ(found[rank].lines, "") << "rank " << rank;
  }
  // No dir, or an empty one: nothing found at all.
  const auto none = inventories([this](int rank) {
    if (rank == 1) fs::create_directories(dir_ / "empty");
    return (dir_ / (rank == 1 ? "empty" : "absent")).string();
  });
  for (const Found& f : none) {
    EXPECT_FALSE(f.found_any);
    EXPECT_TRUE(f.steps.empty());
    EXPECT_EQ(f.error, "");
  }
}

TEST_F(Inventory, AHalfWrittenOrUncommittedNewerStepIsSkippedAndNamed) {
  // Rank 0: a save of step 4 killed before its manifest. Rank 1: one killed between the step's
  // manifest and <dir>/manifest.json (which still names step 3).
  fs::create_directories(checkpoint_step_dir(ckpt(0), 4));
  fs::copy_file(checkpoint_rank_file(ckpt(0), 3, 0), checkpoint_rank_file(ckpt(0), 4, 0));
  fs::copy(checkpoint_step_dir(ckpt(1), 3), checkpoint_step_dir(ckpt(1), 4),
           fs::copy_options::recursive);
  const auto found = inventories();
  EXPECT_EQ(found[0].steps, (std::vector<int64_t>{3, 2, 1}));
  EXPECT_EQ(found[0].lines,
            "rank 0: resume: skipping step 4: " + checkpoint_step_manifest(ckpt(0), 4) +
                ": missing: a save that did not finish (a half-written folder)\n");
  EXPECT_EQ(found[1].steps, (std::vector<int64_t>{3, 2, 1}));
  EXPECT_EQ(found[1].lines, "rank 1: resume: skipping step 4: " + checkpoint_manifest(ckpt(1)) +
                                " names step 3: this newer step's save did not finish in this "
                                "folder\n");
}

TEST_F(Inventory, AMissingOrEditedTopManifestCostsTheNewestStepOnly) {
  fs::remove(checkpoint_manifest(ckpt(0)));
  testing::write_all(checkpoint_step_manifest(ckpt(1), 3),
                     testing::read_all(checkpoint_step_manifest(ckpt(1), 3)) + " ");
  const auto found = inventories();
  EXPECT_EQ(found[0].steps, (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(found[0].lines, "rank 0: resume: skipping step 3: " + checkpoint_manifest(ckpt(0)) +
                                ": missing; it commits the newest step, which is therefore not "
                                "used\n");
  EXPECT_EQ(found[1].steps, (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(found[1].lines,
            "rank 1: resume: skipping step 3: " + checkpoint_step_manifest(ckpt(1), 3) +
                ": differs from " + checkpoint_manifest(ckpt(1)) +
                ", which names this step as the current checkpoint: one was "
                "edited\n");
}

TEST_F(Inventory, ADamagedFileIsSkippedNamingTheTensorAndAnyReplicasFileServes) {
  testing::overwrite_float(checkpoint_rank_file(ckpt(3), 3, 3), "lm_head.weight", 0, 2.0f);
  // After a re-placement rank 0 runs on the node whose dir rank 2 (stage 0 replica 1) wrote,
  // and rank 2 on a dir of stage 1's files only.
  const auto found = inventories([this](int rank) {
    return ckpt(rank == 0 ? 2 : rank == 2 ? 1 : rank);
  });
  EXPECT_EQ(found[3].steps, (std::vector<int64_t>{2, 1}));
  EXPECT_TRUE(contains(found[3].lines,
                       "rank 3: resume: skipping step 3: " + checkpoint_rank_file(ckpt(3), 3, 3) +
                           ": tensor 'lm_head.weight': checksum mismatch"))
      << found[3].lines;
  EXPECT_EQ(found[0].steps, (std::vector<int64_t>{3, 2, 1}));
  EXPECT_EQ(found[0].paths[0], checkpoint_rank_file(ckpt(2), 3, 2));
  EXPECT_EQ(found[0].lines, "");
  EXPECT_TRUE(found[2].steps.empty());
  EXPECT_TRUE(found[2].found_any);
  EXPECT_TRUE(contains(found[2].lines,
                       "rank 2: resume: skipping step 3: " + checkpoint_step_manifest(ckpt(1), 3) +
                           ": none of the files it lists for stage 0 is in " + ckpt(1)))
      << found[2].lines;
}

TEST_F(Inventory, AnotherGlobalBatchIsRefusedNamingBothNotSkipped) {
  TrainingOptions more = options_;
  more.micro_batches = 3;
  const auto found = inventories({}, more);
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_EQ(found[rank].error, checkpoint_step_manifest(ckpt(rank), 3) +
                                     ": written with a global batch of 8 sequences (2 replicas x "
                                     "2 micro-batches of 2); this job's is 12 sequences (2 "
                                     "replicas x 3 micro-batches of 2): a checkpoint resumes only "
                                     "the same global batch");
    EXPECT_EQ(found[rank].lines, "");
  }
}

TEST_F(Inventory, AStateSentToAPeerLoadsBitForBitAndOneChangedInTransitIsRefused) {
  // Replica 0 loads step 3 from its dirs and sends it to replica 1, whose dirs are not read.
  const auto send_to_replica_1 = [&](bool tamper) {
    std::vector<std::string> errors(4);
    std::vector<int64_t> steps(4, -1);
    testing::RunHooks load;
    load.before = [&](StageRuntime& runtime, transport::Communicator& comm) {
      const int peer = layout_.rank(runtime.stage(), 1 - runtime.replica());
      try {
        if (runtime.replica() == 0) {
          std::ostringstream err;
          const StoredState stored =
              inventory_states(ckpt(runtime.rank()), runtime, err, "").usable[0];
          PeerState state{stored.facts, read_stored_state(stored, runtime)};
          load_state(state.bytes, stored.facts, stored.path, stored.manifest_path, runtime);
          if (tamper) state.bytes[state.bytes.size() - 3] ^= std::byte{1};
          send_peer_state(comm, {peer}, 3, state);
        } else {
          receive_peer_state(comm, peer, "rank " + std::to_string(peer), 3, runtime);
        }
      } catch (const std::exception& e) {
        errors[runtime.rank()] = e.what();
      }
      steps[runtime.rank()] = runtime.steps_done();
    };
    return std::tuple(testing::run_pipeline(config_, layout_, options_, 0, load), errors, steps);
  };
  const auto [sent, errors, steps] = send_to_replica_1(false);
  EXPECT_EQ(errors, std::vector<std::string>(4, ""));
  EXPECT_EQ(steps, (std::vector<int64_t>{3, 3, 3, 3}));
  ASSERT_EQ(sent.weights.size(), 2u);
  EXPECT_EQ(sent.weights[1], sent.weights[0]);  // bit for bit

  const auto [tampered, bad, unloaded] = send_to_replica_1(true);
  for (int rank : {2, 3}) {
    EXPECT_TRUE(contains(
        bad[rank], "the state of step 3 from rank " + std::to_string(rank - 2) + ": tensor '"))
        << bad[rank];
    EXPECT_TRUE(contains(bad[rank], "checksum mismatch")) << bad[rank];
    EXPECT_EQ(unloaded[rank], 0);  // nothing loaded
  }
}

}  // namespace
}  // namespace tessel::stage
