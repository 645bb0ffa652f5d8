// Channels to other processes of a deployment by address, created on first use and shared by the
// callers (a gRPC channel multiplexes concurrent calls). Addresses come from requests, so the
// cache is bounded: past kMaxChannels it is cleared and channels are made again on demand.
//
// Threading: channel_to() is safe from any thread (one mutex).
#pragma once

#include <grpcpp/grpcpp.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace headway::serving::grpc_frontend {

class ChannelCache {
 public:
  explicit ChannelCache(const grpc::ChannelArguments& arguments = {}) : arguments_(arguments) {}

  std::shared_ptr<grpc::Channel> channel_to(const std::string& address) {
    std::lock_guard lock(mutex_);
    if (channels_.size() >= kMaxChannels && channels_.count(address) == 0) channels_.clear();
    std::shared_ptr<grpc::Channel>& channel = channels_[address];
    if (channel == nullptr) {
      channel = grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), arguments_);
    }
    return channel;
  }

 private:
  static constexpr size_t kMaxChannels = 64;
  const grpc::ChannelArguments arguments_;
  std::mutex mutex_;
  std::map<std::string, std::shared_ptr<grpc::Channel>> channels_;
};

}  // namespace headway::serving::grpc_frontend
