// A message travels around the ring of ranks ten times; each hop is a task on the receiver.
#include <cascade/cascade.hpp>

#include <vector>

int main() {
    cascade::Communicator comm;        // initializes MPI if needed
    cascade::Threadpool tp(2, &comm);  // join() = distributed completion
    cascade::Taskflow<int> tf(&tp, "step");
    const int me = comm.rank(), n = comm.ranks();
    // Runs on the receiving rank; the view points into the message buffer.
    auto am = comm.make_active_msg([&](int& k, cascade::view<double>& v) {
        if (v.size() == 100) tf.fulfill_promise(k);
    });
    std::vector<double> data(100, 1.0);
    tf.set_task([&](int k) {
        if (k < 10) am->send((me + 1) % n, k + 1, cascade::view<double>(data.data(), data.size()));
    });
    if (me == 0) tf.fulfill_promise(0);
    tp.join();
}
