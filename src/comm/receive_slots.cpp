// ReceiveSlots: posting, testing and cancelling the receives posted ahead of time.
#include "cascade/comm/detail/receive_slots.hpp"

#include "internal.hpp"

namespace cascade::detail {

using namespace comm_detail;

void ReceiveSlots::post_all(MPI_Comm comm) {
    // Persistent receives (MPI_Recv_init once, MPI_Start for each message): cheaper to post
    // again than a new MPI_Irecv.
    for (int parity = 0; parity < 2; ++parity) {
        AmSlots& set = am_[parity];
        for (int i = 0; i < kAmSlots; ++i) {
            set.buf[i].reset(new std::uint64_t[kSmallMessage / 8]);
            check_mpi(
                MPI_Recv_init(set.buf[i].get(), static_cast<int>(kSmallMessage), MPI_BYTE,
                              MPI_ANY_SOURCE, parity ? TAG_AM_ODD : TAG_AM, comm, &set.req[i]),
                "MPI_Recv_init");
            repost_am(comm, parity, i);
        }
    }
    for (int i = 0; i < kCtrlSlots; ++i) {
        check_mpi(MPI_Recv_init(&ctrl_buf_[i], sizeof(CtrlMsg), MPI_BYTE, MPI_ANY_SOURCE, TAG_CTRL,
                                comm, &ctrl_req_[i]),
                  "MPI_Recv_init");
        post_ctrl(comm, i);
    }
}

void ReceiveSlots::repost_am(MPI_Comm, int parity, int slot) {
    AmSlots& set = am_[parity];
    check_mpi(MPI_Start(&set.req[slot]), "MPI_Start");
    set.active[slot] = true;
    set.order[(set.head + set.count) % kAmSlots] = slot;
    ++set.count;
}

void ReceiveSlots::post_ctrl(MPI_Comm, int slot) {
    check_mpi(MPI_Start(&ctrl_req_[slot]), "MPI_Start");
}

bool ReceiveSlots::test_ctrl(MPI_Comm comm, CtrlMsg& m, MPI_Status& st) {
    const int slot = ctrl_head_;
    int flag = 0;
    check_mpi(MPI_Test(&ctrl_req_[slot], &flag, &st), "MPI_Test");
    if (!flag) return false;
    m = ctrl_buf_[slot];
    post_ctrl(comm, slot);
    ctrl_head_ = (ctrl_head_ + 1) % kCtrlSlots;
    return true;
}

bool ReceiveSlots::test_ctrl_and_am(MPI_Comm comm, int parity, CtrlMsg& m, MPI_Status& st,
                                    bool& am_tested) {
    AmSlots& set = am_[parity];
    am_tested = !(set.count == 0 || set.arrived);
    if (!am_tested) return test_ctrl(comm, m, st);
    const int s = set.order[set.head];
    // Copies of the two handles, written back: MPI_Testsome sets the completed ones to
    // MPI_REQUEST_NULL.
    MPI_Request reqs[2] = {ctrl_req_[ctrl_head_], set.req[s]};
    int idx[2] = {}, count = 0;
    MPI_Status sts[2];
    // Persistent requests: a completed one becomes inactive and keeps its handle.
    check_mpi(MPI_Testsome(2, reqs, &count, idx, sts), "MPI_Testsome");
    if (count == MPI_UNDEFINED) count = 0;  // not reached: neither request is inactive
    bool ctrl = false;
    for (int k = 0; k < count; ++k) {
        if (idx[k] == 0) {
            const int slot = ctrl_head_;
            m = ctrl_buf_[slot];
            st = sts[k];
            post_ctrl(comm, slot);
            ctrl_head_ = (ctrl_head_ + 1) % kCtrlSlots;
            ctrl = true;
        } else {
            set.arrived = true;
            set.arrived_status = sts[k];
            set.active[s] = false;
        }
    }
    return ctrl;
}

int ReceiveSlots::cancel_all() noexcept {
    // A posted receive that got a message instead of being cancelled: counted. Every
    // persistent request is freed (active or not).
    auto cancel = [](MPI_Request& q, bool active) {
        if (q == MPI_REQUEST_NULL) return 0;
        int cancelled = 1;
        if (active) {
            MPI_Cancel(&q);
            MPI_Status st;
            MPI_Wait(&q, &st);
            MPI_Test_cancelled(&st, &cancelled);
        }
        MPI_Request_free(&q);
        return cancelled ? 0 : 1;
    };
    int unrun = 0;
    for (auto& set : am_) {
        for (int i = 0; i < kAmSlots; ++i)
            unrun += cancel(set.req[i], set.active[i]);
        if (set.arrived) ++unrun;  // received, not yet taken by test_am
        set.arrived = false;
        set.count = 0;
    }
    for (auto& q : ctrl_req_)
        cancel(q, true);
    return unrun;
}

void ReceiveSlots::failed(int rc, const char* what) {
    check_mpi(rc, what);
    throw std::logic_error("ReceiveSlots::failed: MPI_SUCCESS");
}

}  // namespace cascade::detail
