"""Host keys fail closed: real sshd servers (ssh_hosts.py) offering ed25519, RSA or both, and
known_hosts files with other key types, bad lines, hashed and @revoked entries, a global file,
and each --ssh-strict-host-key-checking value. Every check runs through the preflight, so a
refused host means nothing was started. Skips with the reason when namespaces cannot be made."""
import os
import shutil
import subprocess
import time

import pytest

from conftest import HVDRUN, REPO
from ssh_hosts import SSH_PORT, SshHosts, unavailable_reason

_reason = unavailable_reason()
# One worker of the parallel runner runs the module, in order, on one set of hosts.
pytestmark = [pytest.mark.skipif(_reason is not None, reason=f"SSH hosts: {_reason}"),
              pytest.mark.xdist_group("ssh_host_keys")]

ED25519, RSA, BOTH = 0, 1, 2  # the hosts, by the keys their sshd offers


@pytest.fixture(scope="module")
def hosts():
    h = SshHosts(3,
                 host_keys=[("ed25519",), ("rsa",), ("ed25519", "rsa")]).start()
    yield h
    h.close()


def known_name(hosts, i):
    return f"[{hosts.addresses[i]}]:{SSH_PORT}"


class Home:
    """A HOME for hvdrun with the client key, a known_hosts file and an ssh config whose
    GlobalKnownHostsFile is a file of the test's (never /etc)."""

    def __init__(self, hosts, tmp_path, known="", config=""):
        self.hosts = hosts
        self.path = tmp_path / "home"
        self.ssh = self.path / ".ssh"
        self.ssh.mkdir(parents=True, mode=0o700)
        shutil.copy(hosts.key, self.ssh / "id_ed25519")
        self.known = self.ssh / "known_hosts"
        self.known.write_text(known)
        self.global_known = tmp_path / "global_known_hosts"
        self.config = self.ssh / "config"
        self.config.write_text(config + f"Host *\n  GlobalKnownHostsFile {self.global_known}\n")

    def hvdrun(self, i, *flags):
        return subprocess.run([str(HVDRUN), "--ssh-port", str(SSH_PORT), "--ssh-connect-timeout",
                               "5", *flags, "-np", "1", "-H", f"{self.hosts.addresses[i]}:1",
                               "true"], capture_output=True, text=True, timeout=60,
                              env=self.hosts.env(HOME=str(self.path)), cwd=REPO)


def hashed(tmp_path, line):
    """`line` with its host name hashed, as ssh-keygen -H writes it."""
    scratch = tmp_path / "to_hash"
    scratch.write_text(line + "\n")
    subprocess.run(["ssh-keygen", "-H", "-f", str(scratch)], check=True, capture_output=True)
    return scratch.read_text().strip()


def test_a_host_known_under_another_key_type_is_refused_and_known_hosts_kept(hosts, tmp_path):
    a = hosts.addresses[RSA]
    home = Home(hosts, tmp_path, f"{known_name(hosts, RSA)} {hosts.host_key(ED25519)}\n")
    before = home.known.read_text()
    for flags in ((), ("--ssh-strict-host-key-checking", "accept-new"),
                  ("--ssh-strict-host-key-checking", "yes")):
        start = time.monotonic()
        r = home.hvdrun(RSA, *flags)
        assert r.returncode != 0, r.stderr
        assert time.monotonic() - start < 10, "refused at the check, not after a timeout"
        err = r.stderr
        assert "nothing was started" in err and f"host '{a}'" in err, err
        assert "HOST KEY TYPE CHANGED: the host offers the key ssh-rsa SHA256:" in err, err
        assert f"only under ssh-ed25519 ({home.known}:1)" in err, err
        assert f"ssh-keygen -R '{known_name(hosts, RSA)}' -f {home.known}" in err, err
        assert home.known.read_text() == before, "no key of another type is added"
    r = home.hvdrun(RSA, "--ssh-strict-host-key-checking", "no")
    assert r.returncode == 0, r.stderr
    assert home.known.read_text() == before


def test_a_host_with_several_keys_is_asked_for_the_type_known_hosts_lists(hosts, tmp_path):
    for kind in ("rsa", "ed25519"):
        line = f"{known_name(hosts, BOTH)} {hosts.host_key(BOTH, kind)}\n"
        home = Home(hosts, tmp_path / kind, line)
        before = home.known.read_text()
        r = home.hvdrun(BOTH)
        assert r.returncode == 0, r.stderr
        assert home.known.read_text() == before, f"checked against the {kind} key it holds"


def test_a_bad_line_is_skipped_with_its_file_and_line_and_later_lines_still_count(hosts, tmp_path):
    name, key = known_name(hosts, ED25519), hosts.host_key(ED25519)
    home = Home(hosts, tmp_path, "not-a-known-hosts-line\n"
                f"@cert-authority *.example {hosts.host_key(RSA, 'rsa')}\n"
                f"{hashed(tmp_path, f'{name} {key}')}\n")
    before = home.known.read_text()
    r = home.hvdrun(ED25519)
    assert r.returncode == 0, r.stderr
    assert (f"{home.known}:1: cannot parse this known_hosts line" in r.stderr and
            "skipped, the rest of the file is still used" in r.stderr), r.stderr
    assert f"{home.known}:2" not in r.stderr, "@cert-authority lines are skipped quietly"
    assert home.known.read_text() == before, "the hashed line after the bad one matched"
    # A wrong key after the bad line is still seen, and refused.
    home.known.write_text(f"not-a-known-hosts-line\n{name} {hosts.host_key(BOTH)}\n")
    r = home.hvdrun(ED25519)
    assert r.returncode != 0
    assert "HOST KEY CHANGED" in r.stderr and f"does not match {home.known}:2" in r.stderr, r.stderr
    assert home.known.read_text().count(name) == 1, "a changed key is never added"


def test_a_revoked_key_is_refused(hosts, tmp_path):
    name, key = known_name(hosts, ED25519), hosts.host_key(ED25519)
    home = Home(hosts, tmp_path, f"@revoked {name} {key}\n{name} {key}\n")
    r = home.hvdrun(ED25519)
    assert r.returncode != 0
    assert "HOST KEY REVOKED" in r.stderr and f"which {home.known}:1 marks @revoked" in r.stderr


def test_the_global_known_hosts_file_is_read_and_never_written(hosts, tmp_path):
    home = Home(hosts, tmp_path)
    home.global_known.write_text(f"{known_name(hosts, ED25519)} {hosts.host_key(ED25519)}\n")
    before = home.global_known.read_text()
    for flags in ((), ("--ssh-strict-host-key-checking", "yes")):
        r = home.hvdrun(ED25519, *flags)
        assert r.returncode == 0, r.stderr
        assert home.known.read_text() == "", "a key the global file holds is not recorded again"
        assert home.global_known.read_text() == before


def test_strict_yes_refuses_an_unknown_host_accept_new_records_it_no_checks_nothing(hosts,
                                                                                    tmp_path):
    a = hosts.addresses[ED25519]
    home = Home(hosts, tmp_path)
    r = home.hvdrun(ED25519, "--ssh-strict-host-key-checking", "yes")
    assert r.returncode != 0 and "nothing was started" in r.stderr
    err = r.stderr
    assert f"host '{a}'" in err and "host key ssh-ed25519 SHA256:" in err, err
    assert f"is not in {home.known}, {home.known}2, {home.global_known}" in err, err
    assert "(--ssh-strict-host-key-checking yes)" in err, err
    assert f"ssh-keyscan -p {SSH_PORT} {a} >> {home.known}" in err, err
    assert home.known.read_text() == "", "nothing appended"
    for flags in (("--ssh-strict-host-key-checking", "no"), ("--ssh-no-host-key-check",)):
        r = home.hvdrun(ED25519, *flags)
        assert r.returncode == 0, r.stderr
        assert home.known.read_text() == "", "no check, nothing recorded"
    r = home.hvdrun(ED25519, "--ssh-strict-host-key-checking", "accept-new")
    assert r.returncode == 0, r.stderr
    assert "permanently added host key ssh-ed25519 SHA256:" in r.stderr
    assert home.known.read_text() == f"{known_name(hosts, ED25519)} {hosts.host_key(ED25519)}\n"


def test_strict_host_key_checking_from_the_ssh_config_and_the_flag_wins(hosts, tmp_path):
    a = hosts.addresses[ED25519]
    home = Home(hosts, tmp_path, config=f"Host {a}\n  StrictHostKeyChecking yes\n"
                                        "  UserKnownHostsFile ~/.ssh/job_known_hosts\n")
    custom = home.ssh / "job_known_hosts"
    r = home.hvdrun(ED25519)
    assert r.returncode != 0
    assert f"StrictHostKeyChecking yes in {home.config}" in r.stderr, r.stderr
    assert f"is not in {custom}, {home.global_known}" in r.stderr, r.stderr
    assert not custom.exists()
    r = home.hvdrun(ED25519, "--ssh-strict-host-key-checking", "accept-new")
    assert r.returncode == 0, r.stderr
    assert known_name(hosts, ED25519) in custom.read_text(), "recorded in UserKnownHostsFile"
    assert home.known.read_text() == ""


def test_bad_values_are_errors_naming_the_flag_or_the_config_line(hosts, tmp_path):
    home = Home(hosts, tmp_path)
    r = home.hvdrun(ED25519, "--ssh-strict-host-key-checking", "maybe")
    assert r.returncode == 2 and "--ssh-strict-host-key-checking" in r.stderr, r.stderr
    r = home.hvdrun(ED25519, "--ssh-no-host-key-check", "--ssh-strict-host-key-checking", "yes")
    assert r.returncode == 2, r.stderr
    assert ("--ssh-no-host-key-check means --ssh-strict-host-key-checking no, but "
            "--ssh-strict-host-key-checking yes was given too") in r.stderr
    home.config.write_text("Host *\n  StrictHostKeyChecking maybe\n")
    r = home.hvdrun(ED25519)
    assert r.returncode != 0
    assert f"{home.config}:2: StrictHostKeyChecking 'maybe'" in r.stderr, r.stderr
