"""The model suite (BENCHMARKS.md "Model suite"): each model of bench/models.cc trained in
stepscope (build/model_bench) and in Debian's PyTorch (bench/pytorch_models.py), side by side.

For R rounds x models x threads, runs model_bench, then pytorch_models.py (a fresh process each;
the order alternates from round to round so that neither side always runs on a machine the other
has just warmed or heated), takes the median over the rounds of each figure, and prints one row
per model and thread count:

  stepscope ms, pytorch ms   median wall time of a training step (each run: the median of its
                             timed steps)
  ratio                      stepscope / pytorch; target <= 0.8
  RSS MiB                    peak resident set of each process (ru_maxrss); target: stepscope's
                             <= PyTorch's
  faults/step                minor page faults per timed step of each process
  GFLOP/s, % peak            stepscope's rate on the step's GEMM and convolution FLOPs (counted from
                             the model, model_bench --list), against the machine's single-core sgemm
                             rate (model_bench --gemm-peak) times the threads

PyTorch's convolutions run on oneDNN, as stepscope's do; its Linear layers on OpenBLAS, which runs
with OPENBLAS_CORETYPE set to the kernels stepscope would pick for its float64 GEMMs (unless the
environment already sets it, as this workplace does on some CPUs); scripts/bench.sh and
scripts/bench_models.sh select OpenBLAS's OpenMP build for PyTorch's libblas first.

    python3 bench/compare_models.py [--models mlp,lenet] [--threads 1,2] [--rounds 3]
        [--steps N] [--warmup W] [--build-dir build] [--markdown FILE] [--no-pytorch]
"""
import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TARGET_RATIO = 0.8


def log(message):
    print(message, file=sys.stderr, flush=True)


def run_json(command, env=None):
    """Runs `command`; returns its stdout's last line as JSON."""
    done = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    if done.returncode != 0:
        raise SystemExit(f"compare_models: {shlex.join(command)} failed ({done.returncode}):\n{done.stderr}")
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    try:
        return json.loads(lines[-1])
    except (IndexError, json.JSONDecodeError):
        raise SystemExit(f"compare_models: {shlex.join(command)} printed no JSON line:\n{done.stdout}{done.stderr}")


def machine():
    cpu = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} cores"


def load_average():
    return "%.2f %.2f %.2f" % os.getloadavg()


def fmt_duration(seconds):
    seconds = int(seconds)
    return f"{seconds // 60}m{seconds % 60:02d}s"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default=None, help="comma-separated (default: every model of model_bench --list)")
    parser.add_argument("--threads", default="1,2", help="comma-separated thread counts (default 1,2)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=None, help="timed steps per run (default: the model's own)")
    parser.add_argument("--warmup", type=int, default=None, help="warm-up steps per run (default: max(2, steps/5))")
    parser.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    parser.add_argument("--python", default="/usr/bin/python3", help="the Python that has torch")
    parser.add_argument("--markdown", default=None, help="also write the table as markdown to FILE")
    parser.add_argument("--json", default=None, help="also write every run's JSON line to FILE")
    parser.add_argument("--no-pytorch", action="store_true", help="the stepscope side only")
    args = parser.parse_args()

    model_bench = os.path.join(args.build_dir, "model_bench")
    if not os.access(model_bench, os.X_OK):
        raise SystemExit(f"compare_models: no {model_bench}: build it (cmake --build {args.build_dir} --target model_bench)")
    listing = subprocess.run([model_bench, "--list"], stdout=subprocess.PIPE, text=True, check=True).stdout
    specs = {m["name"]: m for m in map(json.loads, listing.splitlines())}
    models = args.models.split(",") if args.models else list(specs)
    for name in models:
        if name not in specs:
            raise SystemExit(f"compare_models: unknown model {name} (model_bench --list: {', '.join(specs)})")
    threads = [int(t) for t in args.threads.split(",")]
    sides = ["stepscope"] if args.no_pytorch else ["stepscope", "pytorch"]

    load_before = load_average()
    log(f"compare_models: measuring the single-core GEMM peak (model_bench --gemm-peak)")
    peak = run_json([model_bench, "--gemm-peak"])
    core = peak["openblas_core"]
    torch_env = dict(os.environ)
    torch_env.setdefault("OPENBLAS_CORETYPE", core)

    def command(side, model, t):
        steps = args.steps or specs[model]["default_steps"]
        extra = ["--threads", str(t), "--steps", str(steps)]
        if args.warmup is not None:
            extra += ["--warmup", str(args.warmup)]
        if side == "stepscope":
            return [model_bench, "--model", model] + extra, None
        return [args.python, os.path.join(HERE, "pytorch_models.py"), "--model", model] + extra, torch_env

    runs = [(r, model, t) for r in range(args.rounds) for model in models for t in threads]
    schedule = [(s, m, t) for r, m, t in runs for s in sides]  # order within a round does not matter here
    total = len(schedule)
    results = {}  # (side, model, threads) -> [json]
    durations = {}  # (side, model, threads) -> seconds of its last run
    all_lines = []
    done = 0
    start = time.monotonic()
    for r, model, t in runs:
        order = sides if r % 2 == 0 else list(reversed(sides))
        for side in order:
            key = (side, model, t)
            # ETA: each remaining run costs what it cost last round, or the mean so far.
            mean = (time.monotonic() - start) / done if done else 0
            remaining = sum(durations.get(k, mean) for k in schedule[done:])
            log(f"[{done + 1}/{total}] round {r + 1}/{args.rounds}: {model} {side} threads={t}"
                + (f" (ETA {fmt_duration(remaining)})" if done else ""))
            cmd, env = command(side, model, t)
            run_start = time.monotonic()
            line = run_json(cmd, env)
            durations[key] = time.monotonic() - run_start
            results.setdefault(key, []).append(line)
            all_lines.append(line)
            done += 1
    load_after = load_average()

    def med(side, model, t, field):
        values = [line[field] for line in results.get((side, model, t), []) if line.get(field) is not None]
        return statistics.median(values) if values else None

    rows = []
    problems = []
    notes = []
    for model in models:
        for t in threads:
            s_ms = med("stepscope", model, t, "median_ms")
            p_ms = med("pytorch", model, t, "median_ms")
            s_rss = med("stepscope", model, t, "max_rss_kib") / 1024
            p_rss = med("pytorch", model, t, "max_rss_kib")
            p_rss = p_rss / 1024 if p_rss is not None else None
            gflops = specs[model]["flops_per_step"] / (s_ms * 1e6)
            row = {
                "model": model, "threads": t, "stepscope_ms": s_ms, "pytorch_ms": p_ms,
                "ratio": s_ms / p_ms if p_ms else None,
                "stepscope_rss_mib": s_rss, "pytorch_rss_mib": p_rss,
                "stepscope_faults": med("stepscope", model, t, "page_faults_per_step"),
                "pytorch_faults": med("pytorch", model, t, "page_faults_per_step"),
                "gflops": gflops, "peak_pct": 100 * gflops / (peak["gemm_peak_gflops"] * t),
            }
            row["time_ok"] = row["ratio"] is not None and row["ratio"] <= TARGET_RATIO
            row["rss_ok"] = p_rss is not None and s_rss <= p_rss
            rows.append(row)
            if "pytorch" in sides:
                # PyTorch's module may hold parameters stepscope's has not, by design and said so
                # (nn.LSTM's second bias): the check is on the rest, and a note names them.
                p_lines = results[("pytorch", model, t)]
                p_params = {line["parameters"] - line.get("extra_parameters", 0) for line in p_lines}
                extra = p_lines[0].get("extra_parameters", 0)
                if extra and t == threads[0]:
                    notes.append(f"{model}: PyTorch has {extra} parameters more "
                                 f"({p_lines[0].get('extra_parameters_why')}), left out of the check")
                if p_params != {specs[model]["parameters"]}:
                    problems.append(f"{model}: stepscope has {specs[model]['parameters']} parameters, "
                                    f"PyTorch {sorted(p_params)}")

    torch_version = next((line["torch"] for line in all_lines if "torch" in line), None)
    header = [
        f"machine: {machine()}; load average {load_before} before, {load_after} after",
        f"single-core sgemm peak: {peak['gemm_peak_gflops']:.1f} GFLOP/s "
        f"({peak['size']}^3, stepscope MatMul: float32 on oneDNN)",
        f"pytorch: {torch_version} (OPENBLAS_CORETYPE={torch_env['OPENBLAS_CORETYPE']})" if torch_version
        else "pytorch: not run",
        f"{args.rounds} rounds, medians; steps per run: "
        + ", ".join(f"{m} {args.steps or specs[m]['default_steps']}" for m in models),
    ]

    def cell(value, spec):
        return "-" if value is None else format(value, spec)

    def mark(ok, applicable):
        return ("✓" if ok else "✗") if applicable else "-"

    columns = ["model", "threads", "stepscope ms", "pytorch ms", "ratio", "RSS MiB (ss)", "RSS MiB (pt)",
               "faults/step (ss)", "faults/step (pt)", "GFLOP/s", "% peak", "≤0.8x", "RSS≤pt"]
    table = []
    for row in rows:
        has_pt = row["pytorch_ms"] is not None
        table.append([
            row["model"], str(row["threads"]), cell(row["stepscope_ms"], ".3f"), cell(row["pytorch_ms"], ".3f"),
            cell(row["ratio"], ".2f"), cell(row["stepscope_rss_mib"], ".1f"), cell(row["pytorch_rss_mib"], ".1f"),
            cell(row["stepscope_faults"], ".1f"), cell(row["pytorch_faults"], ".1f"),
            cell(row["gflops"], ".1f"), cell(row["peak_pct"], ".0f"),
            mark(row["time_ok"], has_pt), mark(row["rss_ok"], has_pt),
        ])

    widths = [max(len(c), *(len(r[i]) for r in table)) for i, c in enumerate(columns)]
    for line in header:
        print(line)
    print("  ".join(c.rjust(w) if i > 1 else c.ljust(w) for i, (c, w) in enumerate(zip(columns, widths))))
    for r in table:
        print("  ".join(v.rjust(w) if i > 1 else v.ljust(w) for i, (v, w) in enumerate(zip(r, widths))))
    for note in notes:
        print(f"note: {note}")
    for problem in problems:
        print(f"MISMATCH: {problem}")

    if args.markdown:
        invocation = "python3 bench/compare_models.py " + shlex.join(sys.argv[1:])
        with open(args.markdown, "w") as f:
            f.write(f"`{invocation.strip()}`\n\n")
            for line in header:
                f.write(f"- {line}\n")
            f.write("\n| " + " | ".join(columns) + " |\n")
            f.write("|" + "|".join("---" if i < 2 else "---:" for i in range(len(columns))) + "|\n")
            for r in table:
                f.write("| " + " | ".join(r) + " |\n")
            for note in notes:
                f.write(f"\nNote: {note}.\n")
        log(f"compare_models: markdown table in {args.markdown}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"gemm_peak": peak, "models": [specs[m] for m in models], "runs": all_lines, "rows": rows}, f,
                      indent=1)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
