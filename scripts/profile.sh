#!/usr/bin/env bash
# On a GPU machine: Nsight Compute on one launch of an evosdpa kernel, summarised in a short table:
# tensor-pipe utilisation, DRAM throughput, shared-memory bank conflicts, achieved occupancy and the
# top stall reasons. Clocks are left as the card runs them (--clock-control none).
#   scripts/profile.sh [--build DIR] [evosdpa-bench options]
#   e.g. scripts/profile.sh --batch 4 --heads 16 --seqlen 4096 --head-dim 128 --kernel mma_sm80
# Without options: B=4 H16 L4096 D128 fp16, kernel mma_sm80. Raw CSV in $OUT (or /tmp) as ncu-raw.csv.
set -euo pipefail
cd "$(dirname "$0")/.."
build=build
if [ "${1:-}" = "--build" ]; then build=$2; shift 2; fi
args=("$@")
[ ${#args[@]} -gt 0 ] || args=(--batch 4 --heads 16 --seqlen 4096 --head-dim 128 --kernel mma_sm80)
logs=${OUT:-/tmp}
mkdir -p "$logs"
csv="$logs/ncu-raw.csv"
metrics=(
  gpu__time_duration.sum
  sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active
  sm__inst_executed_pipe_tensor_op_hmma.avg.pct_of_peak_sustained_active
  dram__throughput.avg.pct_of_peak_sustained_elapsed
  lts__t_sectors_op_read.sum
  l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum
  l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum
  l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum
  smsp__inst_executed_op_ldsm.sum
  sm__warps_active.avg.pct_of_peak_sustained_active
  launch__registers_per_thread
  launch__occupancy_limit_registers
  launch__occupancy_limit_shared_mem
)
metric_list=$(IFS=,; echo "${metrics[*]}")
# One launch after the bench's warm-up: skip the verification launch and two warm-ups.
ncu --clock-control none --kernel-name regex:attention_kernel --launch-skip 3 --launch-count 1 \
  --metrics "$metric_list,regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio" \
  --csv --page raw "$build/bench/evosdpa-bench" "${args[@]}" --warmup 2 --iters 2 --max-iters 2 \
  >"$csv" 2>"$logs/ncu-stderr.log" || { echo "ncu failed: see $logs/ncu-stderr.log"; tail -5 "$logs/ncu-stderr.log"; exit 1; }
python3 - "$csv" <<'PY'
import csv, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if r]
head = next(i for i, r in enumerate(rows) if "ID" in r and "Kernel Name" in r)
names, units, values = rows[head], rows[head + 1], rows[head + 2]
m = {n: (v, u) for n, u, v in zip(names, units, values)}
def get(n):
    v, u = m.get(n, ("n/a", ""))
    return f"{v} {u}".strip()
print(f"kernel: {m['Kernel Name'][0][:100]}")
print("| metric | value |\n|---|---:|")
for label, n in [("duration", "gpu__time_duration.sum"),
                 ("tensor pipe active (% of peak)", "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active"),
                 ("tensor-op issue, HMMA and HGMMA (% of peak)", "sm__inst_executed_pipe_tensor_op_hmma.avg.pct_of_peak_sustained_active"),
                 ("DRAM throughput (% of peak)", "dram__throughput.avg.pct_of_peak_sustained_elapsed"),
                 ("L2 read sectors", "lts__t_sectors_op_read.sum"),
                 ("shared ld bank conflicts", "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum"),
                 ("shared st bank conflicts", "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum"),
                 ("shared ld wavefronts", "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum"),
                 ("ldmatrix instructions", "smsp__inst_executed_op_ldsm.sum"),
                 ("achieved occupancy (% of peak warps)", "sm__warps_active.avg.pct_of_peak_sustained_active"),
                 ("registers per thread", "launch__registers_per_thread"),
                 ("block limit: registers / shared mem", None)]:
    if n is None:
        print(f"| {label} | {get('launch__occupancy_limit_registers')} / {get('launch__occupancy_limit_shared_mem')} |")
    else:
        print(f"| {label} | {get(n)} |")
stalls = []
for n, (v, u) in m.items():
    if n.startswith("smsp__average_warps_issue_stalled_") and n.endswith("_per_issue_active.ratio"):
        try:
            stalls.append((float(v.replace(",", "")), n[len("smsp__average_warps_issue_stalled_"):-len("_per_issue_active.ratio")]))
        except ValueError:
            pass
print("\ntop stall reasons (warps stalled per issued instruction):")
for v, n in sorted(stalls, reverse=True)[:6]:
    print(f"  {n:24s} {v:.2f}")
PY
