// sleeper - a controlled target with exact ground truth for the BPF tier.
//
// USAGE: sleeper US N
//        sleeper tick SPIN_NS
// Reads one line from stdin (so the test can attach first), then calls
// work::Sleeper::nap(US) N times; each call sleeps US microseconds
// (clock_nanosleep, absolute deadline, so a call never returns early).
// Prints "done" and the calls made, and exits.
// Or, with tick, reads batches from stdin, a line "GAP_US N" each, until
// its end: a batch sleeps GAP_US (outside any probed function) before
// each of N calls of work::Sleeper::tick, which spins for SPIN_NS by the
// monotonic clock (read through the vDSO: no syscall) and adds the span
// from its first clock read to its last to the batch's total; then prints
// "done N TOTAL_NS". What a probe shows beyond the spin is the probes' own
// cost, and the gap sets how cold the CPU is when the call comes (an OSD
// worker that slept between ops).
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <iostream>
#include <string>

namespace work {
class Sleeper {
public:
    __attribute__((noinline)) void nap(unsigned us);
    // unoptimised, like Ceph's functions it starts with push %rbp, which the
    // kernel emulates (as the OSD's probes and the calibration's)
    __attribute__((noinline, optimize("O0"))) void tick(long spin_ns);
    unsigned long naps = 0;
    long long spun_ns = 0;
};

static long long now_ns()
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}

void Sleeper::tick(long spin_ns)
{
    long long t0 = now_ns(), t;

    do
        t = now_ns();
    while (t - t0 < spin_ns);
    spun_ns += t - t0;
    naps++;
}

static void pause_us(unsigned us)
{
    struct timespec t = {(time_t)(us / 1000000), (long)(us % 1000000) * 1000};

    while (nanosleep(&t, &t))
        ;
}

void Sleeper::nap(unsigned us)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    t.tv_nsec += (long)us * 1000;
    t.tv_sec += t.tv_nsec / 1000000000L;
    t.tv_nsec %= 1000000000L;
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &t, nullptr))
        ;
    naps++;
    asm volatile("" ::: "memory");
}
}  // namespace work

int main(int argc, char **argv)
{
    work::Sleeper s;
    std::string line;
    if (argc == 3 && std::string(argv[1]) == "tick") {
        long spin = std::strtol(argv[2], nullptr, 10);
        unsigned gap;
        long n;
        while (std::cin >> gap >> n) {
            s.naps = 0;
            s.spun_ns = 0;
            for (long i = 0; i < n; i++) {
                work::pause_us(gap);
                s.tick(spin);
            }
            std::printf("done %lu %lld\n", s.naps, s.spun_ns);
            std::fflush(stdout);
        }
        return 0;
    }
    if (argc != 3) {
        std::fprintf(stderr, "usage: sleeper US N | sleeper tick SPIN_NS\n");
        return 2;
    }
    unsigned us = std::strtoul(argv[1], nullptr, 10);
    long n = std::strtol(argv[2], nullptr, 10);
    std::getline(std::cin, line);
    for (long i = 0; i < n; i++)
        s.nap(us);
    std::printf("done %lu\n", s.naps);
    return 0;
}
