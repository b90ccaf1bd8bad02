// ReceiveSlots: the receives a Communicator posts ahead of time (cheaper than probing).
// Small AM messages land in one of kAmSlots buffers, control messages in one of kCtrlSlots;
// each kind is tested oldest posted receive first, which is the order messages from one rank
// arrive in. AM messages carry the parity of their sender's completion epoch in their tag,
// and there is one set of slots per parity: a rank that finished an epoch first may send
// messages of the next one, which wait until this rank has finished the epoch too.
// Communication thread only.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <memory>

#include "cascade/comm/detail/completion.hpp"
#include "cascade/comm/detail/constants.hpp"

namespace cascade::detail {

/// The pre-posted receives of one Communicator (see the top of this file).
class ReceiveSlots {
  public:
    /// Buffers of small AM messages per parity; control-message buffers.
    static constexpr int kAmSlots = comm::kAmSlots, kCtrlSlots = comm::kCtrlSlots;

    ReceiveSlots() = default;
    ReceiveSlots(const ReceiveSlots&) = delete;
    ReceiveSlots& operator=(const ReceiveSlots&) = delete;

    /// Allocates the buffers and posts every receive on `comm` (both parities, control).
    void post_all(MPI_Comm comm);
    /// Starts AM slot `slot` of `parity` again (its message ran): it becomes the newest.
    void repost_am(MPI_Comm comm, int parity, int slot);
    /// Tests the oldest posted AM receive of `parity`. When its message arrived: true, its
    /// slot and status; the slot is no longer posted (repost_am once its message ran).
    bool test_am(int parity, int& slot, MPI_Status& st) {
        AmSlots& set = am_[parity];
        if (set.count == 0) return false;
        const int s = set.order[set.head];
        if (set.arrived) {  // test_ctrl_and_am found it
            set.arrived = false;
            st = set.arrived_status;
        } else {
            int flag = 0;
            if (const int rc = MPI_Test(&set.req[s], &flag, &st); rc != MPI_SUCCESS) [[unlikely]]
                failed(rc, "MPI_Test");
            if (!flag) return false;
            set.active[s] = false;
        }
        set.head = (set.head + 1) % kAmSlots;
        --set.count;
        slot = s;
        return true;
    }
    /// The message in AM slot `slot` of `parity` (after test_am returned it).
    const char* am_data(int parity, int slot) const noexcept {
        return reinterpret_cast<const char*>(am_[parity].buf[slot].get());
    }
    /// Tests the oldest control receive. When its message arrived: true, the message in `m`,
    /// its status in `st`, and the receive is posted again.
    bool test_ctrl(MPI_Comm comm, CtrlMsg& m, MPI_Status& st);
    /// test_ctrl and a test of the oldest AM receive of `parity` in one MPI call (one pass
    /// of MPI's progress engine instead of two, on every poll that finds nothing). Returns
    /// test_ctrl's answer; an AM message that arrived is kept for the next test_am
    /// (am_waiting() says whether one is). `am_tested`: whether the AM receive was tested.
    bool test_ctrl_and_am(MPI_Comm comm, int parity, CtrlMsg& m, MPI_Status& st, bool& am_tested);
    /// Whether test_ctrl_and_am found an AM message of `parity` that test_am has not taken.
    bool am_waiting(int parity) const noexcept { return am_[parity].arrived; }
    /// Cancels every posted receive; returns how many AM receives got a message instead
    /// (messages nobody will run).
    int cancel_all() noexcept;

  private:
    struct AmSlots {
        std::unique_ptr<std::uint64_t[]> buf[kAmSlots];
        MPI_Request req[kAmSlots];   // persistent (MPI_Recv_init), started when posted
        bool active[kAmSlots] = {};  // started and not completed
        int order[kAmSlots] = {};    // posted slots, oldest first (a ring of `count` entries)
        int head = 0, count = 0;
        bool arrived = false;         // the oldest receive completed in test_ctrl_and_am
        MPI_Status arrived_status{};  // and its status
    };
    void post_ctrl(MPI_Comm comm, int slot);
    [[noreturn, gnu::cold]] static void failed(int rc, const char* what);

    AmSlots am_[2];
    CtrlMsg ctrl_buf_[kCtrlSlots] = {};
    MPI_Request ctrl_req_[kCtrlSlots];  // persistent; started again as soon as one completes
    int ctrl_head_ = 0;
};

}  // namespace cascade::detail
