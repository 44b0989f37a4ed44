import time
from conftest import sh, domain_processes
def test_scratch(rig):
    rig.config({"bb": {}})
    h = rig.hold("bb")
    print([str(p) for p in domain_processes(rig.lz.root)])
    a = rig.start("bb", sh('kill -KILL 1; echo rc=$?; sleep 1; ls /proc; echo alive; sleep 2; echo still'))
    r = a.finish()
    print("attack", r.returncode, r.stdout, r.stderr)
    hr = h.finish()
    print("holder", hr.returncode, hr.stdout, hr.stderr)
    print([str(p) for p in domain_processes(rig.lz.root)])
    time.sleep(8)
    print([str(p) for p in domain_processes(rig.lz.root)])
    print(open(list(rig.lz.root.rglob("coordinator.log"))[0]).read()[-3000:])
