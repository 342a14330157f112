// The collective programs (kernels/core/collectives), run sequentially without threads: every rank executes its
// primitives in turn over FIFOs of the lane's capacity (nslots), so the pairing of sends and receives, the absence
// of credit deadlocks, and the data each program computes are checked for many rank counts, slot sizes, slot
// counts and channel counts, against the independent reference.
#include <gtest/gtest.h>

#include <deque>
#include <vector>

#include "../../kernels/core/collectives/collectives.h"
#include "../../kernels/host/exec_host.h"
#include "reference.h"

namespace dfccl::test {
namespace {

using namespace dfccl::core;

core::Kind kind_of(Coll c) { return core::Kind(int(c)); }

// Runs one case through the programs; returns wrong elements, or -1 if the programs got stuck or left data.
long run_programs(const Case& c, int n, u32 slot_bytes, u32 nslots, u32 nchan) {
  Buffers b(c, n);
  const u32 es = u32(type_size(c.type));
  std::vector<Desc> desc(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    Desc& d = desc[size_t(r)];
    d = Desc{};
    d.kind = kind_of(c.coll);
    d.dtype = DType(c.type);
    d.op = RedOp(c.op);
    d.count = c.count;
    d.root = c.root;
    d.send = b.send(r);
    d.recv = b.recv(r);
    set_channels(d, nchan);
  }
  // fifo[ch][r]: slots sent by rank r to rank r+1 on channel ch.
  std::vector<std::vector<std::deque<std::vector<uint8_t>>>> fifo(
      nchan, std::vector<std::deque<std::vector<uint8_t>>>(size_t(n)));
  for (u32 ch = 0; ch < nchan; ++ch) {
    std::vector<Geometry> geo;
    std::vector<u64> next_op(size_t(n), 0), nops(static_cast<size_t>(n));
    for (int r = 0; r < n; ++r) {
      geo.push_back(make_geometry(desc[size_t(r)], r, n, ch, slot_bytes, nslots));
      nops[size_t(r)] = program_num_ops(geo.back());
    }
    bool progress = true;
    while (progress) {
      progress = false;
      for (int r = 0; r < n; ++r) {
        if (next_op[size_t(r)] == nops[size_t(r)]) continue;
        const Op op = program_op(geo[size_t(r)], next_op[size_t(r)]);
        auto& in_q = fifo[ch][size_t((r - 1 + n) % n)];
        if ((op.flags & kOpRecv) && in_q.empty()) continue;
        if ((op.flags & kOpSend) && fifo[ch][size_t(r)].size() >= nslots) continue;  // no free slot at next
        if (op.nelem * es > slot_bytes) return -2;                                   // a primitive must fit in one slot
        // Every rank and every step of a channel in one protocol (a slot's sender and receiver agree on it), and an
        // LL step within one LL slot.
        if ((op.flags & kOpLL) != (program_op(geo[0], 0).flags & kOpLL)) return -3;
        if ((op.flags & kOpLL) && op.nelem * es > kLLMaxBytes) return -2;
        std::vector<uint8_t> slot_in, slot_out(slot_bytes);
        if (op.flags & kOpRecv) {
          slot_in = std::move(in_q.front());
          in_q.pop_front();
        }
        const Desc& d = desc[size_t(r)];
        const char* src = (op.flags & kOpSrc) ? static_cast<const char*>(d.send) + op.src * es : nullptr;
        char* dst = (op.flags & kOpDst) ? static_cast<char*>(d.recv) + op.dst * es : nullptr;
        const char* in0 = (op.flags & kOpRecv) ? reinterpret_cast<const char*>(slot_in.data()) : src;
        const char* in1 = (op.flags & kOpRecv) ? src : nullptr;
        char* out0 = dst ? dst : reinterpret_cast<char*>(slot_out.data());
        char* out1 = (dst && (op.flags & kOpSend)) ? reinterpret_cast<char*>(slot_out.data()) : nullptr;
        const int divisor = ((op.flags & kOpFinish) && d.op == RedOp::Avg && n > 1) ? n : 0;
        if (op.nelem > 0) {
          dispatch_dtype_op(d.dtype, d.op, [&]<class T, RedOp OP>() {
            reduce_copy<host::HostExec, T, OP>(reinterpret_cast<const T*>(in0), reinterpret_cast<const T*>(in1),
                                               reinterpret_cast<T*>(out0), reinterpret_cast<T*>(out1), op.nelem,
                                               in1 || divisor ? divisor : 0);
          });
        }
        if (op.flags & kOpSend) fifo[ch][size_t(r)].push_back(std::move(slot_out));
        ++next_op[size_t(r)];
        progress = true;
      }
    }
    for (int r = 0; r < n; ++r) {
      if (next_op[size_t(r)] != nops[size_t(r)]) return -1;  // stuck: unpaired, or a credit deadlock
      if (!fifo[ch][size_t(r)].empty()) return -1;           // data sent but never received
    }
  }
  long wrong = 0;
  for (int r = 0; r < n; ++r) wrong += long(b.wrong(r));
  return wrong;
}

// Runs every collective on n ranks for the given element types and ops, in and out of place, on one geometry (slot
// bytes, slots, channels); fails naming the first case whose programs do not pair up or give a wrong element. Returns
// how many cases ran.
size_t run_geometry(int n, u32 slot, u32 nslots, u32 nchan, std::initializer_list<dfcclDataType_t> types,
                    std::initializer_list<dfcclRedOp_t> ops) {
  size_t cases = 0;
  for (int coll = 0; coll < 5; ++coll)
    for (size_t count : {size_t(0), size_t(1), size_t(7), size_t(100), size_t(1237)})
      for (dfcclDataType_t t : types)
        for (dfcclRedOp_t op : ops) {
          const bool reduces = coll != int(Coll::AllGather) && coll != int(Coll::Broadcast);
          if (!reduces && op != dfcclSum) continue;
          for (bool in_place : {false, true}) {
            const Case c{Coll(coll), t, op, count, int(count % size_t(n)), in_place};
            const long wrong = run_programs(c, n, slot, nslots, nchan);
            EXPECT_EQ(wrong, 0) << describe(c, n) << " slot=" << slot << " nslots=" << nslots << " nchan=" << nchan
                                << (wrong == -1 ? " (programs do not pair up, or deadlock on credits)" : "")
                                << (wrong == -2 ? " (primitive larger than a slot)" : "")
                                << (wrong == -3 ? " (ranks or steps disagree on the protocol)" : "");
            if (wrong != 0) return cases;
            ++cases;
          }
        }
  return cases;
}

// The geometry (rank count, slot size, slots, channels) with one type of each element size and the sum; every type
// and op on two geometries: a program's steps and sizes depend on the element size, not on the type or the op.
TEST(CorePrograms, EveryCollectiveRankCountSlotAndChannelCount) {
  size_t cases = 0;
  for (int n : {1, 2, 3, 5, 8})
    for (u32 slot : {16u, 48u, 256u, 4096u})
      for (u32 nslots : {2u, 3u, 8u})
        for (u32 nchan : {1u, 3u}) {
          cases +=
              run_geometry(n, slot, nslots, nchan, {dfcclInt8, dfcclFloat16, dfcclFloat32, dfcclFloat64}, {dfcclSum});
          if (HasFailure()) return;
        }
  for (int n : {3, 8})
    cases +=
        run_geometry(n, 48, 3, 3, {dfcclInt8, dfcclFloat16, dfcclFloat32, dfcclFloat64, dfcclBfloat16, dfcclUint64},
                     {dfcclSum, dfcclProd, dfcclMax, dfcclMin, dfcclAvg});
  EXPECT_GT(cases, 10000u);
}

// udiv / umod / div_up (exec.h) give what / and % give: powers of two shift and mask, other divisors take the
// division (cuda_one_gpu_test checks the GPU's paths, 32-bit and 64-bit, against the same operators).
TEST(CorePrograms, DivisionHelpersMatchTheOperators) {
  const u64 dividends[] = {
      0,         1,    2, 3, 7, 8, 1000, 123457, (1ull << 32) - 1, 1ull << 32, (1ull << 32) + 5, 0x123456789abcdefull,
      ~0ull - 1, ~0ull};
  const u64 divisors[] = {
      1,          2,          3,          4,    5, 7, 8, 16, 24, 128, 1000, (1ull << 31), (1ull << 32) - 1,
      1ull << 32, 3ull << 32, 1ull << 63, ~0ull};
  for (u64 a : dividends)
    for (u64 b : divisors) {
      EXPECT_EQ(udiv(a, b), a / b) << a << " / " << b;
      EXPECT_EQ(umod(a, b), a % b) << a << " % " << b;
      if (a <= ~0ull - b) {
        EXPECT_EQ(div_up(a, b), (a + b - 1) / b) << a << " / " << b << " rounded up";
      }
    }
}

TEST(CorePrograms, DataChannelsAndRanges) {
  EXPECT_EQ(data_channels(0, 16, 1024), 1u);
  EXPECT_EQ(data_channels(10 * 1024, 16, 1024), 10u);
  EXPECT_EQ(data_channels(1 << 30, 16, 1024), 16u);
  // The channels' parts, as the host plans them (set_channels) and each block takes its own (make_geometry), cover
  // the buffer exactly once, boundaries on 16 bytes.
  for (u64 total : {0ull, 1ull, 15ull, 1000ull, 123457ull})
    for (u32 nchan : {1u, 2u, 7u}) {
      Desc d{};
      d.kind = Kind::AllReduce;
      d.dtype = DType::F32;
      d.count = total;
      set_channels(d, nchan);
      u64 covered = 0, expect_begin = 0;
      for (u32 ch = 0; ch < nchan + 2; ++ch) {
        const Range r = make_geometry(d, 0, 1, ch, /*slot_bytes=*/1024, /*nslots=*/8).chan;
        if (r.count == 0) continue;
        EXPECT_EQ(r.begin, expect_begin);
        EXPECT_EQ(r.begin % 4, 0u);
        expect_begin = r.begin + r.count;
        covered += r.count;
      }
      EXPECT_EQ(covered, total);
    }
}

// Each primitive is a handshake with the peer even when its slice is empty: programs run no more slices per ring
// step than the data needs (docs/lab/performance-log.md, 3), and the full pipe once it does.
TEST(CorePrograms, SmallCollectivesRunOnlyTheStepsTheirDataNeeds) {
  auto ops = [](Kind kind, u64 count, int n) {
    Desc d{};
    d.kind = kind;
    d.dtype = DType::F32;
    d.count = count;
    set_channels(d, 1);
    return program_num_ops(make_geometry(d, 0, n, 0, /*slot_bytes=*/1024, /*nslots=*/8));
  };
  EXPECT_EQ(ops(Kind::AllReduce, 2, 2), 2u);  // 8 bytes on 2 ranks: one-shot, send then receive
  EXPECT_EQ(ops(Kind::AllReduce, 2, 3), 5u);  // the ring: 2n - 1 primitives
  EXPECT_EQ(ops(Kind::AllReduce, 2, 4), 7u);
  EXPECT_EQ(ops(Kind::AllReduce, 256, 2), 2u);  // one-shot while the channel's data fits one 1 KiB slot
  EXPECT_EQ(ops(Kind::AllGather, 2, 2), 2u);    // n primitives
  EXPECT_EQ(ops(Kind::ReduceScatter, 2, 4), 4u);
  EXPECT_EQ(ops(Kind::AllReduce, 256 + 1, 2), 3u);  // past one slot: the ring, one slice per rank chunk
  // Past 64 KiB per channel the ring again, even where one slot would hold it (256 KiB slots: 16 Ki floats = 64 KiB).
  auto ops_big_slot = [](u64 count) {
    Desc d{};
    d.kind = Kind::AllReduce;
    d.dtype = DType::F32;
    d.count = count;
    set_channels(d, 1);
    return program_num_ops(make_geometry(d, 0, 2, 0, /*slot_bytes=*/256 * 1024, /*nslots=*/4));
  };
  EXPECT_EQ(ops_big_slot(16384), 2u);
  EXPECT_EQ(ops_big_slot(16384 + 4), 3u);
  EXPECT_EQ(ops(Kind::AllReduce, 256 * 2, 2), 3u);
  EXPECT_EQ(ops(Kind::AllReduce, 256 * 2 * 4, 2), 3u * 4u);  // 4 slices per chunk: the full pipe
  EXPECT_EQ(ops(Kind::AllReduce, 256 * 2 * 4 * 3, 2), 3u * 4u * 3u);
}

// The one-shot goes through the LL protocol while the whole collective is channel 0's and fits kLLMaxBytes, on every
// rank alike (the flag depends on the descriptor only), and through Simple past it or when channels share the data.
TEST(CorePrograms, OneShotUsesLLOnlyForOneSmallChannel) {
  auto flags = [](u64 count, DType t, u32 nchan, u32 ch, int rank) {
    Desc d{};
    d.kind = Kind::AllReduce;
    d.dtype = t;
    d.count = count;
    set_channels(d, nchan);
    const Geometry g = make_geometry(d, rank, 2, ch, /*slot_bytes=*/256 * 1024, /*nslots=*/4);
    EXPECT_EQ(program_num_ops(g), 2u);
    return std::pair<u32, u32>{program_op(g, 0).flags, program_op(g, 1).flags};
  };
  for (int rank : {0, 1}) {
    auto [f0, f1] = flags(kLLMaxBytes / 4, DType::F32, 1, 0, rank);
    EXPECT_EQ(f0, kOpSrc | kOpSend | kOpLL);
    EXPECT_EQ(f1, kOpRecv | kOpSrc | kOpDst | kOpFinish | kOpLL);
    EXPECT_EQ(flags(1, DType::I8, 1, 0, rank).first & kOpLL, kOpLL);
    EXPECT_EQ(flags(kLLMaxBytes / 8, DType::F64, 1, 0, rank).second & kOpLL, kOpLL);
    EXPECT_EQ(flags(kLLMaxBytes / 4 + 4, DType::F32, 1, 0, rank).first & kOpLL, 0u);  // past 8 KiB: Simple
    EXPECT_EQ(flags(2 * 1024, DType::F32, 2, 0, rank).first & kOpLL, 0u);             // two channels: Simple
    EXPECT_EQ(flags(2 * 1024, DType::F32, 2, 1, rank).first & kOpLL, 0u);
  }
}

// Every collective goes through LL where its data is channel 0's alone and fits kLLMaxBytes per rank-sized block, on
// any number of ranks (the ring all-reduce, all-gather, reduce-scatter, broadcast and reduce chains, the two-rank
// one-shot), every step of it on every rank; through Simple past 8 KiB, when channels share the data, or on one
// rank (a local copy, no peer).
TEST(CorePrograms, SmallCollectivesUseLLOnEveryStep) {
  auto ll_steps = [](Kind k, u64 count, DType t, u32 nchan, u32 ch, int rank, int n) {
    Desc d{};
    d.kind = k;
    d.dtype = t;
    d.count = count;
    set_channels(d, nchan);
    d.root = n - 1;
    d.send = reinterpret_cast<void*>(uintptr_t(1) << 20);  // not in place: a one-rank copy has steps
    d.recv = reinterpret_cast<void*>(uintptr_t(1) << 30);
    const Geometry g = make_geometry(d, rank, n, ch, /*slot_bytes=*/128 * 1024, /*nslots=*/4);
    u64 ll = 0;
    for (u64 i = 0; i < program_num_ops(g); ++i) ll += (program_op(g, i).flags & kOpLL) ? 1 : 0;
    EXPECT_TRUE(ll == 0 || ll == program_num_ops(g)) << "steps disagree on the protocol";
    return std::pair<u64, u64>{ll, program_num_ops(g)};
  };
  for (int k = 0; k < 5; ++k)
    for (int n : {2, 3, 4, 8})
      for (int rank = 0; rank < n; ++rank) {
        const Kind kind = Kind(k);
        for (auto [count, t] : {std::pair<u64, DType>{1, DType::I8},
                                {kLLMaxBytes / 4, DType::F32},
                                {kLLMaxBytes / 8, DType::F64},
                                {3, DType::BF16}}) {
          const auto [ll, nops] = ll_steps(kind, count, t, 1, 0, rank, n);
          EXPECT_GT(nops, 0u);
          EXPECT_EQ(ll, nops) << "kind " << k << " n " << n << " rank " << rank << " count " << count;
        }
        EXPECT_EQ(ll_steps(kind, kLLMaxBytes / 4 + 4, DType::F32, 1, 0, rank, n).first, 0u);  // past 8 KiB
        EXPECT_EQ(ll_steps(kind, 2 * 1024, DType::F32, 2, 0, rank, n).first, 0u);             // two channels
        EXPECT_EQ(ll_steps(kind, 2 * 1024, DType::F32, 2, 1, rank, n).first, 0u);
      }
  for (int k = 0; k < 5; ++k) EXPECT_EQ(ll_steps(Kind(k), 16, DType::F32, 1, 0, 0, 1).first, 0u);  // one rank
}

}  // namespace
}  // namespace dfccl::test
