// RemoteError: what get() throws for an exception raised on another rank.
#pragma once

#include <stdexcept>
#include <string>

namespace cascade {

// An exception thrown on another rank, carried here by its message.
class RemoteError : public std::runtime_error {
  public:
    RemoteError(int rank, const std::string& what) : std::runtime_error(what), rank_(rank) {}
    int rank() const noexcept { return rank_; }  // where it was thrown

  private:
    int rank_;
};

}  // namespace cascade
