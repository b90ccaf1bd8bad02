#include "cascade/futures/detail/state.hpp"

#include <climits>

#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace cascade::detail {

namespace {
// Wakes the threads sleeping on `word` (Notifier::wake_all would also bump the word, which
// here is the status).
void wake_word(std::atomic<std::uint32_t>& word) noexcept {
#if defined(__linux__)
    syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAKE_PRIVATE, INT_MAX,
            nullptr, nullptr, 0);
#else
    (void)word;  // waiters poll with a timeout
#endif
}
}  // namespace

void StateBase::add_callback(Callback* cb) noexcept {
    Callback* head = callbacks_.load(std::memory_order_acquire);
    do {
        if (head == closed()) {
            cb->fire(*this);
            return;
        }
        cb->next = head;
    } while (!callbacks_.compare_exchange_weak(head, cb, std::memory_order_acq_rel,
                                               std::memory_order_acquire));
}

void StateBase::publish(std::uint32_t st) noexcept {
    // Pairs with the waiter's store of waiters_ then load of word_ (both seq_cst): either it
    // sees the new status or we see it waiting.
    word_.store(st, std::memory_order_seq_cst);
    if (waiters_.load(std::memory_order_seq_cst)) wake_word(word_);
    Callback* list = callbacks_.exchange(closed(), std::memory_order_acq_rel);
    Callback* in_order = nullptr;  // the list is a stack: fire in registration order
    while (list) {
        Callback* next = list->next;
        list->next = in_order;
        in_order = list;
        list = next;
    }
    while (in_order) {
        Callback* next = in_order->next;  // fire() may delete the callback
        in_order->fire(*this);
        in_order = next;
    }
}

}  // namespace cascade::detail
