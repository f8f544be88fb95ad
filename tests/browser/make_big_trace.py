#!/usr/bin/env python3
"""Writes a large Chrome trace laid out as stepscope's timelines are (8 lanes of op slices,
DataFlow arrows between lanes, an allocator counter), for timing viewers on big files:

    tests/browser/make_big_trace.py OUT.json [--slices 400000]

400,000 slices make about 117 MB and just over a million events (issue 15's size)."""
import argparse
import random

parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
parser.add_argument("out")
parser.add_argument("--slices", type=int, default=400000)
args = parser.parse_args()

random.seed(1)
parts = ['{"name":"process_name","ph":"M","pid":0,"args":{"name":"Allocators"}}',
         '{"name":"process_name","ph":"M","pid":1,"args":{"name":"/job:localhost/replica:0/task:0/device:CPU:0 Compute"}}']
parts += ['{"name":"thread_name","ph":"M","pid":1,"tid":%d,"args":{"name":"lane %d"}}' % (t, t) for t in range(8)]
ends, previous, flow, total = [0] * 8, None, 0, 0
for i in range(args.slices):
    lane = i % 8
    start = ends[lane] + random.randint(50, 400)  # ns
    dur = random.randint(300, 3000)
    ends[lane] = start + dur
    parts.append('{"ph":"X","cat":"Op","name":"MatMul","pid":1,"tid":%d,"ts":%.3f,"dur":%.3f,'
                 '"args":{"name":"s%d/MatMul_%d","op":"MatMul"}}' % (lane, start / 1000, dur / 1000, i // 100, i))
    if previous and i % 2 == 0 and previous[1] < start:
        parts.append('{"ph":"s","cat":"DataFlow","name":"t","pid":1,"tid":%d,"ts":%.3f,"id":%d}'
                     % (previous[0], (previous[1] - 1) / 1000, flow))
        parts.append('{"ph":"f","cat":"DataFlow","name":"t","pid":1,"tid":%d,"ts":%.3f,"id":%d,"bp":"e"}'
                     % (lane, start / 1000, flow))
        flow += 1
    previous = (lane, start + dur)
    total = max(0, total + (1024 if i % 3 else -1024))
    parts.append('{"ph":"C","cat":"Memory","name":"cpu memory","pid":0,"tid":0,"ts":%.3f,'
                 '"args":{"bytes in use":%d}}' % (start / 1000, total))
with open(args.out, "w") as f:
    f.write('{"traceEvents":[' + ",".join(parts) + '],"displayTimeUnit":"ns"}')
print(f"{args.out}: {len(parts)} events")
