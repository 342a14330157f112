#!/usr/bin/env bash
# Run 193 (2026-12-03): dfccl_torch's CUDA path, first run: build the extension against the machine's torch, then two
# ranks on GPU 0 run async all_reduce / all_gather / broadcast on CUDA tensors, a torch.cuda.synchronize() between
# two groups' submissions in opposite orders, 20 trials.
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0
t0=$SECONDS
DFCCL_BUILD_DIR=$PWD/.device/dfccl-build MAX_JOBS=16 python3 -m pip install --no-build-isolation --no-deps -q ./python > $OUT/build.log 2>&1; echo "build rc=$? $((SECONDS-t0)) s"
export LD_LIBRARY_PATH=$PWD/.device/dfccl-build/lib:${LD_LIBRARY_PATH:-}
cat > /tmp/cuda_smoke.py <<'PY'
import datetime, os, sys, torch, torch.distributed as dist, torch.multiprocessing as mp
def run(rank, world, path, q):
    try:
        import dfccl_torch  # noqa
        torch.cuda.set_device(0)
        dist.init_process_group("dfccl", init_method=f"file://{path}", rank=rank, world_size=world, timeout=datetime.timedelta(seconds=60))
        g1 = dist.new_group([0, 1]); g2 = dist.new_group([0, 1])
        x = torch.full((1 << 20,), float(rank + 1), device="cuda")
        w = dist.all_reduce(x, async_op=True); w.wait()
        assert torch.all(x == 3.0).item(), "all_reduce"
        out = torch.empty(2 << 20, device="cuda"); dist.all_gather_into_tensor(out, torch.full((1 << 20,), float(rank), device="cuda"))
        assert out[0].item() == 0.0 and out[-1].item() == 1.0, "all_gather"
        y = torch.full((1000,), float(rank), device="cuda"); dist.broadcast(y, 1); assert torch.all(y == 1.0).item(), "broadcast"
        for t in range(20):
            a = torch.full((4096,), 1.0, device="cuda"); b = torch.full((4096,), 2.0, device="cuda")
            order = [(g1, a), (g2, b)] if (rank + t) % 2 == 0 else [(g2, b), (g1, a)]
            ws = []
            for g, tensor in order:
                ws.append(dist.all_reduce(tensor, group=g, async_op=True)); torch.cuda.synchronize()
            for w in ws: w.wait()
            torch.cuda.synchronize()
            assert torch.all(a == 2.0).item() and torch.all(b == 4.0).item(), f"disorder trial {t}"
        dist.destroy_process_group(); q.put((rank, "ok"))
    except Exception as e:
        import traceback; q.put((rank, traceback.format_exc()))
if __name__ == "__main__":
    ctx = mp.get_context("spawn"); q = ctx.Queue(); path = "/tmp/dfccl-store"; 
    if os.path.exists(path): os.remove(path)
    ps = [ctx.Process(target=run, args=(r, 2, path, q)) for r in range(2)]
    [p.start() for p in ps]
    res = [q.get(timeout=240) for _ in ps]; [p.join(30) for p in ps]
    print(res); sys.exit(0 if all(r[1] == "ok" for r in res) else 1)
PY
timeout 280 python3 /tmp/cuda_smoke.py > $OUT/smoke.log 2>&1; echo "smoke rc=$?"
tail -30 $OUT/smoke.log; tail -5 $OUT/build.log
