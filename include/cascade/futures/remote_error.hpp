// RemoteError: what get() throws for an exception raised on another rank.
#pragma once

#include <stdexcept>
#include <string>

namespace cascade {

/// An exception thrown on another rank, carried here by its message (what()).
class RemoteError : public std::runtime_error {
  public:
    /// The exception with message `what`, thrown on rank `rank`.
    RemoteError(int rank, const std::string& what) : std::runtime_error(what), rank_(rank) {}
    /// The rank where it was thrown.
    int rank() const noexcept { return rank_; }

  private:
    int rank_;
};

}  // namespace cascade
