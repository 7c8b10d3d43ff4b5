#include "train/data_parallel.h"

#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <chrono>

#include "absl/strings/str_cat.h"
#include "common/logging.h"

namespace weft::train {

struct DataParallel::Group {
  c10::intrusive_ptr<c10d::TCPStore> store;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> gloo;

  void AllReduce(torch::Tensor& t, c10d::ReduceOp op) {
    std::vector<torch::Tensor> ts = {t};
    c10d::AllreduceOptions o;
    o.reduceOp = op;
    gloo->allreduce(ts, o)->wait();
  }
};

DataParallel::DataParallel(int rank, int world_size) : rank_(rank), world_size_(world_size) {}
DataParallel::~DataParallel() = default;

std::unique_ptr<DataParallel> DataParallel::Local() {
  return std::unique_ptr<DataParallel>(new DataParallel(0, 1));
}

absl::StatusOr<std::unique_ptr<DataParallel>> DataParallel::Connect(const std::string& host,
                                                                    int port, int rank,
                                                                    int world_size,
                                                                    int64_t timeout_ms) {
  if (world_size < 1 || rank < 0 || rank >= world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", rank, " is not in a world of ", world_size, " learners"));
  }
  if (world_size == 1) return Local();
  if (port <= 0 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("rendezvous port ", port, " is not a port"));
  }
  std::unique_ptr<DataParallel> dp(new DataParallel(rank, world_size));
  dp->group_ = std::make_unique<Group>();
  auto t0 = std::chrono::steady_clock::now();
  try {
    c10d::TCPStoreOptions so;
    so.port = static_cast<uint16_t>(port);
    so.isServer = rank == 0;
    so.numWorkers = world_size;
    so.waitWorkers = true;
    so.timeout = std::chrono::milliseconds(timeout_ms);
    dp->group_->store = c10::make_intrusive<c10d::TCPStore>(host, so);
    auto go = c10d::ProcessGroupGloo::Options::create();
    go->timeout = std::chrono::milliseconds(timeout_ms);
    go->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(host));
    dp->group_->gloo =
        c10::make_intrusive<c10d::ProcessGroupGloo>(dp->group_->store, rank, world_size, go);
  } catch (const std::exception& e) {
    std::string what = e.what();
    if (const auto* c10 = dynamic_cast<const c10::Error*>(&e)) what = c10->what_without_backtrace();
    return absl::UnavailableError(absl::StrCat("rendezvous at ", host, ":", port, " as rank ",
                                               rank, " of ", world_size, " failed: ", what));
  }
  spdlog::info("joined the process group at {}:{} as rank {} of {} in {:.0f} ms (Gloo)", host,
               port, rank, world_size,
               std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                   .count());
  return dp;
}

bool DataParallel::AverageGradients(const std::vector<torch::Tensor>& parameters, bool stop) {
  if (!group_) return stop;
  std::vector<torch::Tensor> flat;
  flat.reserve(parameters.size() + 1);
  for (const torch::Tensor& p : parameters) {
    const torch::Tensor& g = p.grad();
    flat.push_back(g.defined() ? g.reshape({-1}).to(torch::kFloat32)
                               : torch::zeros({p.numel()}, torch::kFloat32));
  }
  flat.push_back(torch::full({1}, stop ? 1.0f : 0.0f, torch::kFloat32));
  torch::Tensor buffer = torch::cat(flat);
  group_->AllReduce(buffer, c10d::ReduceOp::SUM);
  const bool any_stop = buffer[buffer.size(0) - 1].item<float>() > 0;
  buffer.div_(world_size_);
  int64_t offset = 0;
  for (const torch::Tensor& p : parameters) {
    const int64_t n = p.numel();
    torch::Tensor g = p.grad();
    if (g.defined()) g.copy_(buffer.slice(0, offset, offset + n).view_as(g));
    offset += n;
  }
  return any_stop;
}

void DataParallel::BroadcastFromRank0(const std::vector<torch::Tensor>& tensors) {
  if (!group_) return;
  torch::NoGradGuard no_grad;
  for (const torch::Tensor& t : tensors) {
    std::vector<torch::Tensor> ts = {t.detach()};
    c10d::BroadcastOptions o;
    o.rootRank = 0;
    group_->gloo->broadcast(ts, o)->wait();
  }
}

std::vector<double> DataParallel::Sum(const std::vector<double>& values) {
  if (!group_) return values;
  torch::Tensor t = torch::tensor(values, torch::kFloat64);
  group_->AllReduce(t, c10d::ReduceOp::SUM);
  return std::vector<double>(t.data_ptr<double>(), t.data_ptr<double>() + t.numel());
}

bool DataParallel::AllEqual(int64_t value) {
  if (!group_) return true;
  // max(v) and max(-v) = -min(v) in one allreduce.
  torch::Tensor t = torch::tensor({value, -value}, torch::kInt64);
  group_->AllReduce(t, c10d::ReduceOp::MAX);
  return t[0].item<int64_t>() == value && -t[1].item<int64_t>() == value;
}

}  // namespace weft::train
