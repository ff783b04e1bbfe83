// The known_hosts files of one SSH connection, read line by line the way OpenSSH reads them and
// matched through libssh2's matcher (plain names, [host]:port, hashed |1|salt|hash names).
//
// Why hvdrun feeds the lines itself instead of calling libssh2_knownhost_readfile: readfile stops
// at the first line it cannot parse, so every host listed after one bad line looked new and the
// default policy appended a key for it. Here each line goes to libssh2_knownhost_readline on its
// own; a line it rejects is skipped with a warning naming file and line, and the rest of the file
// still counts. Every entry remembers its file and line, so verdicts can name them.
//
// Markers (sshd(8) "SSH_KNOWN_HOSTS FILE FORMAT"): a key on an @revoked line is refused for the
// hosts the line names. @cert-authority lines are skipped: libssh2 1.10 cannot check host
// certificates, so a host trusted only through a CA counts as unknown. Wildcard and negated host
// patterns (*.example, !node3) are compared literally by libssh2, so they match no host.
//
// Thread model: a KnownHosts belongs to one SSH session and its thread. The files are shared:
// loadKnownHosts and appendKnownHost take one process-wide lock.
#pragma once

#include <libssh2.h>

#include <map>
#include <string>
#include <vector>

namespace hvd::launcher::ssh {

struct KnownHostsLocation {
  std::string file;
  int line = 0;
  std::string describe() const { return file + ":" + std::to_string(line); }
};

// One known_hosts line (without its end of line), split by its marker. Pure.
struct KnownHostsLine {
  enum class Kind {
    Skip,           // blank or comment
    Entry,          // "hosts keytype key [comment]"
    Revoked,        // "@revoked hosts keytype key": entry holds the part after the marker
    CertAuthority,  // "@cert-authority ...": not used (see above)
    BadMarker,      // "@something-else ..."
  };
  Kind kind = Kind::Skip;
  std::string marker;   // "@revoked", "@cert-authority", ...; empty for a plain entry
  std::string entry;    // the line without leading blanks, the marker and the trailing \r
  std::string keyType;  // the entry's second field ("ssh-ed25519"); empty when it has none
};
KnownHostsLine splitKnownHostsLine(const std::string& text);

// LIBSSH2_KNOWNHOST_KEY_* for the LIBSSH2_HOSTKEY_TYPE_* libssh2_session_hostkey reports.
int knownHostKeyType(int hostKeyType);
// The known_hosts spelling of a LIBSSH2_KNOWNHOST_KEY_* type: "ssh-ed25519", "ssh-rsa", ...
std::string keyTypeName(int knownHostKeyType);

// The key a host offered: its LIBSSH2_KNOWNHOST_KEY_* type and base64 blob, as known_hosts
// writes them.
struct OfferedKey {
  int type = 0;
  std::string base64;
};

struct KnownHostsVerdict {
  enum class Kind {
    Match,       // an entry for the host holds this key
    Changed,     // entries for the host hold other keys of the same type (lines: the first)
    OtherTypes,  // the host is listed only under other key types (lines: first line per type)
    Revoked,     // an @revoked line lists this key for the host (lines: that line)
    Unknown,     // the host is not listed
  };
  Kind kind = Kind::Unknown;
  struct Line {
    std::string keyType;
    KnownHostsLocation where;
  };
  std::vector<Line> lines;
};

class KnownHosts {
 public:
  // `session` is only used for libssh2's allocations and error messages (no I/O); it must
  // outlive this object. Throws IoError when libssh2 cannot allocate.
  explicit KnownHosts(LIBSSH2_SESSION* session);
  ~KnownHosts();
  KnownHosts(const KnownHosts&) = delete;
  KnownHosts& operator=(const KnownHosts&) = delete;

  // Adds one line; a line libssh2 rejects (or an unknown @marker) becomes a warning.
  void addLine(const std::string& text, const KnownHostsLocation& where);
  // Adds every line of `path`; a missing file holds nothing, an unreadable one is a warning.
  void addFile(const std::string& path);
  // "FILE:LINE: ..." for each line skipped, in the order met.
  const std::vector<std::string>& warnings() const { return warnings_; }

  // The entries for `host` (as connected to; [host]:port entries first, then plain host).
  KnownHostsVerdict check(const std::string& host, int port, const OfferedKey& key) const;
  // The LIBSSH2_KNOWNHOST_KEY_* types listed for `host`, without duplicates.
  std::vector<int> keyTypesFor(const std::string& host, int port) const;
  // The line that records `key` for host:port ("[host]:port" unless the port is 22).
  std::string lineFor(const std::string& host, int port, const OfferedKey& key) const;

 private:
  using Locations = std::map<const libssh2_knownhost*, KnownHostsVerdict::Line>;
  // Hands the entry to libssh2 and locates what it added; false when libssh2 rejects it.
  bool feed(LIBSSH2_KNOWNHOSTS* into, libssh2_knownhost*& last, Locations& locations,
            const KnownHostsLine& line, const KnownHostsLocation& where, std::string& error);
  // checkp's answer for host/key under `keyTypeMask`, with the line it points at.
  int lookup(LIBSSH2_KNOWNHOSTS* in, const Locations& locations, const std::string& host, int port,
             const std::string& base64, int keyTypeMask, KnownHostsVerdict::Line* line) const;
  // Every key type listed for `host`: the first line of each.
  std::vector<std::pair<int, KnownHostsVerdict::Line>> listedTypes(const std::string& host,
                                                                   int port) const;
  std::string lastError() const;

  LIBSSH2_SESSION* session_;
  LIBSSH2_KNOWNHOSTS* known_ = nullptr;
  LIBSSH2_KNOWNHOSTS* revoked_ = nullptr;
  libssh2_knownhost* lastKnown_ = nullptr;    // the last entry of known_ already located
  libssh2_knownhost* lastRevoked_ = nullptr;  // the same for revoked_
  Locations knownAt_;
  Locations revokedAt_;
  std::vector<std::string> warnings_;
};

// Reads `files` in order under the process-wide lock and logs each warning once per process
// (the same files are read for every host and every elastic round).
void loadKnownHosts(KnownHosts& into, const std::vector<std::string>& files);

// Appends one line to a known_hosts file under the process-wide lock (never rewrites the file,
// so lines libssh2 cannot parse are kept). Throws IoError naming the file.
void appendKnownHost(const std::string& path, const std::string& line);

}  // namespace hvd::launcher::ssh
