// Rank 0's progress output stays out of the timed steps (driver/output_pacer.hpp): stdout on a
// pipe is fully buffered even where MPI_Init left it unbuffered, and the step loop's pacer writes
// it only once its interval has passed, and at the end.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "driver/output_pacer.hpp"

namespace {

using paraxis::driver::buffer_fully_unless_terminal;
using paraxis::driver::OutputPacer;

// What has reached the other end of a non-blocking descriptor so far.
std::string drain(int fd) {
  std::string got;
  char buf[256];
  for (;;) {
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n > 0) {
      got.append(buf, static_cast<std::size_t>(n));
      continue;
    }
    EXPECT_TRUE(n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) << "read: errno " << errno;
    return got;
  }
}

// The write end of a pipe as a stdio stream: unbuffered as MPICH's MPI_Init leaves stdout, or
// fully buffered as paraxis then makes it.
struct Pipe {
  int read_fd = -1;
  std::FILE* out = nullptr;
  char buffer[1 << 12];
  explicit Pipe(bool fully_buffered = false) {
    int fds[2];
    if (pipe(fds) != 0) return;
    read_fd = fds[0];
    fcntl(read_fd, F_SETFL, O_NONBLOCK);
    out = fdopen(fds[1], "w");
    if (!out) return;
    if (fully_buffered)
      std::setvbuf(out, buffer, _IOFBF, sizeof buffer);
    else
      std::setvbuf(out, nullptr, _IONBF, 0);
  }
  ~Pipe() {
    if (out) std::fclose(out);
    if (read_fd >= 0) close(read_fd);
  }
};

TEST(OutputPacer, APipeIsFullyBufferedEvenWhereMpiLeftItUnbuffered) {
  Pipe control, p;
  ASSERT_TRUE(control.out && p.out);
  std::fputs("unbuffered\n", control.out);
  EXPECT_EQ(drain(control.read_fd), "unbuffered\n");  // as MPI_Init left it: a write per call
  static char buffer[1 << 12];
  buffer_fully_unless_terminal(p.out, buffer, sizeof buffer);
  std::fputs("  step    1/2\n", p.out);
  std::fputs("  step    2/2\n", p.out);
  EXPECT_EQ(drain(p.read_fd), "");
  std::fflush(p.out);
  EXPECT_EQ(drain(p.read_fd), "  step    1/2\n  step    2/2\n");
}

TEST(OutputPacer, ATerminalKeepsItsLineBuffering) {
  const int master = posix_openpt(O_RDWR | O_NOCTTY);
  if (master < 0 || grantpt(master) != 0 || unlockpt(master) != 0)
    GTEST_SKIP() << "no pseudo-terminal here";
  fcntl(master, F_SETFL, O_NONBLOCK);
  std::FILE* tty = std::fopen(ptsname(master), "w");
  ASSERT_TRUE(tty);
  static char buffer[1 << 12];
  buffer_fully_unless_terminal(tty, buffer, sizeof buffer);
  std::fputs("step\n", tty);           // line-buffered: written at the newline
  pollfd readable{master, POLLIN, 0};  // the terminal passes it on (not at once: a work queue)
  ASSERT_EQ(poll(&readable, 1, 5000), 1) << "nothing reached the terminal in 5 s";
  EXPECT_NE(drain(master).find("step"), std::string::npos);
  std::fclose(tty);
  close(master);
}

TEST(OutputPacer, WritesOncePerIntervalAndAtTheEnd) {
  Pipe p(/*fully_buffered=*/true);
  ASSERT_TRUE(p.out);
  double now = 10.0;
  {
    OutputPacer pacer(p.out, 1.0, [&] { return now; });
    std::fputs("a\n", p.out);
    now = 10.4;
    EXPECT_FALSE(pacer.step_done());
    EXPECT_EQ(drain(p.read_fd), "");
    std::fputs("b\n", p.out);
    now = 11.0;  // a whole interval since the pacer began
    EXPECT_TRUE(pacer.step_done());
    EXPECT_EQ(drain(p.read_fd), "a\nb\n");
    std::fputs("c\n", p.out);
    now = 11.9;  // the interval counts from the last write, not the first
    EXPECT_FALSE(pacer.step_done());
    EXPECT_EQ(drain(p.read_fd), "");
    now = 13.5;  // a step longer than the interval: written as soon as it ends
    std::fputs("d\n", p.out);
    EXPECT_TRUE(pacer.step_done());
    EXPECT_EQ(drain(p.read_fd), "c\nd\n");
    std::fputs("e\n", p.out);
    now = 13.6;
    EXPECT_FALSE(pacer.step_done());
  }
  EXPECT_EQ(drain(p.read_fd), "e\n");  // the end of the steps: nothing held back
}

TEST(OutputPacer, AnExceptionDoesNotHoldLinesBack) {
  Pipe p(/*fully_buffered=*/true);
  ASSERT_TRUE(p.out);
  double now = 0;
  try {
    OutputPacer pacer(p.out, 1.0, [&] { return now; });
    std::fputs("  step    3/8\n", p.out);
    throw std::runtime_error("injected");
  } catch (const std::runtime_error&) {
    EXPECT_EQ(drain(p.read_fd), "  step    3/8\n");
  }
}

}  // namespace
