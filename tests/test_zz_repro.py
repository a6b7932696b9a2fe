import runpy
def test_repro():
    runpy.run_path("/tmp/repro.py")
