"""Replays stopping rules on the few-shot runs' record logs of run.sh (unpacked from
raw.tar.xz when they are not here): per run, whether the model's scores tracked, its
trials and best, and for each rule (share, window of trials) the trial it would have
stopped at and the best by then as a share of the run's final best."""
import subprocess
HERE = __import__("os").path.dirname(__import__("os").path.abspath(__file__))
if not __import__("glob").glob(HERE + "/*.jsonl"):
    subprocess.run(["tar", "-xJf", HERE + "/raw.tar.xz", "-C", HERE], check=True)
import json,glob,os
def curve(path):
    best=0;c=[]
    for l in open(path):
        r=json.loads(l); g=r.get('gflops') or 0
        best=max(best,g); c.append(best)
    return c
rows=[]
for d in sorted(glob.glob(HERE+'/*.jsonl')):
    name=os.path.basename(d)[:-len('.jsonl')]
    err=open(d[:-len('.jsonl')]+'.notes').read()
    tracks='do not track' not in err
    c=curve(d); n=len(c)
    out=[name, 'tracks' if tracks else 'no-track', n, round(c[-1],1)]
    for within,window in [(0.05,16),(0.02,16),(0.02,24)]:
        stop=n
        for t in range(16,n+1,8):
            if t>window and c[t-1] < c[t-1-window]*(1+within) and not tracks:
                stop=t;break
        out.append(f"{stop}:{c[stop-1]/c[-1]:.3f}")
    rows.append(out)
print("run tracks trials best  R(5%,16) R(2%,16) R(2%,24)  [stop trial : share of final best]")
for r in rows: print(*r)
