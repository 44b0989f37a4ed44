import os, subprocess, shutil, time, threading
from conftest import domain_processes, by_role, RUN_TIMEOUT

def tree_tasks(root_pid):
    kids, threads = {}, {}
    for n in os.listdir("/proc"):
        if not n.isdigit(): continue
        try: st = open(f"/proc/{n}/status").read()
        except OSError: continue
        pp = th = 0
        for l in st.splitlines():
            if l.startswith("PPid:"): pp = int(l.split()[1])
            elif l.startswith("Threads:"): th = int(l.split()[1])
        kids.setdefault(pp, []).append(int(n)); threads[int(n)] = th
    total, todo = 0, [root_pid]
    while todo:
        p = todo.pop(); total += threads.get(p, 0); todo += kids.get(p, [])
    return total

def run(rig, args):
    lz = rig.lz
    probe = "/tmp/nproc/nproc_probe"
    shutil.copy(probe, rig.ws / "nproc_probe"); os.chown(rig.ws / "nproc_probe", lz.user.uid, lz.user.gid)
    argv = [str(lz.bin), *rig.args("bb", ["/workspace/nproc_probe", *args], rig.ws)]
    s = rig.start("bb", ["/workspace/nproc_probe", *args])
    peak = [0]; stop = [False]
    def sample():
        while not stop[0]:
            sn = by_role(lz.root, "supervisor-ns")
            if sn: peak[0] = max(peak[0], tree_tasks(sn[0].pid))
            time.sleep(0.3)
    t = threading.Thread(target=sample); t.start()
    r = s.finish(timeout=RUN_TIMEOUT); stop[0] = True; t.join()
    return r, peak[0]

def test_explore(rig):
    rig.config({"bb": {}})
    out = []
    for a in (["uids", "1", "300", "2"], ["uids", "4", "150", "2"]):
        r, peak = run(rig, a)
        out.append(f"{a} rc={r.returncode} peak={peak}\n{r.stdout[-400:]}\n{r.stderr[-300:]}")
        open("/tmp/nproc/explore2.txt", "w").write("\n".join(out))
