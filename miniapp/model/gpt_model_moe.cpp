// GptModel's MoE layer: router, top-k (or replayed) choices, capacity routing, this rank's
// experts and, with expert parallelism, the all-to-all that takes rows to their experts and back.
//
// MoE with tp > 1: every tensor-parallel rank routes the same (gathered) tokens and computes
// its slice of each expert; expert outputs are partial sums, so the combined output is
// reduced like an MLP's and the gate gradient (a dot product with the partial outputs) is
// summed over the group. Expert parallelism: experts are split over the ep group; tokens go
// to the rank of their expert by all-to-all and the outputs come back the same way.
#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "model/gpt_model_impl.hpp"
#include "paraxis/kernels/softmax.hpp"

namespace paraxis::model {

using namespace detail;

// Runs this rank's experts on `rows` rows of xe (expert-major, offsets per local expert):
// ye = gelu(xe W1 + b1) W2 (+ b2 on tensor-parallel rank 0: the outputs are partial sums). Each
// expert is a column-parallel W1 and a row-parallel W2 (tensor_parallel.hpp) whose reductions
// wait until the rows are combined back into token order (block_forward, block_backward).
template <class T>
void GptModel<T>::Impl::experts_forward(const BlockParams& b, MoeActs& mo,
                                        const std::vector<int>& offsets, const V2& ye) {
  const Space space;
  auto& ps = m.params_;
  for (std::size_t e = 0; e < b.ew1.size(); ++e) {
    const int lo = offsets[e], hi = offsets[e + 1];
    if (lo == hi) continue;
    auto rows = std::make_pair(lo, hi);
    auto xe = Kokkos::subview(mo.xe, rows, Kokkos::ALL);
    auto ue = Kokkos::subview(mo.ue, rows, Kokkos::ALL);
    auto ge = Kokkos::subview(mo.ge, rows, Kokkos::ALL);
    auto y = Kokkos::subview(ye, rows, Kokkos::ALL);
    column_parallel_forward(space, xe, ps.w2(b.ew1[e]), ps.w1(b.eb1[e]), ue);
    k::gelu_forward(space, ue, ge);
    row_parallel_partial_forward(space, tpg(), ge, ps.w2(b.ew2[e]), ps.w1(b.eb2[e]), y);
  }
}

template <class T>
void GptModel<T>::Impl::experts_backward(const BlockParams& b, MoeActs& mo,
                                         const std::vector<int>& offsets, const V2& dye,
                                         const V2& dxe) {
  const Space space;
  auto& ps = m.params_;
  for (std::size_t e = 0; e < b.ew1.size(); ++e) {
    const int lo = offsets[e], hi = offsets[e + 1];
    if (lo == hi) continue;
    auto rows = std::make_pair(lo, hi);
    auto dge = Kokkos::subview(e_dh, rows, Kokkos::ALL);
    auto due = Kokkos::subview(e_du, rows, Kokkos::ALL);
    row_parallel_backward(space, Kokkos::subview(dye, rows, Kokkos::ALL),
                          Kokkos::subview(mo.ge, rows, Kokkos::ALL), ps.w2(b.ew2[e]), dge, 0.0,
                          ps.g2(b.ew2[e]), ps.g1(b.eb2[e]));
    k::gelu_backward(space, Kokkos::subview(mo.ue, rows, Kokkos::ALL), dge, due);
    // The input gradient stays partial over the group: the block reduces it after the gather.
    const auto dx = Kokkos::subview(dxe, rows, Kokkos::ALL);
    column_parallel_backward(space, tpg(), due, Kokkos::subview(mo.xe, rows, Kokkos::ALL),
                             ps.w2(b.ew1[e]), dx, 0.0, dx, ps.g2(b.ew1[e]), ps.g1(b.eb1[e]),
                             TpReduce::deferred);
  }
}

// Sends rows between source order (this rank's kept rows, expert-major over all experts)
// and the expert ranks: `rows_to[d]` rows to rank d, `rows_from[s]` from rank s.
template <class T>
void GptModel<T>::Impl::exchange_rows(const V2& send, const std::vector<int>& rows_to,
                                      const V2& recv, const std::vector<int>& rows_from) {
  const int ep = lay.ep, H = cfg.hidden;
  std::vector<int> sc(ep), sd(ep), rc(ep), rd(ep);
  long so = 0, ro = 0;
  for (int d = 0; d < ep; ++d) {
    sc[d] = rows_to[d] * H;
    rc[d] = rows_from[d] * H;
    sd[d] = static_cast<int>(so);
    rd[d] = static_cast<int>(ro);
    so += sc[d];
    ro += rc[d];
  }
  if (so > INT32_MAX || ro > INT32_MAX)
    throw std::overflow_error("expert all-to-all: more than 2^31 elements in one exchange");
  Kokkos::fence();
  comms.ep->all_to_all_v(send.data(), sc.data(), sd.data(), recv.data(), rc.data(), rd.data(),
                         dtype_of<T>());
}

// The router: probabilities, each token's top-k experts and gates; under replay the recorded
// choices instead. Returns the tokens whose choice the replay changed.
template <typename T>
long GptModel<T>::Impl::route_tokens(const BlockParams& b, MoeActs& mo, const V2& h2) {
  const Space space;
  auto& ps = m.params_;
  const int K = cfg.moe.top_k;
  k::gemm(space, Trans::N, Trans::N, 1.0, h2, ps.w2(b.wr), 0.0, drouter);
  if (b.br >= 0) k::bias_add(space, drouter, ps.w1(b.br));
  k::softmax_forward(space, drouter, mo.probs);
  k::topk_forward(space, mo.probs, K, mo.expert_idx, mo.gate);
  long flips = 0;
  if (m.replay_routing_) {
    if (!replay.data())
      replay = m.ledger_.track(MemCategory::activations, I2("paraxis::moe_replayed", N, K));
    Kokkos::deep_copy(
        replay,
        Kokkos::View<const int**, Kokkos::LayoutRight, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(
            m.replay_routing_, N, K));
    m.replay_routing_ += static_cast<std::size_t>(N) * K;
    flips = k::topk_replay(space, mo.probs, replay, mo.expert_idx, mo.gate);
  }
  return flips;
}

// Rows per (destination rank, its local expert), exchanged so that each expert rank knows how
// many rows of each of its experts every source sends (mo.recv_counts), and the rows sent to and
// received from each rank (mo.send_rows, mo.recv_rows). Returns the rows received.
template <typename T>
int GptModel<T>::Impl::exchange_expert_counts(MoeActs& mo) {
  const int E = cfg.moe.experts, ep = lay.ep, El = E / ep;
  auto& r = *mo.routing;
  // (In the memory space the collectives read: device memory with NCCL or a GPU-aware MPI.)
  std::vector<int> counts(r.counts_host.data(), r.counts_host.data() + E);
  mo.recv_counts.assign(E, 0);
  {
    std::vector<int> c1(ep, El), d1(ep);
    for (int d = 0; d < ep; ++d) d1[d] = d * El;
    Kokkos::deep_copy(count_send, r.counts);
    Kokkos::fence();
    comms.ep->all_to_all_v(count_send.data(), c1.data(), d1.data(), count_recv.data(), c1.data(),
                           d1.data(), DType::i32);
    Kokkos::View<int*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged> got(mo.recv_counts.data(), E);
    Kokkos::deep_copy(got, count_recv);
  }
  mo.send_rows.assign(ep, 0);
  mo.recv_rows.assign(ep, 0);
  for (int d = 0; d < ep; ++d)
    for (int e = 0; e < El; ++e) {
      mo.send_rows[d] += counts[d * El + e];
      mo.recv_rows[d] += mo.recv_counts[d * El + e];
    }
  int R = 0;
  for (int s = 0; s < ep; ++s) R += mo.recv_rows[s];
  return R;
}

// Received rows are source-major (then expert); experts want expert-major (then source, i.e.
// token order of source 0, then source 1, ...): the two permutations (mo.to_expert_order,
// mo.to_source_order) of the R received rows, and each local expert's first row.
template <typename T>
void GptModel<T>::Impl::expert_major_order(MoeActs& mo, int R) {
  const int ep = lay.ep, El = cfg.moe.experts / ep;
  std::vector<int> src_first(ep + 1, 0);
  for (int s = 0; s < ep; ++s) src_first[s + 1] = src_first[s] + mo.recv_rows[s];
  std::vector<int> to_expert(R), to_source(R);
  mo.expert_offsets.assign(El + 1, 0);
  int i = 0;
  for (int e = 0; e < El; ++e) {
    for (int s = 0; s < ep; ++s) {
      int first = src_first[s];
      for (int e2 = 0; e2 < e; ++e2) first += mo.recv_counts[s * El + e2];
      for (int j = 0; j < mo.recv_counts[s * El + e]; ++j) {
        to_expert[i] = first + j;
        to_source[first + j] = i;
        ++i;
      }
    }
    mo.expert_offsets[e + 1] = i;
  }
  grow(mo.to_expert_order, "paraxis::moe_to_expert_order", R);
  grow(mo.to_source_order, "paraxis::moe_to_source_order", R);
  auto copy_index = [&](const std::vector<int>& host, const I1& dev) {
    if (host.empty()) return;
    Kokkos::View<const int*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged> hv(host.data(),
                                                                            host.size());
    Kokkos::deep_copy(Kokkos::subview(dev, std::make_pair(std::size_t(0), host.size())), hv);
  };
  copy_index(to_expert, mo.to_expert_order);
  copy_index(to_source, mo.to_source_order);
}

// The experts' forward over the ep group: each row to its expert's rank, the experts, and each
// output row back to its token's rank (into mo.ye).
template <typename T>
void GptModel<T>::Impl::experts_forward_ep(const BlockParams& b, MoeActs& mo, const V2& h2) {
  const Space space;
  const int H = cfg.hidden;
  auto& r = *mo.routing;
  const int P = r.rows;
  const int R = exchange_expert_counts(mo);
  mo.local_rows = R;
  expert_major_order(mo, R);
  grow(s_stage, "paraxis::moe_send", std::max(P, R), H);
  grow(s_recv, "paraxis::moe_recv", std::max(P, R), H);
  grow(mo.xe, "paraxis::moe_xe", R, H);
  grow(mo.ue, "paraxis::moe_ue", R, Fl);
  grow(mo.ge, "paraxis::moe_ge", R, Fl);
  grow(mo.ye_local, "paraxis::moe_ye_local", R, H);
  k::moe_gather(space, h2, r, s_stage);
  exchange_rows(s_stage, mo.send_rows, s_recv, mo.recv_rows);
  k::gather_rows(space, s_recv, mo.to_expert_order, R, mo.xe);
  experts_forward(b, mo, mo.expert_offsets, mo.ye_local);
  k::gather_rows(space, mo.ye_local, mo.to_source_order, R, s_stage);
  exchange_rows(s_stage, mo.recv_rows, mo.ye, mo.send_rows);
}

// The layer's routing statistics (tokens and drops per expert, the auxiliary loss), and its
// routing when recorded.
template <typename T>
MoeLayerStats GptModel<T>::Impl::moe_stats(const BlockParams& b, MoeActs& mo, long flips) {
  const Space space;
  const int E = cfg.moe.experts, K = cfg.moe.top_k;
  auto& r = *mo.routing;
  k::moe_router_stats(space, mo.probs, mo.expert_idx, router_requested, router_prob_sum);
  auto req_h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), router_requested);
  auto sum_h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), router_prob_sum);
  std::vector<double> psum(E);
  for (int e = 0; e < E; ++e) psum[e] = static_cast<double>(sum_h(e));
  MoeLayerStats st;
  st.layer = b.layer;
  st.aux_loss = k::moe_aux_loss_value(req_h.data(), psum.data(), N, K, E);
  st.tokens_per_expert.assign(r.counts_host.data(), r.counts_host.data() + E);
  st.dropped_per_expert.assign(r.dropped_host.data(), r.dropped_host.data() + E);
  st.routing_flips = flips;
  if (m.record_routing_) {
    auto idx = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), mo.expert_idx);
    st.routing.assign(idx.data(), idx.data() + idx.size());
  }
  return st;
}

// out [N, H]: the layer's output before the tensor-parallel reduction (partial sums when
// tp > 1). h2 [N, H]: the MoE input, every token of the micro-batch.
template <typename T>
MoeLayerStats GptModel<T>::Impl::moe_forward(const BlockParams& b, MoeActs& mo, const V2& h2,
                                             const V2& out) {
  const Space space;
  const int E = cfg.moe.experts, H = cfg.hidden;
  const long flips = route_tokens(b, mo, h2);
  auto& r = *mo.routing;
  k::moe_build_routing(space, mo.expert_idx, expert_capacity(cfg, N), r);
  const int P = r.rows;
  grow(mo.ye, "paraxis::moe_ye", P, H);
  if (lay.ep == 1) {
    grow(mo.xe, "paraxis::moe_xe", P, H);
    grow(mo.ue, "paraxis::moe_ue", P, Fl);
    grow(mo.ge, "paraxis::moe_ge", P, Fl);
    k::moe_gather(space, h2, r, mo.xe);
    mo.expert_offsets.assign(r.offsets_host.data(), r.offsets_host.data() + E + 1);
    mo.local_rows = P;
    experts_forward(b, mo, mo.expert_offsets, mo.ye);
  } else {
    experts_forward_ep(b, mo, h2);
  }
  k::moe_combine_forward(space, mo.ye, mo.gate, r, out);
  return moe_stats(b, mo, flips);
}

// dout [N, H]: gradient of the MoE output (every token); dh2 [N, H]: receives this rank's
// partial gradient of the MoE input (summed over the tensor-parallel group by the caller).
template <class T>
void GptModel<T>::Impl::moe_backward(const BlockParams& b, MoeActs& mo, const V2& h2,
                                     const V2& dout, const V2& dh2, double aux_scale) {
  const Space space;
  auto& ps = m.params_;
  const int K = cfg.moe.top_k, H = cfg.hidden;
  auto& r = *mo.routing;
  const int P = r.rows, R = mo.local_rows;
  grow(s_dy, "paraxis::moe_dye", P, H);
  grow(s_dx, "paraxis::moe_dxe", P, H);
  k::moe_combine_backward(space, dout, mo.ye, mo.gate, r, s_dy, dgate);
  // Expert outputs are partial over the tensor-parallel group, so is the gate's gradient.
  if (tp_size() > 1) tp_all_reduce(space, tp(), dgate);
  grow(e_dh, "paraxis::moe_dge", R, Fl);
  grow(e_du, "paraxis::moe_due", R, Fl);
  if (lay.ep == 1) {
    experts_backward(b, mo, mo.expert_offsets, s_dy, s_dx);
  } else {
    grow(e_dy, "paraxis::moe_dye_local", R, H);
    grow(e_dx, "paraxis::moe_dxe_local", R, H);
    exchange_rows(s_dy, mo.send_rows, s_recv, mo.recv_rows);
    k::gather_rows(space, s_recv, mo.to_expert_order, R, e_dy);
    experts_backward(b, mo, mo.expert_offsets, e_dy, e_dx);
    k::gather_rows(space, e_dx, mo.to_source_order, R, s_stage);
    exchange_rows(s_stage, mo.recv_rows, s_dx, mo.send_rows);
  }
  Kokkos::deep_copy(dh2, T(0));
  k::moe_gather_backward(space, s_dx, r, dh2);
  k::topk_backward(space, dgate, mo.expert_idx, dprobs);
  if (aux_scale != 0) {
    // The statistics of this micro-batch were computed in forward; recompute the requested
    // counts (cheap) since the scratch is shared between layers.
    k::moe_router_stats(space, mo.probs, mo.expert_idx, router_requested, router_prob_sum);
    k::moe_aux_loss_backward(space, router_requested, static_cast<long>(N), K, aux_scale, dprobs);
  }
  k::softmax_backward(space, mo.probs, dprobs, drouter);
  k::gemm(space, Trans::T, Trans::N, 1.0, h2, drouter, 1.0, ps.g2(b.wr));
  if (b.br >= 0) k::bias_grad_accumulate(space, drouter, ps.g1(b.br));
  // The router's input gradient is whole on every tensor-parallel rank: add it once.
  if (lay.tp_rank == 0) k::gemm(space, Trans::N, Trans::T, 1.0, drouter, ps.w2(b.wr), 1.0, dh2);
}

// B of a split backward, per expert: experts_backward's input-gradient path; the GELU input
// gradient replaces ue (dead once read), for W.
template <class T>
void GptModel<T>::Impl::experts_backward_input(const BlockParams& b, MoeActs& mo,
                                               const std::vector<int>& offsets, const V2& dye,
                                               const V2& dxe) {
  const Space space;
  auto& ps = m.params_;
  for (std::size_t e = 0; e < b.ew1.size(); ++e) {
    const int lo = offsets[e], hi = offsets[e + 1];
    if (lo == hi) continue;
    auto rows = std::make_pair(lo, hi);
    auto dge = Kokkos::subview(e_dh, rows, Kokkos::ALL);
    auto ue = Kokkos::subview(mo.ue, rows, Kokkos::ALL);
    row_parallel_backward_input(space, Kokkos::subview(dye, rows, Kokkos::ALL), ps.w2(b.ew2[e]),
                                dge, 0.0);
    k::gelu_backward(space, ue, dge, ue);
    const auto dx = Kokkos::subview(dxe, rows, Kokkos::ALL);
    column_parallel_backward_input(space, tpg(), ue, ps.w2(b.ew1[e]), dx, 0.0, dx,
                                   TpReduce::deferred);
  }
}

// W of a split backward, per expert: experts_backward's weight gradients from the kept output
// gradients dye and GELU input gradients (in ue).
template <class T>
void GptModel<T>::Impl::experts_backward_weight(const BlockParams& b, MoeActs& mo,
                                                const std::vector<int>& offsets, const V2& dye) {
  const Space space;
  auto& ps = m.params_;
  for (std::size_t e = 0; e < b.ew1.size(); ++e) {
    const int lo = offsets[e], hi = offsets[e + 1];
    if (lo == hi) continue;
    auto rows = std::make_pair(lo, hi);
    row_parallel_backward_weight(space, Kokkos::subview(dye, rows, Kokkos::ALL),
                                 Kokkos::subview(mo.ge, rows, Kokkos::ALL), ps.g2(b.ew2[e]),
                                 ps.g1(b.eb2[e]));
    column_parallel_backward_weight(space, Kokkos::subview(mo.ue, rows, Kokkos::ALL),
                                    Kokkos::subview(mo.xe, rows, Kokkos::ALL), ps.g2(b.ew1[e]),
                                    ps.g1(b.eb1[e]));
  }
}

// B of a split backward: moe_backward without the router's and the experts' weight gradients.
// The experts' output gradients are kept where their outputs were (ye, or ye_local with expert
// parallelism: both read last by this backward's first steps), the router's gradient where its
// probabilities were.
template <class T>
void GptModel<T>::Impl::moe_backward_input(const BlockParams& b, MoeActs& mo, const V2& dout,
                                           const V2& dh2, double aux_scale) {
  const Space space;
  auto& ps = m.params_;
  const int K = cfg.moe.top_k, H = cfg.hidden;
  auto& r = *mo.routing;
  const int P = r.rows, R = mo.local_rows;
  grow(s_dy, "paraxis::moe_dye", P, H);
  grow(s_dx, "paraxis::moe_dxe", P, H);
  k::moe_combine_backward(space, dout, mo.ye, mo.gate, r, s_dy, dgate);
  if (tp_size() > 1) tp_all_reduce(space, tp(), dgate);
  grow(e_dh, "paraxis::moe_dge", R, Fl);
  grow(e_du, "paraxis::moe_due", R, Fl);
  auto first = [](int n) { return std::make_pair(0, n); };
  if (lay.ep == 1) {
    experts_backward_input(b, mo, mo.expert_offsets, s_dy, s_dx);
    Kokkos::deep_copy(Kokkos::subview(mo.ye, first(P), Kokkos::ALL),
                      Kokkos::subview(s_dy, first(P), Kokkos::ALL));
  } else {
    grow(e_dy, "paraxis::moe_dye_local", R, H);
    grow(e_dx, "paraxis::moe_dxe_local", R, H);
    exchange_rows(s_dy, mo.send_rows, s_recv, mo.recv_rows);
    k::gather_rows(space, s_recv, mo.to_expert_order, R, e_dy);
    experts_backward_input(b, mo, mo.expert_offsets, e_dy, e_dx);
    Kokkos::deep_copy(Kokkos::subview(mo.ye_local, first(R), Kokkos::ALL),
                      Kokkos::subview(e_dy, first(R), Kokkos::ALL));
    k::gather_rows(space, e_dx, mo.to_source_order, R, s_stage);
    exchange_rows(s_stage, mo.recv_rows, s_dx, mo.send_rows);
  }
  Kokkos::deep_copy(dh2, T(0));
  k::moe_gather_backward(space, s_dx, r, dh2);
  k::topk_backward(space, dgate, mo.expert_idx, dprobs);
  if (aux_scale != 0) {
    k::moe_router_stats(space, mo.probs, mo.expert_idx, router_requested, router_prob_sum);
    k::moe_aux_loss_backward(space, router_requested, static_cast<long>(N), K, aux_scale, dprobs);
  }
  k::softmax_backward(space, mo.probs, dprobs, drouter);
  Kokkos::deep_copy(mo.probs, drouter);
  if (lay.tp_rank == 0) k::gemm(space, Trans::N, Trans::T, 1.0, drouter, ps.w2(b.wr), 1.0, dh2);
}

// W of a split backward: the router's weight gradient (h2: the MoE input, every token) and the
// experts'.
template <class T>
void GptModel<T>::Impl::moe_backward_weight(const BlockParams& b, MoeActs& mo, const V2& h2) {
  const Space space;
  auto& ps = m.params_;
  k::gemm(space, Trans::T, Trans::N, 1.0, h2, mo.probs, 1.0, ps.g2(b.wr));
  if (b.br >= 0) k::bias_grad_accumulate(space, mo.probs, ps.g1(b.br));
  experts_backward_weight(b, mo, mo.expert_offsets, lay.ep == 1 ? mo.ye : mo.ye_local);
}

#define PARAXIS_GPT_MODEL_MOE(T)                                                                 \
  template void GptModel<T>::Impl::experts_forward(const BlockParams&, MoeActs&,                 \
                                                   const std::vector<int>&, const V2&);          \
  template void GptModel<T>::Impl::experts_backward(                                             \
      const BlockParams&, MoeActs&, const std::vector<int>&, const V2&, const V2&);              \
  template void GptModel<T>::Impl::exchange_rows(const V2&, const std::vector<int>&, const V2&,  \
                                                 const std::vector<int>&);                       \
  template MoeLayerStats GptModel<T>::Impl::moe_forward(const BlockParams&, MoeActs&, const V2&, \
                                                        const V2&);                              \
  template void GptModel<T>::Impl::moe_backward(const BlockParams&, MoeActs&, const V2&,         \
                                                const V2&, const V2&, double);                   \
  template void GptModel<T>::Impl::experts_backward_input(                                       \
      const BlockParams&, MoeActs&, const std::vector<int>&, const V2&, const V2&);              \
  template void GptModel<T>::Impl::experts_backward_weight(const BlockParams&, MoeActs&,         \
                                                           const std::vector<int>&, const V2&);  \
  template void GptModel<T>::Impl::moe_backward_input(const BlockParams&, MoeActs&, const V2&,   \
                                                      const V2&, double);                        \
  template void GptModel<T>::Impl::moe_backward_weight(const BlockParams&, MoeActs&, const V2&);
PARAXIS_GPT_MODEL_MOE(double)
PARAXIS_GPT_MODEL_MOE(float)
PARAXIS_GPT_MODEL_MOE(paraxis::bf16)
#undef PARAXIS_GPT_MODEL_MOE

}  // namespace paraxis::model
