#include "core/train/signals.hpp"

#include <pthread.h>

#include <csignal>
#include <initializer_list>

namespace lcr::train {
namespace {

volatile std::sig_atomic_t g_signal = 0;
struct sigaction g_old_term, g_old_usr1, g_old_int;
sigset_t g_old_mask;
int g_installed = 0;

extern "C" void on_stop_signal(int sig) { g_signal = sig; }

}  // namespace

StopSignals::StopSignals() {
  if (g_installed++ > 0) return;
  g_signal = 0;
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;  // MPI and file calls resume after the handler returns
  sigaction(SIGTERM, &sa, &g_old_term);
  sigaction(SIGUSR1, &sa, &g_old_usr1);
  sigaction(SIGINT, &sa, &g_old_int);
  // A launcher may start us with these blocked (the mask survives exec); a blocked stop
  // signal would stay pending and the run would never checkpoint.
  sigset_t stops;
  sigemptyset(&stops);
  for (int sig : {SIGTERM, SIGUSR1, SIGINT}) sigaddset(&stops, sig);
  pthread_sigmask(SIG_UNBLOCK, &stops, &g_old_mask);
}

StopSignals::~StopSignals() {
  if (--g_installed > 0) return;
  sigaction(SIGTERM, &g_old_term, nullptr);
  sigaction(SIGUSR1, &g_old_usr1, nullptr);
  sigaction(SIGINT, &g_old_int, nullptr);
  pthread_sigmask(SIG_SETMASK, &g_old_mask, nullptr);
}

int StopSignals::received() { return int(g_signal); }

void StopSignals::raise_for_test(int sig) { g_signal = sig; }

}  // namespace lcr::train
