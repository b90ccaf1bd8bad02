// SendWindow: tile sends queued per destination, at most `window` of them in flight to one
// destination at a time, the rest leaving in queue order as earlier ones complete.
//
// Why: MPI moves concurrent large messages side by side, so when a rank posts all its tiles
// for a peer at once, the first tile the peer needs arrives only once most of the others
// have (measured here, 2D, 2 ranks, n = 4096, nb = 256, 64 MiB per peer: 20-400 ms before
// the peer's first task could start; 1-6 ms with a window of 2-4). Queued in the order they
// are needed and released a few at a time, tiles arrive in that order.
//
// push() may be called from any thread; sent() is called from the sender-side completion
// callback of the large active message (on the communication thread), which may start the
// next send right there.
#pragma once

#include <deque>
#include <functional>
#include <memory>
#include <mutex>

namespace cascade::apps::gemm {

class SendWindow {
  public:
    // window <= 0: no limit (every send starts at once).
    SendWindow(int ranks, int window);

    // Queues a send to `dest`; `send` posts it (e.g. calls send_large) and runs either now or
    // from a later sent(dest).
    void push(int dest, std::function<void()> send);
    // One send to `dest` completed.
    void sent(int dest);

    int window() const noexcept { return window_; }

  private:
    struct Dest {
        std::mutex lock;
        std::deque<std::function<void()>> queue;
        int in_flight = 0;
    };
    int window_;
    std::unique_ptr<Dest[]> dests_;
};

}  // namespace cascade::apps::gemm
