// TaskTorrent compatibility: code written against the TaskTorrent paper's API compiles and
// runs with `using namespace ttor;`, with the same meaning.
#pragma once

#include <mpi.h>

#include <chrono>
#include <string>

#include "cascade/cascade.hpp"

namespace ttor {

using cascade::view;

class Communicator : public cascade::Communicator {
  public:
    explicit Communicator(MPI_Comm comm = MPI_COMM_WORLD, int verb = 0)
        : cascade::Communicator(comm, verb) {}
};

template <class... Ps>
using ActiveMsg = cascade::ActiveMsg<Ps...>;
template <class T, class... Ps>
using LargeActiveMsg = cascade::LargeActiveMsg<T, Ps...>;

class Threadpool : public cascade::Threadpool {
  public:
    Threadpool(int n_threads, Communicator* comm, int verb = 0, std::string basename = "",
               bool start = true)
        : cascade::Threadpool(n_threads, comm, verb, std::move(basename), start) {}
    explicit Threadpool(int n_threads, int verb = 0, std::string basename = "", bool start = true)
        : cascade::Threadpool(
              n_threads,
              cascade::ThreadpoolOptions{
                  .verb = verb, .name = basename.empty() ? "tp" : basename, .start = start}) {}
};

template <class K>
class Taskflow : public cascade::Taskflow<K> {
  public:
    explicit Taskflow(cascade::Threadpool* tp, int verb = 0) : cascade::Taskflow<K>(tp, verb) {}
    // The paper's example names the task function set_run.
    Taskflow& set_run(std::function<void(K)> f) {
        this->set_task(std::move(f));
        return *this;
    }
};

inline int comm_rank() {
    int r = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    return r;
}
inline int comm_size() {
    int s = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &s);
    return s;
}
inline std::string processor_name() {
    char name[MPI_MAX_PROCESSOR_NAME];
    int len = 0;
    MPI_Get_processor_name(name, &len);
    return std::string(name, static_cast<std::size_t>(len));
}

using timer = std::chrono::time_point<std::chrono::high_resolution_clock>;
inline timer wctime() {
    return std::chrono::high_resolution_clock::now();
}
inline double elapsed(timer t0, timer t1) {
    return std::chrono::duration<double>(t1 - t0).count();
}

}  // namespace ttor
