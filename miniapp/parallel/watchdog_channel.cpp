// The watchdog's control channel: per-communicator records, the questions an expired wait asks
// the members of its group ("where are you?"), the answers every polling rank gives, and the
// diagnosis printed from them. Messages are small fixed-size structs sent as bytes with
// non-blocking sends on a duplicate of MPI_COMM_WORLD, so they never match the engine's own.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>

#include "parallel/mpi_check.hpp"
#include "parallel/watchdog_channel.hpp"

namespace paraxis::parallel::watchdog {

namespace detail {

namespace {

constexpr int kQueryTag = 1, kAnswerTag = 2;

struct Query {
  std::int32_t id = 0, pad = 0;
  std::uint64_t key = 0;  // the group asked about
  std::int64_t seq = 0;   // the asker's collective on it
};

struct Answer {
  std::int32_t id = 0;
  std::int32_t in_wait = 0;
  // Collectives this rank started on the group asked about; -1 when it holds several
  // communicators over the same ranks (the key cannot tell them apart).
  std::int64_t started = 0;
  // The wait it is in.
  std::uint64_t key = 0;
  std::int64_t seq = -1;
  std::int32_t comm_rank = 0, comm_size = 1, peer = -1, step = -1, micro_batch = -1, pad = 0;
  double waited_s = 0;
  char op[64] = {}, axis[16] = {};
};

struct Outgoing {
  MPI_Request request = MPI_REQUEST_NULL;
  std::unique_ptr<char[]> bytes;
};

struct Channel {
  MPI_Comm comm = MPI_COMM_NULL;
  std::vector<Outgoing> outgoing;  // sends not known to be complete (their buffers)
  std::int32_t query = -1;         // id of the question being asked (-1: none)
  std::int32_t next_query = 0;
  std::map<int, Answer> answers;  // by world rank, for `query`
  std::vector<CommRecord*> records;
  int keyval = MPI_KEYVAL_INVALID;
  // Messages sent to / received from each world rank, so MPI_Finalize can drain the channel.
  std::vector<long long> sent, received;
};

Channel& channel() {
  static Channel c;
  return c;
}

int delete_record(MPI_Comm, int, void* attr, void*) {
  auto* r = static_cast<CommRecord*>(attr);
  auto& recs = channel().records;
  for (auto it = recs.begin(); it != recs.end(); ++it)
    if (*it == r) {
      recs.erase(it);
      break;
    }
  delete r;
  return MPI_SUCCESS;
}

void send_bytes(const void* data, int n, int dest, int tag) {
  Channel& ch = channel();
  Outgoing o;
  o.bytes.reset(new char[static_cast<std::size_t>(n)]);
  std::memcpy(o.bytes.get(), data, static_cast<std::size_t>(n));
  check_mpi(MPI_Isend(o.bytes.get(), n, MPI_BYTE, dest, tag, ch.comm, &o.request),
            "isend (control)");
  ch.outgoing.push_back(std::move(o));
  ++ch.sent[static_cast<std::size_t>(dest)];
}

void complete_outgoing() {
  auto& out = channel().outgoing;
  for (auto it = out.begin(); it != out.end();) {
    int flag = 0;
    check_mpi(MPI_Test(&it->request, &flag, MPI_STATUS_IGNORE), "test (control)");
    it = flag ? out.erase(it) : it + 1;
  }
}

// Receives one message that MPI_Iprobe found, counting it; false unless it is `tag` of `bytes`.
bool receive(const MPI_Status& st, int tag, void* into, int bytes) {
  Channel& ch = channel();
  int n = 0;
  MPI_Get_count(&st, MPI_BYTE, &n);
  const bool wanted = st.MPI_TAG == tag && n == bytes;
  std::vector<char> junk(wanted ? 0 : static_cast<std::size_t>(n > 0 ? n : 1));
  check_mpi(MPI_Recv(wanted ? into : junk.data(), n, MPI_BYTE, st.MPI_SOURCE, st.MPI_TAG, ch.comm,
                     MPI_STATUS_IGNORE),
            "recv (control)");
  ++ch.received[static_cast<std::size_t>(st.MPI_SOURCE)];
  return wanted;
}

// At MPI_Finalize (an attribute of MPI_COMM_SELF, deleted first there): every rank learns how
// many messages the others sent it and receives the ones still in flight (late answers, queries
// after a handler that returned), so none is left unmatched. Bounded by the deadline.
int drain_at_finalize(MPI_Comm, int, void*, void*) {
  Channel& ch = channel();
  int n = 0;
  MPI_Comm_size(ch.comm, &n);
  std::vector<long long> expected(static_cast<std::size_t>(n), 0);
  MPI_Request r = MPI_REQUEST_NULL;
  if (MPI_Ialltoall(ch.sent.data(), 1, MPI_LONG_LONG, expected.data(), 1, MPI_LONG_LONG, ch.comm,
                    &r) != MPI_SUCCESS)
    return MPI_SUCCESS;
  const double until = now() + watchdog::timeout_s();
  bool counted = false;
  while (now() < until) {
    int flag = 0;
    if (!counted) MPI_Test(&r, &flag, MPI_STATUS_IGNORE);
    counted = counted || flag;
    MPI_Status st;
    MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, ch.comm, &flag, &st);
    if (flag) receive(st, -1, nullptr, 0);
    complete_outgoing();
    if (counted && ch.outgoing.empty() && ch.received == expected) break;
  }
  return MPI_SUCCESS;
}

void copy_text(char* dst, std::size_t n, const char* src) {
  std::snprintf(dst, n, "%s", src ? src : "");
}

Answer answer_to(const Query& q) {
  Answer a;
  a.id = q.id;
  int holding = 0;
  for (const CommRecord* r : channel().records)
    if (r->key == q.key) {
      ++holding;
      a.started = r->started;
    }
  if (holding > 1) a.started = -1;
  const Current& c = current();
  a.in_wait = c.active ? 1 : 0;
  a.step = watchdog::step();
  a.micro_batch = watchdog::micro_batch();
  if (c.active) {
    const CommRecord& r = record_of(c.wait.comm);
    a.key = r.key;
    a.seq = c.wait.seq;
    a.comm_rank = r.rank;
    a.comm_size = static_cast<std::int32_t>(r.world.size());
    a.peer = c.wait.peer;
    a.waited_s = now() - c.since;
    copy_text(a.op, sizeof a.op, c.wait.op);
    copy_text(a.axis, sizeof a.axis, c.wait.axis);
  }
  return a;
}

// "all_reduce #12 on dp (rank 0 of 2), step 3, micro-batch 2"
std::string describe(const char* op, const char* axis, long seq, int peer, int comm_rank,
                     int comm_size, int step, int micro_batch) {
  std::string s = op;
  if (peer >= 0)
    s += " (peer rank " + std::to_string(peer) + ")";
  else if (seq >= 0)
    s += " #" + std::to_string(seq);
  s += std::string(" on ") + axis + " (rank " + std::to_string(comm_rank) + " of " +
       std::to_string(comm_size) + ")";
  s += step >= 0 ? ", step " + std::to_string(step + 1) : std::string(", outside a step");
  if (micro_batch >= 0) s += ", micro-batch " + std::to_string(micro_batch + 1);
  return s;
}

std::string describe(const Answer& a) {
  if (!a.in_wait) return "not in a wait (computing)";
  char waited[48];
  std::snprintf(waited, sizeof waited, ", waiting for %.2f s", a.waited_s);
  return describe(a.op, a.axis, a.seq, a.peer, a.comm_rank, a.comm_size, a.step, a.micro_batch) +
         waited;
}

}  // namespace

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

Current& current() {
  static Current c;
  return c;
}

CommRecord& record_of(MPI_Comm comm) {
  Channel& ch = channel();
  if (ch.keyval == MPI_KEYVAL_INVALID)
    check_mpi(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, &delete_record, &ch.keyval, nullptr),
              "create keyval");
  void* attr = nullptr;
  int found = 0;
  check_mpi(MPI_Comm_get_attr(comm, ch.keyval, &attr, &found), "get attribute");
  if (found) return *static_cast<CommRecord*>(attr);
  auto r = std::make_unique<CommRecord>();
  int size = 1;
  MPI_Comm_size(comm, &size);
  MPI_Comm_rank(comm, &r->rank);
  MPI_Group group, world;
  MPI_Comm_group(comm, &group);
  MPI_Comm_group(MPI_COMM_WORLD, &world);
  std::vector<int> ranks(static_cast<std::size_t>(size));
  for (int k = 0; k < size; ++k) ranks[k] = k;
  r->world.assign(static_cast<std::size_t>(size), MPI_UNDEFINED);
  MPI_Group_translate_ranks(group, size, ranks.data(), world, r->world.data());
  MPI_Group_free(&group);
  MPI_Group_free(&world);
  // FNV-1a over the member list: every member computes the same key.
  std::uint64_t h = 1469598103934665603ull;
  for (int w : r->world) {
    h ^= static_cast<std::uint64_t>(static_cast<std::uint32_t>(w));
    h *= 1099511628211ull;
  }
  r->key = h ^ static_cast<std::uint64_t>(size);
  check_mpi(MPI_Comm_set_attr(comm, ch.keyval, r.get()), "set attribute");
  ch.records.push_back(r.get());
  return *r.release();
}

void open_channel() {
  Channel& ch = channel();
  if (ch.comm != MPI_COMM_NULL) return;
  check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &ch.comm), "comm dup");
  int n = 0;
  MPI_Comm_size(ch.comm, &n);
  ch.sent.assign(static_cast<std::size_t>(n), 0);
  ch.received.assign(static_cast<std::size_t>(n), 0);
  int key = MPI_KEYVAL_INVALID;
  check_mpi(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, &drain_at_finalize, &key, nullptr),
            "create keyval");
  check_mpi(MPI_Comm_set_attr(MPI_COMM_SELF, key, nullptr), "set attribute");
}

bool channel_open() {
  return channel().comm != MPI_COMM_NULL;
}

namespace {

// What this rank knows of its own wait: the operation, its place, and the members it waits for
// (the peer of a point-to-point wait, else every other rank of the communicator), arrival unknown.
void describe_own_wait(const Wait& w, const CommRecord& rec, double waited_s, Diagnosis& d) {
  d.op = w.op;
  d.axis = w.axis;
  d.seq = w.peer >= 0 ? -1 : w.seq;
  d.peer = w.peer;
  d.comm_rank = rec.rank;
  d.comm_size = static_cast<int>(rec.world.size());
  MPI_Comm_rank(MPI_COMM_WORLD, &d.world_rank);
  d.step = watchdog::step();
  d.micro_batch = watchdog::micro_batch();
  d.timeout_s = watchdog::timeout_s();
  d.elapsed_s = waited_s;
  d.members.clear();
  std::vector<int> asked;
  if (w.peer >= 0) {
    asked.push_back(w.peer);
  } else {
    for (int r = 0; r < d.comm_size; ++r)
      if (r != rec.rank) asked.push_back(r);
  }
  for (int r : asked) {
    Member m;
    m.rank = r;
    m.world_rank = r < d.comm_size ? rec.world[static_cast<std::size_t>(r)] : MPI_UNDEFINED;
    d.members.push_back(m);
  }
}

// Each member from its answer: not answering, arrived in this same collective (or past it), or
// elsewhere, doing what it says.
void classify_members(const Wait& w, const CommRecord& rec, const std::map<int, Answer>& answers,
                      Diagnosis& d) {
  for (Member& m : d.members) {
    const auto it = answers.find(m.world_rank);
    if (m.world_rank == MPI_UNDEFINED) continue;
    if (it == answers.end()) {
      m.arrival = Arrival::not_answering;
      continue;
    }
    const Answer& a = it->second;
    m.doing = describe(a);
    const bool same_wait = a.in_wait && a.key == rec.key && a.seq == w.seq && a.peer < 0 &&
                           std::strncmp(a.op, w.op, sizeof a.op - 1) == 0;
    m.arrival =
        w.peer < 0 && (a.started > w.seq || same_wait) ? Arrival::arrived : Arrival::elsewhere;
  }
}

}  // namespace

bool diagnose(const Wait& w, double waited_s, Poll done, void* context, Diagnosis& d) {
  Channel& ch = channel();
  const CommRecord& rec = record_of(w.comm);
  describe_own_wait(w, rec, waited_s, d);
  if (ch.comm == MPI_COMM_NULL) return false;  // nobody to ask: every arrival unknown

  ch.query = ch.next_query++;
  ch.answers.clear();
  Query q;
  q.id = ch.query;
  q.key = rec.key;
  q.seq = w.seq;
  std::size_t askable = 0;
  for (const Member& m : d.members)
    if (m.world_rank != MPI_UNDEFINED) {
      send_bytes(&q, sizeof q, m.world_rank, kQueryTag);
      ++askable;
    }
  const double until = now() + grace_s();
  while (ch.answers.size() < askable && now() < until) {
    if (done(context)) {
      ch.query = -1;
      return true;
    }
    watchdog::service();
    std::this_thread::yield();
  }
  classify_members(w, rec, ch.answers, d);
  ch.query = -1;
  return false;
}

}  // namespace detail

void service() {
  using namespace detail;
  Channel& ch = channel();
  if (ch.comm == MPI_COMM_NULL) return;
  complete_outgoing();
  for (;;) {
    int flag = 0;
    MPI_Status st;
    check_mpi(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, ch.comm, &flag, &st), "iprobe (control)");
    if (!flag) break;
    Query q;
    Answer a;
    if (st.MPI_TAG == kQueryTag) {
      if (receive(st, kQueryTag, &q, sizeof q)) {
        const Answer mine = answer_to(q);
        send_bytes(&mine, sizeof mine, st.MPI_SOURCE, kAnswerTag);
      }
    } else if (receive(st, kAnswerTag, &a, sizeof a) && a.id == ch.query) {
      ch.answers[st.MPI_SOURCE] = a;  // (a late answer to an earlier question is dropped)
    }
  }
}

const char* to_string(Arrival a) {
  switch (a) {
    case Arrival::arrived:
      return "arrived";
    case Arrival::elsewhere:
      return "elsewhere";
    case Arrival::not_answering:
      return "not answering";
    case Arrival::unknown:
      break;
  }
  return "unknown";
}

std::vector<int> Diagnosis::missing() const {
  std::vector<int> out;
  for (const Member& m : members)
    if (m.arrival != Arrival::arrived) out.push_back(m.rank);
  return out;
}

std::string Diagnosis::message() const {
  char head[160];
  std::snprintf(head, sizeof head,
                "paraxis: watchdog: world rank %d waited %.2f s (comm.timeout_s = %g) in ",
                world_rank, elapsed_s, timeout_s);
  std::string s = head;
  s += detail::describe(op.c_str(), axis.c_str(), seq, peer, comm_rank, comm_size, step,
                        micro_batch);
  s += "; ending the job (exit code " + std::to_string(exit_code::hang) + ")\n";
  std::string missing_ranks, missing_world;
  for (const Member& m : members) {
    const std::string who = "rank " + std::to_string(m.rank) + " of " + axis + " (world rank " +
                            std::to_string(m.world_rank) + ")";
    s += "  " + who + ": " + to_string(m.arrival);
    switch (m.arrival) {
      case Arrival::arrived:
        s += " (" + m.doing + ")";
        break;
      case Arrival::elsewhere:
        s += ": " + m.doing;
        break;
      case Arrival::not_answering:
        s += " (stalled, dead, or computing without communicating)";
        break;
      case Arrival::unknown:
        s += " (watchdog::configure was not called: no control channel)";
        break;
    }
    s += "\n";
    if (m.arrival != Arrival::arrived) {
      missing_ranks += (missing_ranks.empty() ? "" : ", ") + std::to_string(m.rank);
      missing_world += (missing_world.empty() ? "" : ", ") + std::to_string(m.world_rank);
    }
  }
  if (!missing_ranks.empty())
    s += "  not arrived: rank(s) " + missing_ranks + " of " + axis + " (world rank(s) " +
         missing_world + ")\n";
  else if (!members.empty())
    s += "  every member arrived: no rank is silent; the " + op +
         " itself is slower than the deadline (raise comm.timeout_s if it is meant to take this "
         "long)\n";
  return s;
}

}  // namespace paraxis::parallel::watchdog
