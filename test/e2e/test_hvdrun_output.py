"""Every rank's output reaches the console whole, prefixed, and nothing is lost at a crash."""
import os
import re
import subprocess

from conftest import HVDRUN, python_worker, run_hvdrun

WRITER = """
import os, sys, time
rank = os.environ['HVD_RANK']
for i in range(300):
    # each line is written in three pieces, flushed separately, to tempt interleaving
    sys.stdout.write(f'rank {rank} ')
    sys.stdout.flush()
    sys.stdout.write(f'line {i} ')
    sys.stdout.flush()
    sys.stdout.write('x' * (i % 50) + '\\n')
    sys.stdout.flush()
    if i % 100 == 0:
        sys.stderr.write(f'rank {rank} err {i}\\n')
        sys.stderr.flush()
sys.stdout.write(f'rank {rank} unterminated')
"""


def test_lines_are_whole_and_prefixed():
    r = run_hvdrun("-np", 4, *python_worker(WRITER))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    pattern = re.compile(r"^\[(\d)\]<stdout>:rank (\d) line (\d+) (x*)$")
    counts = {rank: 0 for rank in range(4)}
    for line in lines:
        if line.endswith("unterminated"):
            assert re.match(r"^\[(\d)\]<stdout>:rank \1 unterminated$", line), line
            continue
        m = pattern.match(line)
        assert m, f"mangled line: {line!r}"
        assert m.group(1) == m.group(2)
        assert len(m.group(4)) == int(m.group(3)) % 50
        counts[int(m.group(1))] += 1
    assert counts == {rank: 300 for rank in range(4)}
    assert sum(1 for l in lines if l.endswith("unterminated")) == 4
    for rank in range(4):
        assert f"[{rank}]<stderr>:rank {rank} err 200" in r.stderr


def test_output_written_just_before_a_crash_is_kept():
    script = "printf 'line one\\nlast words'; kill -9 $$"
    r = run_hvdrun("-np", 1, "sh", "-c", script)
    assert r.returncode == 137
    assert "[0]<stdout>:line one" in r.stdout
    assert "[0]<stdout>:last words" in r.stdout


def test_output_filename_keeps_each_ranks_streams(tmp_path):
    code = "import os, sys; print('out', os.environ['HVD_RANK']); print('err', file=sys.stderr)"
    r = run_hvdrun("-np", 2, "--output-filename", tmp_path, *python_worker(code))
    assert r.returncode == 0, r.stderr
    assert "[1]<stdout>:out 1" in r.stdout  # the console still gets it
    assert (tmp_path / "rank.01" / "stdout").read_text() == "out 1\n"
    assert (tmp_path / "rank.00" / "stderr").read_text() == "err\n"


FILLER = """
import os, sys
rank = os.environ['HVD_RANK']
for i in range(200):
    print(f'rank {rank} line {i}', 'x' * 200, flush=True)
print('err', rank, file=sys.stderr)
"""


def test_output_filename_on_a_full_disk_is_said_once_per_rank_and_the_console_keeps_all(tmp_path):
    # A 16 KiB tmpfs: both ranks' 40 KiB of stdout fill it.
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", str(disk)],
                             capture_output=True, text=True)
    assert mounted.returncode == 0, mounted.stderr
    try:
        r = run_hvdrun("-np", 2, "--output-filename", disk, *python_worker(FILLER))
    finally:
        subprocess.run(["umount", str(disk)], check=True)
    assert r.returncode == 0, r.stderr
    for rank in (0, 1):
        # Once per stream: stdout's file filled the disk, stderr's then found it full.
        warnings = re.findall(rf"^hvdrun: --output-filename: cannot write {disk}/rank.0{rank}/"
                              rf"(\w+): No space left on device; rank {rank}'s (\w+) goes on to "
                              "this console only$", r.stderr, re.M)
        assert sorted(warnings) == [("stderr", "stderr"), ("stdout", "stdout")], \
            r.stderr[-2000:]
        # Every line still reached the console.
        assert [f"[{rank}]<stdout>:rank {rank} line {i} " + "x" * 200 for i in range(200)] == \
            [line for line in r.stdout.splitlines() if line.startswith(f"[{rank}]<stdout>:")]
        assert f"[{rank}]<stderr>:err {rank}" in r.stderr


BAR = """
import os, sys, time
sys.stderr.write('\\rstep 1'); sys.stderr.flush()
sys.stderr.write('\\rstep 2'); sys.stderr.flush()
deadline = time.time() + 30
while not os.path.exists(sys.argv[1]) and time.time() < deadline:
    time.sleep(0.05)
sys.stderr.write('\\rstep 3\\n')
"""


def test_a_progress_bar_is_forwarded_while_it_runs(tmp_path):
    # The worker redraws a bar with '\r' (as tqdm does) and then waits for the test, which goes
    # on only once hvdrun has forwarded a redraw: the bar moves before its line ends.
    seen = tmp_path / "seen"
    proc = subprocess.Popen([str(HVDRUN), "-np", "1", *python_worker(BAR), str(seen)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        first = os.read(proc.stderr.fileno(), 4096)
        assert first == b"[0]<stderr>:step 1\r"
        seen.touch()
        rest = proc.stderr.read()
        assert proc.wait(timeout=30) == 0
    finally:
        proc.kill()
        proc.wait()
    assert rest == b"[0]<stderr>:step 2\r[0]<stderr>:step 3\n"
