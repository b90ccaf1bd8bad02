#include "send_window.hpp"

#include <utility>

namespace cascade::apps::gemm {

SendWindow::SendWindow(int ranks, int window) : window_(window), dests_(new Dest[ranks]) {}

void SendWindow::push(int dest, std::function<void()> send) {
    Dest& d = dests_[dest];
    {
        std::lock_guard<std::mutex> g(d.lock);
        if (window_ > 0 && d.in_flight >= window_) {
            d.queue.push_back(std::move(send));
            return;
        }
        ++d.in_flight;
    }
    send();
}

void SendWindow::sent(int dest) {
    Dest& d = dests_[dest];
    std::function<void()> next;
    {
        std::lock_guard<std::mutex> g(d.lock);
        if (d.queue.empty()) {
            --d.in_flight;
            return;
        }
        next = std::move(d.queue.front());  // its slot is the one that just freed up
        d.queue.pop_front();
    }
    next();
}

}  // namespace cascade::apps::gemm
