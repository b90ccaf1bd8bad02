// SendSlots::test: one MPI_Testsome over the requests of every send in flight.
#include "cascade/comm/detail/send_slots.hpp"

#include "internal.hpp"

namespace cascade::detail {

void SendSlots::test() {
    if (reqs_.size() <= null_reqs_) return;
    if (reqs_.size() == 1) {  // one request (a message of frames, typically): MPI_Test is cheaper
        int flag = 0;
        comm_detail::check_mpi(MPI_Test(&reqs_[0], &flag, MPI_STATUS_IGNORE), "MPI_Test");
        if (!flag) return;
        const std::uint32_t slot = req_slot_[0];
        if (--sends_[slot].outstanding == 0) done_.push_back(slot);
        reqs_.clear();
        req_slot_.clear();
        null_reqs_ = 0;
        return;
    }
    testsome_idx_.resize(reqs_.size());
    int count = 0;
    comm_detail::check_mpi(MPI_Testsome(static_cast<int>(reqs_.size()), reqs_.data(), &count,
                                        testsome_idx_.data(), MPI_STATUSES_IGNORE),
                           "MPI_Testsome");
    if (count != MPI_UNDEFINED) {
        for (int k = 0; k < count; ++k) {
            const std::uint32_t slot = req_slot_[static_cast<std::size_t>(testsome_idx_[k])];
            if (--sends_[slot].outstanding == 0) done_.push_back(slot);
        }
        null_reqs_ += static_cast<std::size_t>(count);
    }
    // Completed requests are MPI_REQUEST_NULL now: drop them once they are half the array.
    if (null_reqs_ * 2 > reqs_.size()) {
        std::size_t w = 0;
        for (std::size_t r = 0; r < reqs_.size(); ++r) {
            if (reqs_[r] == MPI_REQUEST_NULL) continue;
            reqs_[w] = reqs_[r];
            req_slot_[w] = req_slot_[r];
            ++w;
        }
        reqs_.resize(w);
        req_slot_.resize(w);
        null_reqs_ = 0;
    }
}

}  // namespace cascade::detail
