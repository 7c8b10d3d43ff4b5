// RunTraining's fence around libtorch (its exceptions become a Status here): the data, the
// kernels and the model, then the loop the job asks for (Trainer or PsTrainer); and evaluating a
// saved model. What the loops share is in training_run.{h,cc}.
#include "train/training_loop.h"

#include <torch/torch.h>

#include <chrono>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "job/kernel_cache.h"
#include "job/layout.h"
#include "train/blas.h"
#include "train/ps_trainer.h"
#include "train/trainer.h"

namespace weft::train {
namespace {

// The kernel of every built-in layer: the one WEFT_LEARNER_KERNELS forces, or the faster of the
// two as timed on this learner's threads at its batch, or as a learner of this job on the same
// CPU, BLAS and threads timed it before (LOG_DIR/kernels.tsv; none when `log_dir` is empty).
// Logged either way; a cache that cannot be saved is logged and the job goes on.
LayerKernels KernelsFor(const JobSpec& spec, const std::vector<int64_t>& sample_shape,
                        int64_t classes, const std::string& blas, const std::string& log_dir) {
  if (spec.model.architecture == "torchscript") return {};
  if (std::optional<Kernel> forced = KernelFromEnvironment()) {
    spdlog::info("kernels: every layer on {} (WEFT_LEARNER_KERNELS)", KernelName(*forced));
    return *forced;
  }
  std::optional<KernelCache> cache;
  if (!log_dir.empty()) cache = KernelCache::Load(KernelCachePath(log_dir));
  // Choices are kept per CPU, BLAS build and threads, and CNN activation layout (those timed
  // before the CNN ran channels-last are timed again).
  const std::string context = absl::StrCat(CpuModel(), " | ", blas, " | libtorch ",
                                           torch::get_num_threads(), " threads | channels-last");
  std::vector<std::string> log;
  const auto t0 = std::chrono::steady_clock::now();
  LayerKernels kernels = ChooseKernels(spec.model, sample_shape, classes, spec.training.batch_size,
                                       &log, cache ? &*cache : nullptr, context);
  for (const std::string& line : log) spdlog::info("kernel of {}", line);
  spdlog::info(
      "kernels chosen in {:.0f} ms (WEFT_LEARNER_KERNELS=onednn|blas forces one)",
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  if (cache) {
    if (absl::Status s = cache->Save(); !s.ok()) {
      spdlog::warn("kernel choices not cached: {}", s.message());
    }
  }
  return kernels;
}

}  // namespace

absl::StatusOr<LoopResult> RunTraining(const LoopOptions& given, Reporter& reporter) {
  LoopOptions options = given;
  try {
    torch::manual_seed(options.spec.training.seed);
    torch::set_num_threads(options.spec.EffectiveThreads());
    // DATA_DIR: the directory weftd resolved the job's data set to, in WEFT_DATA_FORMAT.
    const std::string& data_dir = options.learner.data_dir;
    const std::string& format = options.learner.data_format;
    ASSIGN_OR_RETURN(Dataset train,
                     LoadDataset(data_dir, "train", options.spec.data.train_samples, format));
    ASSIGN_OR_RETURN(Dataset test,
                     LoadDataset(data_dir, "test", options.spec.data.test_samples, format));
    if (train.SampleShape() != test.SampleShape()) {
      return absl::InvalidArgumentError(
          absl::StrCat("data.dataset: train samples are ", torch::str(train.stored.sizes()),
                       ", test samples ", torch::str(test.stored.sizes()), "; they must match"));
    }
    const int64_t classes = NumClasses(train, test);
    spdlog::info("data: {} train and {} test samples of shape [{}], {} classes ({})", train.size(),
                 test.size(), absl::StrJoin(train.SampleShape(), ", "), classes, format);
    const std::string blas = ConfigureBlas(LearnerBlasThreads(options.spec.EffectiveThreads()));
    spdlog::info("{}", blas);
    options.kernels =
        KernelsFor(options.spec, train.SampleShape(), classes, blas, options.learner.log_dir);
    ASSIGN_OR_RETURN(Model model, BuildModel(options.spec.model, options.learner.model_dir,
                                             train.SampleShape(), classes, options.kernels));
    if (options.spec.UsesParameterServer()) {
      // No process group: the learners meet in rank 0's shared-memory server.
      PsTrainer trainer(options, reporter, std::move(model), std::move(train), std::move(test));
      return trainer.Run();
    }
    std::unique_ptr<DataParallel> dp = DataParallel::Local();
    if (options.learner.generation > 1) {
      // Joining a running elastic job: ready now, it learns where to join (a loss meanwhile may
      // have moved the job on).
      ASSIGN_OR_RETURN(Membership m, AwaitJoin(reporter, options.learner, options.stop_requested));
      options.learner.generation = m.generation;
      options.learner.generation_rank = m.rank;
      options.learner.world_size = m.world_size;
      options.learner.rendezvous_host = m.rendezvous_host;
      options.learner.rendezvous_port = m.rendezvous_port;
    }
    if (options.learner.world_size > 1) {
      // A learner that joins a running elastic job meets its generation's group.
      const LearnerLaunch& l = options.learner;
      const bool joins = l.generation > 1;
      ASSIGN_OR_RETURN(dp,
                       DataParallel::Connect(
                           l.rendezvous_host, l.rendezvous_port, joins ? l.generation_rank : l.rank,
                           l.world_size, options.rendezvous_timeout_ms,
                           RendezvousPrefix(l, joins ? l.generation : 0),
                           joins ? std::min(options.rendezvous_timeout_ms, kJoinWaitMs) : 0));
    }
    Trainer trainer(options, reporter, std::move(model), std::move(train), std::move(test),
                    std::move(dp));
    return trainer.Run();
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("libtorch: ", TorchMessage(e)));
  }
}

absl::StatusOr<double> EvaluateSavedModel(const std::string& model_path,
                                          const std::string& data_dir, int64_t limit,
                                          const std::string& format) {
  try {
    auto model = std::make_shared<ClassifierImpl>(torch::jit::load(model_path));
    ASSIGN_OR_RETURN(Dataset test, LoadDataset(data_dir, "test", limit, format));
    ASSIGN_OR_RETURN(const Evaluation ev, Evaluate(model, test));
    return ev.accuracy;
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot load model ", model_path, ": ", TorchMessage(e)));
  }
}

}  // namespace weft::train
