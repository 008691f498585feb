/* Pins the calling thread's OpenMP team to CPUs, one thread each (vLLM binds its CPU worker's
 * threads the same way). Unpinned, two threads on a busy 2-core machine can land on one core and
 * every parallel region's barrier then waits for a thread queued behind its partner.
 *
 * `cpus[i]` is the CPU of team thread i (thread 0 is the caller). libgomp keeps a master's team
 * threads across regions, so later regions of up to `n` threads (torch's and the C kernels') run
 * on the pinned threads. Returns how many threads could not be pinned. Built and loaded by
 * stencil/kernels/cpu_threads.py. */
#define _GNU_SOURCE
#include <omp.h>
#include <sched.h>

int bind_threads(const int *cpus, int n) {
    int failed = 0;
#pragma omp parallel num_threads(n) reduction(+ : failed)
    {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(cpus[omp_get_thread_num()], &set);
        failed += sched_setaffinity(0, sizeof(set), &set) != 0;
    }
    return failed;
}
