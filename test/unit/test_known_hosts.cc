#include <libssh2.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <memory>

#include "common/error.h"
#include "launcher/remote_hosts.h"
#include "launcher/ssh/host_key_check.h"
#include "launcher/ssh/host_key_policy.h"
#include "launcher/ssh/known_hosts.h"
#include "launcher/ssh/ssh_config.h"
#include "launcher/ssh/ssh_session.h"

using namespace hvd::launcher;
using namespace hvd::launcher::ssh;

namespace {

// Keys made once with ssh-keygen; the hashed line is `ssh-keygen -H` of "[node9]:2222 ED_A".
const std::string kEdA = "AAAAC3NzaC1lZDI1NTE5AAAAIDhuMqoaWhaIolpAi0D88Kxen+x6JwmcPjtHKfiEU8ns";
const std::string kEdB = "AAAAC3NzaC1lZDI1NTE5AAAAIKtcYDIv6l3FcsDwxvarMq9JwRXqWB6iAxYG9JKO7cUy";
const std::string kRsa =
    "AAAAB3NzaC1yc2EAAAADAQABAAAAgQDiU4j/tf3gXSunO7o8qqLeoWqlwyYZxG9vUREkP5yAR8SPjd+/NX3ZhUHY+"
    "UHd7DAPTD9u7n+tK3ueRlbDPgq2qsQQv0ZrLobGsFzZXauDb1pSRaJjXoTBQFK/k8ZCcI1XcgjrNGWY3PX2FxPuIO2"
    "bJgRZvvdy3LnHTY5t+62Z9Q==";
const std::string kHashedNode9 =
    "|1|vo1ydiUk2uCPBUb7Ll3c1DiRlGw=|A0+IbjPzSDpWpmAQGZspKgK9rwU= ssh-ed25519 " + kEdA;

const OfferedKey kOfferEdA{LIBSSH2_KNOWNHOST_KEY_ED25519, kEdA};
const OfferedKey kOfferRsa{LIBSSH2_KNOWNHOST_KEY_SSHRSA, kRsa};

// A libssh2 session that never connects: KnownHosts only allocates through it.
struct Session {
  std::unique_ptr<LIBSSH2_SESSION, decltype(&libssh2_session_free)> s{libssh2_session_init(),
                                                                      libssh2_session_free};
};

void addLines(KnownHosts& known, const std::vector<std::string>& lines) {
  int n = 0;
  for (const auto& line : lines) known.addLine(line, {"kh", ++n});
}

using Kind = KnownHostsVerdict::Kind;

}  // namespace

TEST_CASE("known_hosts lines: markers, comments, the key type field") {
  CHECK(splitKnownHostsLine("").kind == KnownHostsLine::Kind::Skip);
  CHECK(splitKnownHostsLine("   # a comment").kind == KnownHostsLine::Kind::Skip);
  auto entry = splitKnownHostsLine("  a,b ssh-ed25519 AAAA comment\r");
  CHECK(entry.kind == KnownHostsLine::Kind::Entry);
  CHECK(entry.entry == "a,b ssh-ed25519 AAAA comment");
  CHECK(entry.keyType == "ssh-ed25519");
  auto revoked = splitKnownHostsLine("@revoked\t*.example ssh-rsa AAAA");
  CHECK(revoked.kind == KnownHostsLine::Kind::Revoked);
  CHECK(revoked.entry == "*.example ssh-rsa AAAA");
  CHECK(revoked.keyType == "ssh-rsa");
  CHECK(splitKnownHostsLine("@cert-authority *.example ssh-ed25519 AAAA").kind ==
        KnownHostsLine::Kind::CertAuthority);
  auto bad = splitKnownHostsLine("@trusted host ssh-ed25519 AAAA");
  CHECK(bad.kind == KnownHostsLine::Kind::BadMarker);
  CHECK(bad.marker == "@trusted");
  CHECK(splitKnownHostsLine("garbage").keyType.empty());
}

TEST_CASE("known_hosts: a line libssh2 rejects is skipped with file:line, later lines count") {
  Session session;
  KnownHosts known(session.s.get());
  addLines(known, {"not-a-known-hosts-line", "# comment", "", "[node9]:2222 ssh-ed25519 " + kEdA});
  CHECK(known.check("node9", 2222, kOfferEdA).kind == Kind::Match);
  REQUIRE(known.warnings().size() == 1);
  CHECK_THAT(known.warnings()[0], Catch::StartsWith("kh:1: cannot parse this known_hosts line"));
  CHECK_THAT(known.warnings()[0], Catch::Contains("the rest of the file is still used"));

  KnownHosts wrong(session.s.get());
  addLines(wrong, {"short key", "[node9]:2222 ssh-ed25519 " + kEdB});
  auto verdict = wrong.check("node9", 2222, kOfferEdA);
  CHECK(verdict.kind == Kind::Changed);
  REQUIRE(verdict.lines.size() == 1);
  CHECK(verdict.lines[0].where.describe() == "kh:2");
}

TEST_CASE("known_hosts: a host listed only under other key types is not unknown") {
  Session session;
  KnownHosts known(session.s.get());
  addLines(known, {"other ssh-rsa " + kRsa, "[node9]:2222 ssh-ed25519 " + kEdA,
                   "node9 ecdsa-sha2-nistp256 " + kEdB});
  auto verdict = known.check("node9", 2222, kOfferRsa);
  CHECK(verdict.kind == Kind::OtherTypes);
  REQUIRE(verdict.lines.size() == 2);
  CHECK(verdict.lines[0].keyType == "ssh-ed25519");
  CHECK(verdict.lines[0].where.describe() == "kh:2");
  CHECK(verdict.lines[1].keyType == "ecdsa-sha2-nistp256");
  CHECK(known.keyTypesFor("node9", 2222) ==
        std::vector<int>{LIBSSH2_KNOWNHOST_KEY_ED25519, LIBSSH2_KNOWNHOST_KEY_ECDSA_256});
  CHECK(known.check("node10", 2222, kOfferRsa).kind == Kind::Unknown);
  CHECK(known.keyTypesFor("node10", 22).empty());
  // Types libssh2 cannot name still make the host known.
  KnownHosts odd(session.s.get());
  addLines(odd, {"node9 sk-ssh-ed25519@openssh.com " + kEdB});
  auto oddVerdict = odd.check("node9", 22, kOfferEdA);
  CHECK(oddVerdict.kind == Kind::OtherTypes);
  CHECK(oddVerdict.lines.at(0).keyType == "sk-ssh-ed25519@openssh.com");
}

TEST_CASE("known_hosts: hashed names, @revoked and @cert-authority") {
  Session session;
  KnownHosts known(session.s.get());
  addLines(known, {"@cert-authority *.example ssh-ed25519 " + kEdB, kHashedNode9,
                   "@revoked node7 ssh-ed25519 " + kEdA, "node7 ssh-ed25519 " + kEdA,
                   "@trusted node8 ssh-ed25519 " + kEdA});
  CHECK(known.check("node9", 2222, kOfferEdA).kind == Kind::Match);
  CHECK(known.check("node9", 22, kOfferEdA).kind == Kind::Unknown);
  auto revoked = known.check("node7", 22, kOfferEdA);
  CHECK(revoked.kind == Kind::Revoked);
  CHECK(revoked.lines.at(0).where.describe() == "kh:3");
  REQUIRE(known.warnings().size() == 1);
  CHECK_THAT(known.warnings()[0], Catch::StartsWith("kh:5: unknown marker @trusted"));
}

TEST_CASE("known_hosts: files are read line by line, and the form of a recorded line") {
  Session session;
  char dir[] = "/tmp/hvd-known-hosts-XXXXXX";
  REQUIRE(::mkdtemp(dir));
  std::string file = std::string(dir) + "/known_hosts";
  std::ofstream(file) << "x\n[node9]:2222 ssh-ed25519 " << kEdA << "\n";
  KnownHosts known(session.s.get());
  known.addFile(file);
  known.addFile(std::string(dir) + "/missing");
  known.addFile(dir);
  CHECK(known.check("node9", 2222, kOfferEdA).kind == Kind::Match);
  REQUIRE(known.warnings().size() == 2);
  CHECK_THAT(known.warnings()[0], Catch::StartsWith(file + ":1: cannot parse"));
  CHECK_THAT(known.warnings()[1], Catch::Contains("is a directory"));
  CHECK(known.lineFor("10.0.0.2", 2222, kOfferEdA) == "[10.0.0.2]:2222 ssh-ed25519 " + kEdA + "\n");
  CHECK(known.lineFor("node9", 22, kOfferRsa) == "node9 ssh-rsa " + kRsa + "\n");
  std::filesystem::remove_all(dir);
}

TEST_CASE("host key policy: the flag's and ssh_config's spellings") {
  CHECK(parseHostKeyPolicy("yes") == HostKeyPolicy::Strict);
  CHECK(parseHostKeyPolicy("Ask") == HostKeyPolicy::Strict);
  CHECK(parseHostKeyPolicy("accept-new") == HostKeyPolicy::AcceptNew);
  CHECK(parseHostKeyPolicy("no") == HostKeyPolicy::Off);
  CHECK(parseHostKeyPolicy("off") == HostKeyPolicy::Off);
  CHECK_FALSE(parseHostKeyPolicy("maybe"));
  CHECK(std::string(hostKeyPolicyName(HostKeyPolicy::AcceptNew)) == "accept-new");
}

TEST_CASE("host key decisions: what is refused, recorded or accepted, and what the message says") {
  SshTarget t;
  t.alias = t.address = "10.0.0.2";
  t.port = 2222;
  t.user = "alice";
  t.userKnownHosts = {"/h/.ssh/known_hosts", "/h/.ssh/known_hosts2"};
  t.globalKnownHosts = {"/etc/ssh/ssh_known_hosts"};
  OfferedHostKey rsa{"ssh-rsa", "SHA256:abc"};
  KnownHostsVerdict verdict;

  verdict.kind = Kind::Match;
  CHECK(decideHostKey(t, verdict, rsa).action == HostKeyDecision::Action::Accept);

  verdict.kind = Kind::OtherTypes;
  verdict.lines = {{"ssh-ed25519", {"/etc/ssh/ssh_known_hosts", 4}}};
  auto other = decideHostKey(t, verdict, rsa);
  CHECK(other.action == HostKeyDecision::Action::Refuse);
  CHECK(other.failure == SshFailure::HostKeyChanged);
  CHECK_THAT(other.message, Catch::Contains("offers the key ssh-rsa SHA256:abc"));
  CHECK_THAT(other.message, Catch::Contains("only under ssh-ed25519 (/etc/ssh/ssh_known_hosts:4)"));
  CHECK_THAT(other.message,
             Catch::Contains("ssh-keygen -R '[10.0.0.2]:2222' -f /etc/ssh/ssh_known_hosts"));

  verdict.kind = Kind::Changed;
  verdict.lines = {{"ssh-rsa", {"/h/.ssh/known_hosts", 2}}};
  auto changed = decideHostKey(t, verdict, rsa);
  CHECK(changed.failure == SshFailure::HostKeyChanged);
  CHECK_THAT(changed.message,
             Catch::StartsWith("HOST KEY CHANGED: the host now offers SHA256:abc"));
  CHECK_THAT(changed.message, Catch::Contains("/h/.ssh/known_hosts:2"));

  verdict.kind = Kind::Revoked;
  CHECK(decideHostKey(t, verdict, rsa).failure == SshFailure::HostKeyRevoked);

  verdict.kind = Kind::Unknown;
  verdict.lines.clear();
  auto recorded = decideHostKey(t, verdict, rsa);
  CHECK(recorded.action == HostKeyDecision::Action::Record);
  CHECK_THAT(recorded.message, Catch::Contains("to /h/.ssh/known_hosts"));
  t.hostKeyPolicy = HostKeyPolicy::Strict;
  t.hostKeyPolicySource = "--ssh-strict-host-key-checking yes";
  auto strict = decideHostKey(t, verdict, rsa);
  CHECK(strict.failure == SshFailure::HostKeyUnknown);
  CHECK_THAT(strict.message,
             Catch::Contains("not in /h/.ssh/known_hosts, /h/.ssh/known_hosts2, "
                             "/etc/ssh/ssh_known_hosts, and strict host key checking is on "
                             "(--ssh-strict-host-key-checking yes)"));
  CHECK_THAT(strict.message,
             Catch::Contains("ssh-keyscan -p 2222 10.0.0.2 >> /h/.ssh/known_hosts"));
  t.hostKeyPolicy = HostKeyPolicy::AcceptNew;
  t.userKnownHosts.clear();
  CHECK(decideHostKey(t, verdict, rsa).action == HostKeyDecision::Action::Accept);
}

TEST_CASE("host key algorithms: the types known_hosts lists come first") {
  std::vector<std::string> supported{"ecdsa-sha2-nistp256",
                                     "ecdsa-sha2-nistp256-cert-v01@openssh.com", "ssh-ed25519",
                                     "ssh-rsa", "ssh-dss"};
  CHECK(hostKeyAlgorithmPreference(supported, {LIBSSH2_KNOWNHOST_KEY_SSHRSA}) ==
        "ssh-rsa,ecdsa-sha2-nistp256,ecdsa-sha2-nistp256-cert-v01@openssh.com,ssh-ed25519,ssh-dss");
  CHECK(hostKeyAlgorithmPreference(
            supported, {LIBSSH2_KNOWNHOST_KEY_ED25519, LIBSSH2_KNOWNHOST_KEY_ECDSA_256}) ==
        "ecdsa-sha2-nistp256,ssh-ed25519,ecdsa-sha2-nistp256-cert-v01@openssh.com,ssh-rsa,ssh-dss");
  CHECK(hostKeyAlgorithmPreference(supported, {}).empty());
}

TEST_CASE("key exchange: ECDH P-256 first, the others in libssh2's order") {
  std::vector<std::string> supported{"curve25519-sha256", "curve25519-sha256@libssh.org",
                                     "ecdh-sha2-nistp256", "ecdh-sha2-nistp384",
                                     "diffie-hellman-group14-sha256"};
  CHECK(keyExchangePreference(supported) ==
        "ecdh-sha2-nistp256,curve25519-sha256,curve25519-sha256@libssh.org,ecdh-sha2-nistp384,"
        "diffie-hellman-group14-sha256");
  CHECK(keyExchangePreference({"curve25519-sha256", "diffie-hellman-group14-sha256"}).empty());
}

TEST_CASE("ssh_config: StrictHostKeyChecking and the known_hosts files") {
  const std::string text =
      "Host strict\n  StrictHostKeyChecking yes\n  UserKnownHostsFile ~/kh /tmp/kh2\n"
      "  GlobalKnownHostsFile none\nHost *\n  StrictHostKeyChecking no\n";
  auto strict = lookupSshConfig(text, "cfg", "strict", "/h");
  CHECK(strict.strictHostKeyChecking == HostKeyPolicy::Strict);
  CHECK(strict.userKnownHostsFiles == std::vector<std::string>{"/h/kh", "/tmp/kh2"});
  REQUIRE(strict.globalKnownHostsFiles);
  CHECK(strict.globalKnownHostsFiles->empty());
  auto other = lookupSshConfig(text, "cfg", "other", "/h");
  CHECK(other.strictHostKeyChecking == HostKeyPolicy::Off);
  CHECK_FALSE(other.userKnownHostsFiles);
  REQUIRE_THROWS_WITH(
      lookupSshConfig("Host a\n  StrictHostKeyChecking maybe\n", "/h/.ssh/config", "a", "/h"),
      Catch::Contains("/h/.ssh/config:2: StrictHostKeyChecking 'maybe'"));
}

TEST_CASE("ssh targets: the flag's host key policy wins over ~/.ssh/config's") {
  char home[] = "/tmp/hvd-ssh-home-XXXXXX";
  REQUIRE(::mkdtemp(home));
  std::string ssh = std::string(home) + "/.ssh";
  std::filesystem::create_directories(ssh);
  std::ofstream(ssh + "/config") << "Host strict\n  StrictHostKeyChecking yes\n"
                                    "  GlobalKnownHostsFile /tmp/global\n";
  Environment env{{"HOME", home}};
  SshOptions o;
  auto t = sshTargetFor(HostSlots("strict"), o, env);
  CHECK(t.hostKeyPolicy == HostKeyPolicy::Strict);
  CHECK(t.hostKeyPolicySource == "StrictHostKeyChecking yes in " + ssh + "/config");
  CHECK(t.userKnownHosts == std::vector<std::string>{ssh + "/known_hosts", ssh + "/known_hosts2"});
  CHECK(t.globalKnownHosts == std::vector<std::string>{"/tmp/global"});
  o.hostKeyPolicy = HostKeyPolicy::AcceptNew;
  t = sshTargetFor(HostSlots("strict"), o, env);
  CHECK(t.hostKeyPolicy == HostKeyPolicy::AcceptNew);
  CHECK(t.hostKeyPolicySource == "--ssh-strict-host-key-checking accept-new");
  auto plain = sshTargetFor(HostSlots("plain"), SshOptions{}, env);
  CHECK(plain.hostKeyPolicy == HostKeyPolicy::AcceptNew);
  CHECK(plain.globalKnownHosts ==
        std::vector<std::string>{"/etc/ssh/ssh_known_hosts", "/etc/ssh/ssh_known_hosts2"});
  std::filesystem::remove_all(home);
}
