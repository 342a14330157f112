// The transport on UCX's UCP tag matching (transport.h states the contract). One context and one worker in
// UCS_THREAD_MODE_SINGLE; endpoints in UCP_ERR_HANDLING_MODE_PEER, so that a peer's death is an error callback
// (recorded, reported by take_peer_failures()) and its requests fail, instead of an abort or a hang. Requests are
// polled (no completion callbacks): a Req indexes a record holding the UCX request until test() reports it.
#include <fmt/format.h>
#include <ucp/api/ucp.h>

#include <thread>

#include "net/transport.h"

namespace dfccl::net {

namespace {

using Clock = std::chrono::steady_clock;

// Rounds of ucp_worker_progress per progress() call: bounds the call while letting a burst of events drain.
constexpr unsigned kProgressRounds = 16;
// How long the destructor waits for cancelled requests and forced closes before it frees them regardless.
constexpr auto kTeardownBudget = std::chrono::milliseconds(1000);

std::string ucs_message(ucs_status_t s) { return ucs_status_string(s); }

bool is_connection_error(ucs_status_t s) {
  return s == UCS_ERR_CONNECTION_RESET || s == UCS_ERR_ENDPOINT_TIMEOUT || s == UCS_ERR_UNREACHABLE ||
         s == UCS_ERR_REJECTED || s == UCS_ERR_IO_ERROR || s == UCS_ERR_NOT_CONNECTED;
}

class UcxTransport;

struct PeerRec {
  UcxTransport* owner = nullptr;
  Peer handle;
  ucp_ep_h ep = nullptr;
  std::string name;
  bool failed = false;   // the error callback fired
  bool closing = false;  // close() started: later callbacks are ours, not the peer's
  std::string failure;
};

struct ReqRec {
  std::uint32_t generation = 0;
  bool in_use = false;
  bool is_recv = false;
  bool finished = false;  // `done` holds the final outcome (completed at posting, or seen by test())
  void* ucx = nullptr;    // the UCX request while it is pending
  Peer peer;
  std::size_t bytes = 0;
  Tag tag = 0;
  ucp_tag_recv_info_t info{};
  Completion done;
};

class UcxTransport final : public Transport {
 public:
  ~UcxTransport() override { teardown(); }

  Status init(const Options& options);

  const std::vector<std::byte>& address() const override { return address_; }
  Result<Peer> connect(const std::vector<std::byte>& address, std::string_view name) override;
  Result<Req> isend(Peer peer, Tag tag, const void* data, std::size_t bytes) override;
  Result<Req> irecv(Tag tag, Tag mask, void* data, std::size_t bytes) override;
  Completion test(Req req) override;
  Status cancel(Req req) override;
  unsigned progress() override;
  Status close(Peer peer, CloseMode mode, std::chrono::milliseconds timeout) override;
  std::vector<PeerFailure> take_peer_failures() override { return std::exchange(failures_, {}); }
  std::string peer_name(Peer peer) const override {
    const PeerRec* p = find_peer(peer);
    return p ? p->name : std::string();
  }

  // The endpoint error callback (UCX calls it from ucp_worker_progress, on the driving thread).
  static void on_ep_error(void* arg, ucp_ep_h ep, ucs_status_t status);

 private:
  Status make_context(const Options& options);
  PeerRec* find_peer(Peer peer) const;
  ReqRec* find_req(Req req);
  Req new_req(bool is_recv, Peer peer, std::size_t bytes, Tag tag);
  void free_req(Req req);
  Result<Req> posted(Req req, ucs_status_ptr_t sp, const char* what);
  Completion outcome(const ReqRec& r, ucs_status_t status) const;
  bool wait_request(void* request, Clock::time_point deadline);
  bool sends_pending(const PeerRec& p) const;
  bool flush_peer(PeerRec& p, Clock::time_point deadline);
  Status close_ep(PeerRec& p, bool force, Clock::time_point deadline);
  void reap_orphans();
  void release_requests(Clock::time_point deadline);
  void teardown();

  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  std::vector<std::byte> address_;
  std::vector<std::unique_ptr<PeerRec>> peers_;  // stable addresses: the error callback's argument
  std::vector<ReqRec> reqs_;
  std::vector<std::uint32_t> free_reqs_;
  std::vector<PeerFailure> failures_;
  std::vector<void*> orphans_;  // UCX requests nobody tests any more (closes past their deadline): freed when done
};

Status UcxTransport::make_context(const Options& options) {
  ucp_config_t* config = nullptr;
  ucs_status_t s = ucp_config_read(nullptr, nullptr, &config);
  if (s != UCS_OK) return {Code::kError, "UCX: reading the configuration failed: " + ucs_message(s)};
  for (const auto& [name, value] : options.ucx_config) {
    s = ucp_config_modify(config, name.c_str(), value.c_str());
    if (s != UCS_OK) {
      ucp_config_release(config);
      return {Code::kInvalid, fmt::format("UCX setting {}={}: {}", name, value, ucs_message(s))};
    }
  }
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES;
  params.features = UCP_FEATURE_TAG;
  s = ucp_init(&params, config, &context_);
  ucp_config_release(config);
  if (s != UCS_OK) return {Code::kError, "UCX: ucp_init failed: " + ucs_message(s)};
  return {};
}

Status UcxTransport::init(const Options& options) {
  if (Status st = make_context(options); !st.ok()) return st;
  ucp_worker_params_t wp{};
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wp.thread_mode = UCS_THREAD_MODE_SINGLE;
  ucs_status_t s = ucp_worker_create(context_, &wp, &worker_);
  if (s != UCS_OK) return {Code::kError, "UCX: ucp_worker_create failed: " + ucs_message(s)};
  ucp_address_t* addr = nullptr;
  std::size_t len = 0;
  s = ucp_worker_get_address(worker_, &addr, &len);
  if (s != UCS_OK) return {Code::kError, "UCX: ucp_worker_get_address failed: " + ucs_message(s)};
  const auto* bytes = reinterpret_cast<const std::byte*>(addr);
  address_.assign(bytes, bytes + len);
  ucp_worker_release_address(worker_, addr);
  return {};
}

void UcxTransport::on_ep_error(void* arg, ucp_ep_h, ucs_status_t status) {
  auto* p = static_cast<PeerRec*>(arg);
  if (p->failed || p->closing) return;
  p->failed = true;
  p->failure = fmt::format("peer {} failed: {}", p->name, ucs_message(status));
  p->owner->failures_.push_back({p->handle, p->name, p->failure});
}

Result<Peer> UcxTransport::connect(const std::vector<std::byte>& address, std::string_view name) {
  if (address.empty()) return {{}, {Code::kInvalid, fmt::format("connect to {}: empty address", name)}};
  auto rec = std::make_unique<PeerRec>();
  rec->owner = this;
  rec->handle = Peer{static_cast<std::uint32_t>(peers_.size())};
  rec->name = name;
  ucp_ep_params_t ep{};
  ep.field_mask =
      UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
  ep.address = reinterpret_cast<const ucp_address_t*>(address.data());
  ep.err_mode = UCP_ERR_HANDLING_MODE_PEER;
  ep.err_handler.cb = &UcxTransport::on_ep_error;
  ep.err_handler.arg = rec.get();
  ucs_status_t s = ucp_ep_create(worker_, &ep, &rec->ep);
  if (s != UCS_OK) return {{}, {Code::kError, fmt::format("connect to {}: {}", name, ucs_message(s))}};
  peers_.push_back(std::move(rec));
  return {peers_.back()->handle, {}};
}

PeerRec* UcxTransport::find_peer(Peer peer) const {
  if (peer.index >= peers_.size()) return nullptr;
  PeerRec* p = peers_[peer.index].get();
  return p->ep ? p : nullptr;
}

ReqRec* UcxTransport::find_req(Req req) {
  if (req.index >= reqs_.size()) return nullptr;
  ReqRec& r = reqs_[req.index];
  return r.in_use && r.generation == req.generation ? &r : nullptr;
}

Req UcxTransport::new_req(bool is_recv, Peer peer, std::size_t bytes, Tag tag) {
  std::uint32_t index;
  if (!free_reqs_.empty()) {
    index = free_reqs_.back();
    free_reqs_.pop_back();
  } else {
    index = static_cast<std::uint32_t>(reqs_.size());
    reqs_.emplace_back();
  }
  ReqRec& r = reqs_[index];
  const std::uint32_t generation = r.generation + 1;
  r = ReqRec{};
  r.generation = generation;
  r.in_use = true;
  r.is_recv = is_recv;
  r.peer = peer;
  r.bytes = bytes;
  r.tag = tag;
  return Req{index, generation};
}

void UcxTransport::free_req(Req req) {
  reqs_[req.index].in_use = false;
  free_reqs_.push_back(req.index);
}

// Records what ucp_*_nbx returned for `req`: an error (the Req is released and the error returned), immediate
// completion (test() will report it) or a pending UCX request.
Result<Req> UcxTransport::posted(Req req, ucs_status_ptr_t sp, const char* what) {
  ReqRec& r = reqs_[req.index];
  if (UCS_PTR_IS_ERR(sp)) {
    Completion c = outcome(r, UCS_PTR_STATUS(sp));
    free_req(req);
    return {{}, {c.code, fmt::format("{}: {}", what, c.message)}};
  }
  if (sp == nullptr) {
    r.finished = true;
    r.done = outcome(r, UCS_OK);
  } else {
    r.ucx = sp;
  }
  return {req, {}};
}

Completion UcxTransport::outcome(const ReqRec& r, ucs_status_t status) const {
  if (status == UCS_OK)
    return {Code::kOk, r.is_recv ? r.info.length : r.bytes, r.is_recv ? r.info.sender_tag : r.tag, {}};
  const PeerRec* p = r.is_recv ? nullptr : peers_[r.peer.index].get();
  if (p && p->failed) return {Code::kPeerFailed, 0, 0, p->failure};
  if (status == UCS_ERR_CANCELED) {
    if (p && p->closing) return {Code::kCancelled, 0, 0, fmt::format("connection to {} closed", p->name)};
    return {Code::kCancelled, 0, 0, "cancelled"};
  }
  if (status == UCS_ERR_MESSAGE_TRUNCATED)
    return {Code::kTruncated, 0, 0, fmt::format("message larger than the {}-byte receive buffer", r.bytes)};
  if (p && is_connection_error(status))
    return {Code::kPeerFailed, 0, 0, fmt::format("peer {} failed: {}", p->name, ucs_message(status))};
  return {Code::kError, 0, 0, ucs_message(status)};
}

Result<Req> UcxTransport::isend(Peer peer, Tag tag, const void* data, std::size_t bytes) {
  PeerRec* p = find_peer(peer);
  if (!p) return {{}, {Code::kInvalid, "isend: unknown or closed peer"}};
  if (p->failed) return {{}, {Code::kPeerFailed, "isend: " + p->failure}};
  if (!data && bytes)
    return {{}, {Code::kInvalid, fmt::format("isend to {}: null data with {} bytes", p->name, bytes)}};
  const Req req = new_req(false, peer, bytes, tag);
  ucp_request_param_t param{};
  return posted(req, ucp_tag_send_nbx(p->ep, data, bytes, tag, &param), "isend");
}

Result<Req> UcxTransport::irecv(Tag tag, Tag mask, void* data, std::size_t bytes) {
  if (!data && bytes) return {{}, {Code::kInvalid, fmt::format("irecv: null data with {} bytes", bytes)}};
  const Req req = new_req(true, Peer{}, bytes, tag);
  // Always a request (no immediate completion): ucp_tag_recv_request_test then gives the size and sender's tag.
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
  return posted(req, ucp_tag_recv_nbx(worker_, data, bytes, tag, mask, &param), "irecv");
}

Completion UcxTransport::test(Req req) {
  ReqRec* r = find_req(req);
  if (!r) return {Code::kInvalid, 0, 0, "test: unknown request (already reported, or never posted)"};
  if (!r->finished) {
    const ucs_status_t s = r->is_recv ? ucp_tag_recv_request_test(r->ucx, &r->info) : ucp_request_check_status(r->ucx);
    if (s == UCS_INPROGRESS) return {};
    ucp_request_free(r->ucx);
    r->ucx = nullptr;
    r->finished = true;
    r->done = outcome(*r, s);
  }
  Completion c = std::move(r->done);
  free_req(req);
  return c;
}

Status UcxTransport::cancel(Req req) {
  ReqRec* r = find_req(req);
  if (!r) return {Code::kInvalid, "cancel: unknown request"};
  if (!r->is_recv) return {Code::kUnsupported, "cancel: sends cannot be cancelled (close the peer with kForce)"};
  if (r->ucx) ucp_request_cancel(worker_, r->ucx);
  return {};
}

unsigned UcxTransport::progress() {
  unsigned total = 0;
  for (unsigned i = 0; i < kProgressRounds; ++i) {
    const unsigned n = ucp_worker_progress(worker_);
    total += n;
    if (n == 0) break;
  }
  reap_orphans();
  return total;
}

void UcxTransport::reap_orphans() {
  std::erase_if(orphans_, [](void* r) {
    if (ucp_request_check_status(r) == UCS_INPROGRESS) return false;
    ucp_request_free(r);
    return true;
  });
}

// Progresses until `request` completes (true) or the deadline passes (false; the request is left to the caller).
bool UcxTransport::wait_request(void* request, Clock::time_point deadline) {
  while (ucp_request_check_status(request) == UCS_INPROGRESS) {
    if (Clock::now() >= deadline) return false;
    if (progress() == 0) std::this_thread::yield();
  }
  return true;
}

bool UcxTransport::sends_pending(const PeerRec& p) const {
  for (const ReqRec& r : reqs_)
    if (r.in_use && !r.is_recv && r.ucx && r.peer == p.handle && ucp_request_check_status(r.ucx) == UCS_INPROGRESS)
      return true;
  return false;
}

// Waits until the peer's sends completed and flushes its endpoint, until the deadline; true when both finished. (An
// endpoint flush alone may finish while a rendezvous send still waits for its receive, and a graceful close leaves
// such a send pending for ever: only a forced close ends it.)
bool UcxTransport::flush_peer(PeerRec& p, Clock::time_point deadline) {
  while (sends_pending(p)) {
    if (Clock::now() >= deadline) return false;
    if (progress() == 0) std::this_thread::yield();
  }
  ucp_request_param_t param{};
  ucs_status_ptr_t sp = ucp_ep_flush_nbx(p.ep, &param);
  if (sp == nullptr) return true;
  if (UCS_PTR_IS_ERR(sp)) return false;
  const bool done = wait_request(sp, deadline);
  const bool ok = done && ucp_request_check_status(sp) == UCS_OK;
  ucp_request_free(sp);  // a pending flush is released by UCX when the close below ends it
  return ok;
}

Status UcxTransport::close_ep(PeerRec& p, bool force, Clock::time_point deadline) {
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  param.flags = force ? UCP_EP_CLOSE_FLAG_FORCE : 0;
  ucs_status_ptr_t sp = ucp_ep_close_nbx(p.ep, &param);
  p.ep = nullptr;
  if (sp == nullptr || UCS_PTR_IS_ERR(sp)) return {};  // closed (an error status still released the endpoint)
  if (wait_request(sp, deadline)) {
    ucp_request_free(sp);
    return {};
  }
  orphans_.push_back(sp);
  return {Code::kTimeout, fmt::format("close of {}: not confirmed before the deadline", p.name)};
}

Status UcxTransport::close(Peer peer, CloseMode mode, std::chrono::milliseconds timeout) {
  PeerRec* p = find_peer(peer);
  if (!p) return {Code::kInvalid, "close: unknown or closed peer"};
  const auto start = Clock::now();
  const auto deadline = start + timeout;
  p->closing = true;
  // A flush gets half the time; a graceful close after a completed flush is quick, a forced one immediate.
  const bool flushed = mode == CloseMode::kFlush && !p->failed && flush_peer(*p, start + timeout / 2);
  return close_ep(*p, !flushed, deadline);
}

// Destruction: receives cancelled, endpoints force-closed, every UCX request waited for until the deadline and
// freed regardless, then the worker and the context destroyed.
void UcxTransport::release_requests(Clock::time_point deadline) {
  for (ReqRec& r : reqs_) {
    if (!r.in_use || !r.ucx) continue;
    (void)wait_request(r.ucx, deadline);
    ucp_request_free(r.ucx);
    r.ucx = nullptr;
  }
  while (!orphans_.empty() && Clock::now() < deadline) progress();
  for (void* r : orphans_) ucp_request_free(r);
  orphans_.clear();
}

void UcxTransport::teardown() {
  if (worker_) {
    const auto deadline = Clock::now() + kTeardownBudget;
    for (ReqRec& r : reqs_)
      if (r.in_use && r.ucx && r.is_recv) ucp_request_cancel(worker_, r.ucx);
    for (auto& p : peers_) {
      if (!p->ep) continue;
      p->closing = true;
      (void)close_ep(*p, true, deadline);
    }
    release_requests(deadline);
    ucp_worker_destroy(worker_);
  }
  if (context_) ucp_cleanup(context_);
}

}  // namespace

std::string ucx_description() { return fmt::format("UCX {}", ucp_get_version_string()); }

Result<std::unique_ptr<Transport>> make_ucx_transport(const Options& options) {
  auto t = std::make_unique<UcxTransport>();
  Status st = t->init(options);
  if (!st.ok()) return {nullptr, std::move(st)};
  return {std::move(t), {}};
}

}  // namespace dfccl::net
